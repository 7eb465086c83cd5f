// Candidate shapes for the skinny GEMM (m <= 16) against the shipped kernel
// (ffi/kernels/sm90_skinny.h: 64-column CTAs of 2 warps, 64-deep K
// stages, 4 stages, K split across a thread-block cluster that adds its
// partials through distributed shared memory; 128-column CTAs of 4 warps
// until --wide below found 64 faster).
//
// Why: under ncu on the stacked case 8 x 2048 x 2048 the then shipped kernel
// (128 CTAs, 74 KiB each, clusters of 8) ran 10.75 us where XLA's Triton
// GEMM (256 CTAs of 128 threads, 18 KiB, no cluster, its split-K partials
// added by a second kernel) ran 7.17 us.  The candidates here have no
// cluster: the `split` CTAs of a column tile write float32 partials to a
// workspace, and the last to arrive (an atomic count per tile, which that
// CTA resets to zero) adds them in rank order (deterministic) and runs the
// epilogue, so a GEMM stays one launch.  Template knobs: the tile's columns
// (BN: 64 or 128, one warp per 32), the K depth of a stage (BK: 32 or 64)
// and the stages (2-4); the split is a run-time argument.  The "b"
// candidates (NN) move each stage by bulk copies, a row a lane, completing
// on an mbarrier, with up to 8 stages and 256 columns a CTA: on the H200
// a plain stream of 32 MB took 13.6 us from 128 CTAs of 128 threads and 9.5
// from 528 of 256 (benchmarks/results/2026-12-04-h200-3bc3d7b), so the bytes
// a CTA keeps in flight may be what holds the shipped kernel near 2.5 TB/s.
//
// Each candidate is checked against a naive float32 kernel (windows inside
// poisoned buffers, B's layer chosen on the device, NN and NT, beta 0 and
// 1.5, odd m, n, k), then timed as 32 GEMMs captured in one CUDA graph, each
// reading a new layer of B (cold, as in a stacked-weights loop).  Build and
// run (offline, sm_90a, no CUTLASS; `--floors` instead times what a call
// costs before its first byte: the counter alone, empty launches with and
// without a cluster and shared memory (clusters of 1-16 on the grids a K
// split runs), one dependent read, plain streams,
// the shipped kernel on almost no bytes, and a candidate launched as a
// programmatic dependent (PDL) after the counter and after itself, and the
// candidate asking L2 for the next layer's weights while it streams its
// own, at its start or after its main loop; `--hot` the table loop's NN
// cells where the narrow tile is planned, B hot, the library's narrow tile
// against every candidate and against the wide tile at 128 and 64 columns
// a CTA and every cluster size; `--wide` the cells where the wide tile is
// planned, NN and NT, hot and cold, at 128 and 64 columns; `--rule` both
// tiles around the tile rule's bounds; `--xsplit` the table loop's cells
// with the candidates' split in XLA's shape, the partials added by a
// second grid, and the partials' grid alone; `--deep` 64-column tiles over
// all of K with no split, B's 128-byte rows by deep TMA pipelines, in the
// table loop's and the stacked loop's cells; `--kwarps` candidates with
// warps along K (SkinnyV's KW) beside the library's tiles, NN and NT, hot
// and cold; `--ncu M N K` launches the
// narrow tile, the wide tile at the planner's split and the deep
// candidates three times each on one shape, B hot, outside any graph, for
// `ncu --cache-control none -k regex:"Skinny|Narrow"`):
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I ffi \
//     benchmarks/skinny/variants.cu -o /tmp/skinny_variants && /tmp/skinny_variants
#include <cuda.h>
#include <cudaTypedefs.h>  // PFN_cuTensorMapEncodeTiled
#include <cuda_bf16.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "kernels/sm90_skinny_narrow.h"
#include "probe_common.h"

using jax_dynoff::kernels::SkinnyLaunch;
using jax_dynoff::kernels::SkinnyOperand;
using jax_dynoff::kernels::SkinnySplit;
namespace sk = jax_dynoff::kernels::skinny;

// The workspace of the candidates: per column tile `split` float32
// partials of 16 x BN, and one arrival count (zero between launches).
struct Reduce {
  float* partials = nullptr;
  unsigned* counters = nullptr;
};
Reduce g_red;

// An L2 prefetch of the next GEMM's weights (a stacked-weights loop's layer
// i + 1 while layer i streams), for the --floors timings: every CTA asks for
// its share of `bytes` at `next` with bulk prefetches, at its start (at = 1)
// or once its main loop has read its stages (at = 2); at = 0: none.
struct Prefetch {
  const char* next = nullptr;
  size_t bytes = 0;
  int at = 0;
};
Prefetch g_pf;

__device__ __forceinline__ void PrefetchShare(const Prefetch& P) {
  constexpr size_t kPiece = 16384;  // bytes per bulk prefetch (16-aligned)
  const size_t share = (P.bytes / gridDim.x + 15) & ~size_t(15);
  const size_t lo = blockIdx.x * share;
  const size_t hi = min(P.bytes, lo + share);
  for (size_t o = lo + threadIdx.x * kPiece; o < hi; o += blockDim.x * kPiece) {
    const unsigned size = static_cast<unsigned>(min(kPiece, hi - o));
    asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;\n" ::"l"(
                     P.next + o), "r"(size) : "memory");
  }
}
constexpr size_t kPartialFloats = size_t(1) << 24;  // 64 MiB
constexpr int kMaxCounters = 4096;

// A 16-byte chunk's place in a shared-memory row of `kChunks` chunks: the
// 8 rows one ldmatrix reads at the same logical chunk land in 8 different
// bank groups (rows of 4 chunks: two rows share a 128-byte line).
template <int kChunks>
__device__ __forceinline__ uint32_t SwzC(int row, int chunk) {
  static_assert(kChunks == 4 || kChunks >= 8, "rows of 4 or 8+ chunks");
  const int p = kChunks >= 8 ? chunk ^ (row & 7) : chunk ^ ((row >> 1) & 3);
  return static_cast<uint32_t>(row * kChunks * 16 + p * 16);
}

// A's stage for the cp.async and deep candidates: 16 rows x BK of K from
// k0, 16-byte chunks swizzled for ldmatrix (SwzC); rows past m and K past
// k_hi are zero-filled.
template <int BK, int kThreads>
__device__ __forceinline__ void LoadAStage(uint32_t dst, const T* A,
                                           int64_t lda, int m, int k_hi,
                                           int k0, int tid) {
  constexpr int kM = 16, kAChunks = BK / 8;
  for (int q = tid; q < kM * kAChunks; q += kThreads) {
    const int row = q / kAChunks, c = q % kAChunks, kk = k0 + c * 8;
    const bool ok = row < m && kk < k_hi;
    sk::CpAsync16(dst + SwzC<kAChunks>(row, c), ok ? A + row * lda + kk : A,
                  ok);
  }
}

// A candidate CTA's share of a GEMM: its column tile (n0 its first
// column) and, of that tile's `split` CTAs, its rank's K tiles [t_begin,
// t_end) of BK rows (k_hi: where its K ends), as Finish adds the ranks.
struct Share {
  int tile, rank, n0, t_begin, t_end, k_hi;
};
template <int BN, int BK>
__device__ __forceinline__ Share ShareOf(const SkinnyLaunch& L) {
  Share w;
  const int split = L.split_k;
  w.tile = static_cast<int>(blockIdx.x) / split;
  w.rank = static_cast<int>(blockIdx.x) % split;
  w.n0 = w.tile * BN;
  const int k_tiles = (L.k + BK - 1) / BK;
  w.t_begin = static_cast<int>(int64_t{w.rank} * k_tiles / split);
  w.t_end = static_cast<int>(int64_t{w.rank + 1} * k_tiles / split);
  w.k_hi = min(L.k, w.t_end * BK);
  return w;
}

// The candidates' end: the float32 partial tile, then (split > 1) the
// last CTA of a column tile to arrive adds the partials in rank order and
// runs the epilogue; split 1 stages its tile in shared memory (`smem`, no
// longer read by the main loop) and stores it.
template <int BN, int kThreads = BN>
__device__ __forceinline__ void Finish(const SkinnyLaunch& L, const Reduce& R,
                                       const float (&acc)[4][4],
                                       const Share& w, unsigned char* smem) {
  constexpr int kM = 16;
  const int tile = w.tile, rank = w.rank, n0 = w.n0;
  __shared__ unsigned s_last;
  const int split = L.split_k;
  const int tid = static_cast<int>(threadIdx.x), warp = tid >> 5,
            lane = tid & 31;
  const bool two_halves = L.m > 8;  // rows 8-15 hold anything
  T* D = reinterpret_cast<T*>(const_cast<char*>(L.d.Locate()));
  const T* C = L.beta != 0.f ? reinterpret_cast<const T*>(L.c.Locate())
                             : nullptr;
  auto epilogue = [&](int row, int col, const float (&v)[8]) {
    float c[8] = {};
    if (C != nullptr) sk::LoadChunk(C + row * L.c.ld + n0 + col, 8, c);
    float o[8];
#pragma unroll
    for (int e = 0; e < 8; ++e) o[e] = L.alpha * v[e] + L.beta * c[e];
    sk::StoreChunk(D + row * L.d.ld + n0 + col, 8, o);
  };
  float* mine = R.partials + (size_t(tile) * split + rank) * kM * BN;
  if (split == 1) mine = reinterpret_cast<float*>(smem);  // after the wait
  __syncthreads();  // (split 1: every warp is done with the stages)
  auto put = [&](float* p, float x, float y) {  // L2 only, or shared
    if (split > 1) __stcg(reinterpret_cast<float2*>(p), make_float2(x, y));
    else *reinterpret_cast<float2*>(p) = make_float2(x, y);
  };
  // (With warps along K, the first BN / 32 warps hold the CTA's sums.)
  if (kThreads == BN || warp < BN / 32) {
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int row = lane >> 2, col = warp * 32 + j * 8 + (lane & 3) * 2;
      put(&mine[row * BN + col], acc[j][0], acc[j][1]);
      if (two_halves) put(&mine[(row + 8) * BN + col], acc[j][2], acc[j][3]);
    }
  }
  // The two-kernel form (R.counters null, --xsplit): every rank writes
  // its partial and ends; ReduceSplit, the next grid, adds them.
  if (split > 1 && R.counters == nullptr) return;
  if (split > 1) {
    __threadfence();
    __syncthreads();
    if (tid == 0) {
      const unsigned prev = atomicAdd(&R.counters[tile], 1u);
      s_last = prev + 1 == unsigned(split);
      if (s_last) R.counters[tile] = 0;  // every rank has arrived
    }
    __syncthreads();
    if (!s_last) return;
    __threadfence();
  } else {
    __syncthreads();
  }
  const float* all = R.partials + size_t(tile) * split * kM * BN;
  for (int q = tid; q < kM * (BN / 8); q += kThreads) {
    const int row = q / (BN / 8), col = (q % (BN / 8)) * 8;
    if (row >= L.m || n0 + col >= L.n) continue;
    float v[8] = {};
    if (split == 1) {
      const float* p = mine + row * BN + col;
#pragma unroll
      for (int e = 0; e < 8; ++e) v[e] = p[e];
    } else {
      SumRanks<BN>(all, split, row, col, v);
    }
    epilogue(row, col, v);
  }
}

// KW: warps along K.  The CTA's BN / 32 column warps are repeated KW
// times, warp w taking k16 step kk of a stage where kk % KW == w / (BN /
// 32); after the main loop the CTA adds its KW partials in shared memory
// (in order: deterministic), then finishes as with KW = 1.  More warps a
// scheduler for the same 128-byte rows of B (BN = 64), where the library's
// wide tile runs one warp a scheduler (ncu, 2026-12-07-h100-d66a018).
template <bool TB, int BN, int BK, int ST, int KW = 1>
__global__ void __launch_bounds__(BN * KW, 1)
    SkinnyV(const SkinnyLaunch L, const Reduce R, const Prefetch PF) {
  constexpr int kThreads = BN * KW, kM = 16;
  static_assert(BK / 16 % KW == 0, "every K warp as many k16 steps");
  // Launched as a programmatic dependent (g_pdl), this grid may start while
  // the kernel before it still runs: nothing of global memory is read
  // before that kernel has finished.  A no-op in a plain launch.
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
  if (PF.at == 1) PrefetchShare(PF);
  constexpr int kAStage = kM * BK * 2, kBStage = BK * BN * 2;
  constexpr int kAChunks = BK / 8;                      // per A row
  constexpr int kBRowChunks = TB ? BK / 8 : BN / 8;     // per B stage row
  extern __shared__ __align__(128) unsigned char smem[];
  const Share w = ShareOf<BN, BK>(L);
  const T* A = reinterpret_cast<const T*>(L.a.Locate());
  const T* B = reinterpret_cast<const T*>(L.b.Locate());
  const int64_t lda = L.a.ld, ldb = L.b.ld;
  const int tid = static_cast<int>(threadIdx.x), lane = tid & 31;
  // The warp's columns (wn) and its K steps (wk; 0 where KW is 1).
  const int wn = KW == 1 ? tid >> 5 : (tid >> 5) % (BN / 32),
            wk = KW == 1 ? 0 : (tid >> 5) / (BN / 32);
  const uint32_t base = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  auto a_stage = [&](int s) { return base + s * kAStage; };
  auto b_stage = [&](int s) { return base + ST * kAStage + s * kBStage; };
  static_assert(BK * BN / 8 % kThreads == 0, "B's chunks shared evenly");
  auto load = [&](int t, int s) {
    const int k0 = t * BK;
    LoadAStage<BK, kThreads>(a_stage(s), A, lda, L.m, w.k_hi, k0, tid);
#pragma unroll
    for (int i = 0; i < BK * BN / 8 / kThreads; ++i) {
      const int q = tid + i * kThreads;
      const int row = q / kBRowChunks, c = q % kBRowChunks;
      if constexpr (TB) {  // stage row = an output column, BK of K
        const int kk = k0 + c * 8, col = w.n0 + row;
        const bool ok = kk < w.k_hi && col < L.n;
        sk::CpAsync16(b_stage(s) + SwzC<kBRowChunks>(row, c),
                      ok ? B + col * ldb + kk : B, ok);
      } else {  // stage row = a K row, BN columns
        const int kk = k0 + row, col = w.n0 + c * 8;
        const bool ok = kk < w.k_hi && col < L.n;
        sk::CpAsync16(b_stage(s) + SwzC<kBRowChunks>(row, c),
                      ok ? B + kk * ldb + col : B, ok);
      }
    }
  };
  float acc[4][4] = {};
  const int tiles = w.t_end - w.t_begin;
#pragma unroll
  for (int i = 0; i < ST - 1; ++i) {
    if (i < tiles) load(w.t_begin + i, i);
    sk::CpAsyncCommit();
  }
  for (int i = 0; i < tiles; ++i) {
    sk::CpAsyncWait<ST - 2>();
    __syncthreads();
    if (i + ST - 1 < tiles) load(w.t_begin + i + ST - 1, (i + ST - 1) % ST);
    sk::CpAsyncCommit();
    const int s = i % ST;
#pragma unroll
    for (int q = 0; q < BK / 16 / KW; ++q) {
      const int kk = q * KW + wk;
      const int mrow = ((lane >> 3) & 1) * 8 + (lane & 7), half = lane >> 4;
      uint32_t af[4];
      sk::Ldsm4(a_stage(s) + SwzC<kAChunks>(mrow, kk * 2 + half), af);
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        uint32_t bf[4];
        if constexpr (TB)
          sk::Ldsm4(b_stage(s) + SwzC<kBRowChunks>(
                                     wn * 32 + j * 16 + half * 8 + (lane & 7),
                                     kk * 2 + ((lane >> 3) & 1)),
                    bf);
        else
          sk::Ldsm4T(b_stage(s) + SwzC<kBRowChunks>(kk * 16 + mrow,
                                                    wn * 4 + j * 2 + half),
                     bf);
        sk::Mma<T>(acc[2 * j], af, bf[0], bf[1]);
        sk::Mma<T>(acc[2 * j + 1], af, bf[2], bf[3]);
      }
    }
  }
  sk::CpAsyncWait<0>();
  if (PF.at == 2) PrefetchShare(PF);
  // The next grid, if a programmatic dependent, may launch now; it waits
  // for this one's end before it reads anything.
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
  if constexpr (KW > 1) {  // the K warps' partials, added in order
    float* red = reinterpret_cast<float*>(smem);  // (KW - 1) x BN x 16
    // K warp r's (r >= 1) accumulator e of fragment j, this lane's.
    auto slot = [&](int r, int j, int e) -> float& {
      return red[(((r - 1) * (BN / 32) + wn) * 16 + j * 4 + e) * 32 + lane];
    };
    __syncthreads();  // every warp is done with the stages
    if (wk > 0) {
#pragma unroll
      for (int j = 0; j < 4; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) slot(wk, j, e) = acc[j][e];
    }
    __syncthreads();
    if (wk == 0) {
      for (int r = 1; r < KW; ++r)
#pragma unroll
        for (int j = 0; j < 4; ++j)
#pragma unroll
          for (int e = 0; e < 4; ++e) acc[j][e] += slot(r, j, e);
    }
  }
  Finish<BN, kThreads>(L, R, acc, w, smem);
}

// Bulk-copy candidates (NN): each stage's rows arrive by cp.async.bulk, one
// copy a row of A (16 x BK) and of B (BK x BN, the tile's columns of one K
// row), completing on the stage's mbarrier, into rows padded by 16 bytes
// (ldmatrix, .trans for B, reads 8 rows at one chunk from 8 bank groups).
// Where the cp.async candidates issue a 16-byte copy per thread and chunk,
// one lane here moves a whole row: more bytes in flight per SM for the same
// stages, fewer instructions.  A's rows past m are zeros; past the K range,
// A's columns and B's rows are zeroed in shared memory (A's zero columns
// would meet stale B rows otherwise).  Needs k and n multiples of 8 and
// 16-byte aligned rows (every probe case has them).
__device__ __forceinline__ void BulkCopy(uint32_t dst, const void* src,
                                         uint32_t bytes, uint32_t bar) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes "
      "[%0], [%1], %2, [%3];\n" ::"r"(dst),
      "l"(src), "r"(bytes), "r"(bar) : "memory");
}

template <int BN, int BK, int ST>
struct BulkSmem {
  static constexpr int kARow = BK * 2 + 16, kBRow = BN * 2 + 16;  // bytes
  static constexpr int kAStage = 16 * kARow, kBStage = BK * kBRow;
  static constexpr int kPipe = ST * (kAStage + kBStage);
  static constexpr int kBytes = kPipe > 16 * BN * 4 ? kPipe : 16 * BN * 4;
};

template <int BN, int BK, int ST>
__global__ void __launch_bounds__(BN, 1)
    SkinnyBulk(const SkinnyLaunch L, const Reduce R) {
  using S = BulkSmem<BN, BK, ST>;
  constexpr int kThreads = BN, kM = 16;
  extern __shared__ __align__(128) unsigned char smem[];
  __shared__ __align__(8) uint64_t full[ST];
  const Share w = ShareOf<BN, BK>(L);
  const T* A = reinterpret_cast<const T*>(L.a.Locate());
  const T* B = reinterpret_cast<const T*>(L.b.Locate());
  const int64_t lda = L.a.ld, ldb = L.b.ld;
  const int cols = min(BN, L.n - w.n0);  // this tile's columns, a multiple of 8
  const int tid = static_cast<int>(threadIdx.x), warp = tid >> 5,
            lane = tid & 31;
  const uint32_t base = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  auto a_stage = [&](int s) { return base + s * S::kAStage; };
  auto b_stage = [&](int s) { return base + ST * S::kAStage + s * S::kBStage; };
  auto bar = [&](int s) {
    return static_cast<uint32_t>(__cvta_generic_to_shared(&full[s]));
  };
  if (tid == 0) {
    for (int s = 0; s < ST; ++s) MbarInit(bar(s));
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  // A's rows past m: zeros in every stage (no copy writes them).
  for (int q = tid; q < ST * kM * (S::kARow / 16); q += kThreads) {
    const int s = q / (kM * (S::kARow / 16)), r = q / (S::kARow / 16) % kM;
    if (r >= L.m)
      *reinterpret_cast<uint4*>(smem + s * S::kAStage + (q % (kM * (S::kARow / 16))) * 16) =
          make_uint4(0, 0, 0, 0);
  }
  __syncthreads();
  // Warp 0 fills stage s with K tile t: one expect_tx, then a lane a row.
  auto issue = [&](int t, int s) {
    // The stage was last read by ldmatrix (the generic proxy); the bulk
    // copies write it through the async proxy.
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
    const int k0 = t * BK, rows = min(BK, w.k_hi - k0);  // rows: a multiple of 8
    const uint32_t bytes = uint32_t(min(L.m, kM)) * rows * 2 +
                           uint32_t(rows) * cols * 2;
    if (lane == 0) MbarExpectTx(bar(s), bytes);
    __syncwarp();
    for (int r = lane; r < L.m; r += 32)
      BulkCopy(a_stage(s) + r * S::kARow, A + r * lda + k0, rows * 2, bar(s));
    for (int r = lane; r < rows; r += 32)
      BulkCopy(b_stage(s) + r * S::kBRow, B + (k0 + r) * ldb + w.n0, cols * 2,
               bar(s));
    if (rows < BK) {  // the K tail: zeros past it (A's columns, B's rows)
      for (int q = lane; q < kM * (BK - rows) / 8; q += 32) {
        const int r = q / ((BK - rows) / 8), c = rows / 8 + q % ((BK - rows) / 8);
        *reinterpret_cast<uint4*>(smem + s * S::kAStage + r * S::kARow + c * 16) =
            make_uint4(0, 0, 0, 0);
      }
      for (int q = lane; q < (BK - rows) * (S::kBRow / 16); q += 32) {
        const int r = rows + q / (S::kBRow / 16), c = q % (S::kBRow / 16);
        *reinterpret_cast<uint4*>(smem + ST * S::kAStage + s * S::kBStage +
                                  r * S::kBRow + c * 16) = make_uint4(0, 0, 0, 0);
      }
    }
  };
  const int tiles = w.t_end - w.t_begin;
  if (warp == 0)
    for (int i = 0; i < ST - 1 && i < tiles; ++i) issue(w.t_begin + i, i);
  float acc[4][4] = {};
  for (int i = 0; i < tiles; ++i) {
    const int s = i % ST;
    // Every warp is done with stage (i - 1) % ST, which the next issue
    // refills, and the K tail's zeros written by warp 0 are visible.
    __syncthreads();
    if (warp == 0 && i + ST - 1 < tiles)
      issue(w.t_begin + i + ST - 1, (i + ST - 1) % ST);
    MbarWait(bar(s), (i / ST) & 1);
#pragma unroll
    for (int kk = 0; kk < BK / 16; ++kk) {
      const int mrow = ((lane >> 3) & 1) * 8 + (lane & 7), half = lane >> 4;
      uint32_t af[4];
      sk::Ldsm4(a_stage(s) + mrow * S::kARow + (kk * 2 + half) * 16, af);
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        uint32_t bf[4];
        sk::Ldsm4T(b_stage(s) + (kk * 16 + mrow) * S::kBRow +
                       (warp * 4 + j * 2 + half) * 16,
                   bf);
        sk::Mma<T>(acc[2 * j], af, bf[0], bf[1]);
        sk::Mma<T>(acc[2 * j + 1], af, bf[2], bf[3]);
      }
    }
  }
  Finish<BN>(L, R, acc, w, smem);
}

template <int BN, int BK, int ST>
std::string RunBulk(const SkinnyLaunch& l) {
  constexpr int kSmem = BulkSmem<BN, BK, ST>::kBytes;
  const int tiles = (l.n + BN - 1) / BN;
  bool aligned = (reinterpret_cast<uintptr_t>(l.a.base) |
                  reinterpret_cast<uintptr_t>(l.b.base)) % 16 == 0;
  for (const auto* o : {&l.a, &l.b})
    for (int i = 0; i < o->terms; ++i) aligned &= o->term[i].scale % 16 == 0;
  if (l.m > 16 || l.k % 8 != 0 || l.n % 8 != 0 || l.a.ld % 8 != 0 ||
      l.b.ld % 8 != 0 || !aligned || tiles > kMaxCounters ||
      size_t(tiles) * l.split_k * 16 * BN > kPartialFloats)
    return "outside the bulk candidate's cases";
  auto* fn = &SkinnyBulk<BN, BK, ST>;
  if (kSmem > 48 * 1024)
    CK(cudaFuncSetAttribute(reinterpret_cast<const void*>(fn),
                            cudaFuncAttributeMaxDynamicSharedMemorySize,
                            kSmem));
  fn<<<tiles * l.split_k, BN, kSmem, l.stream>>>(l, g_red);
  const cudaError_t e = cudaGetLastError();
  return e == cudaSuccess ? "" : cudaGetErrorString(e);
}

bool g_pdl = false;  // launch the candidates as programmatic dependents

template <bool TB, int BN, int BK, int ST, int KW = 1>
std::string RunV(const SkinnyLaunch& l) {
  constexpr int kSmemPipe = ST * (16 * BK * 2 + BK * BN * 2);
  constexpr int kSmemRed = (KW - 1) * BN * 16 * 4;  // the K warps' partials
  constexpr int kSmemOut = kSmemRed > 16 * BN * 4 ? kSmemRed : 16 * BN * 4;
  constexpr int kSmem = kSmemPipe > kSmemOut ? kSmemPipe : kSmemOut;
  const int tiles = (l.n + BN - 1) / BN;
  if (l.m > 16 || tiles > kMaxCounters ||
      size_t(tiles) * l.split_k * 16 * BN > kPartialFloats)
    return "too large for the probe's workspace";
  auto* fn = &SkinnyV<TB, BN, BK, ST, KW>;
  if (kSmem > 48 * 1024)
    CK(cudaFuncSetAttribute(reinterpret_cast<const void*>(fn),
                            cudaFuncAttributeMaxDynamicSharedMemorySize,
                            kSmem));
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(tiles * l.split_k);
  config.blockDim = dim3(BN * KW);
  config.dynamicSmemBytes = kSmem;
  config.stream = l.stream;
  config.attrs = attr;
  config.numAttrs = g_pdl ? 1 : 0;
  const cudaError_t e = cudaLaunchKernelEx(&config, fn, l, g_red, g_pf);
  return e == cudaSuccess ? "" : cudaGetErrorString(e);
}

// --xsplit: a candidate's split with XLA's shape of it. The split CTAs
// write their float32 partials and end (no count, no last CTA), and a
// second grid adds them in rank order and runs the epilogue, as XLA's
// Triton GEMM leaves its K split to the fusion after it.  The second grid
// launches as a programmatic dependent of the first (g_xpdl), so its
// launch overlaps the first one's tail; it waits for the first grid's end
// (griddepcontrol.wait) before reading a partial.  One thread per 8
// output columns of a row.
template <int BN>
__global__ void __launch_bounds__(256)
    ReduceSplit(const SkinnyLaunch L, const float* partials) {
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
  constexpr int kM = 16;
  const int q = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  const int chunks = (L.n + 7) / 8, row = q / chunks, col = (q % chunks) * 8;
  if (row >= L.m) return;
  const int tile = col / BN, split = L.split_k;
  const float* all = partials + size_t(tile) * split * kM * BN;
  float v[8] = {};
  SumRanks<BN>(all, split, row, col % BN, v);
  T* D = reinterpret_cast<T*>(const_cast<char*>(L.d.Locate()));
  float c[8] = {};
  if (L.beta != 0.f)
    sk::LoadChunk(reinterpret_cast<const T*>(L.c.Locate()) + row * L.c.ld +
                      col, 8, c);
  float o[8];
#pragma unroll
  for (int e = 0; e < 8; ++e) o[e] = L.alpha * v[e] + L.beta * c[e];
  sk::StoreChunk(D + row * L.d.ld + col, 8, o);
}
bool g_xpdl = true;      // ReduceSplit as a programmatic dependent
bool g_xreduce = true;   // false: the partials' grid alone (its own time)
template <bool TB, int BN, int BK, int ST>
std::string RunX(const SkinnyLaunch& l) {
  if (l.split_k < 2) return "the two-kernel form needs a split";
  const Reduce saved = g_red;
  g_red.counters = nullptr;  // the candidate writes partials and ends
  std::string r = RunV<TB, BN, BK, ST>(l);
  g_red = saved;
  if (!r.empty() || !g_xreduce) return r;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config = {};
  const int threads = l.m * ((l.n + 7) / 8);
  config.gridDim = dim3((threads + 255) / 256);
  config.blockDim = dim3(256);
  config.stream = l.stream;
  config.attrs = attr;
  config.numAttrs = g_xpdl ? 1 : 0;
  const float* partials = g_red.partials;
  const cudaError_t e =
      cudaLaunchKernelEx(&config, &ReduceSplit<BN>, l, partials);
  return e == cudaSuccess ? "" : cudaGetErrorString(e);
}

using RunFn = std::string (*)(const SkinnyLaunch&);
struct Candidate {
  const char* name;
  RunFn nn, nt;
  int bn, bk;
};
#define CAND(BN, BK, ST) \
  {"v" #BN "x" #BK "s" #ST, &RunV<false, BN, BK, ST>, &RunV<true, BN, BK, ST>, BN, BK}
// The bulk-copy candidates: NN only (no NT form).
#define BULK(BN, BK, ST) \
  {"b" #BN "x" #BK "s" #ST, &RunBulk<BN, BK, ST>, nullptr, BN, BK}
// With warps along K (SkinnyV's KW): "v<BN>x<BK>s<ST>k<KW>".
#define CANDK(BN, BK, ST, KW)                                            \
  {"v" #BN "x" #BK "s" #ST "k" #KW, &RunV<false, BN, BK, ST, KW>,        \
   &RunV<true, BN, BK, ST, KW>, BN, BK}
const Candidate kCands[] = {
    CAND(128, 64, 4), CAND(128, 64, 2), CAND(128, 32, 2), CAND(128, 32, 4),
    CAND(64, 64, 4),  CAND(64, 64, 2),  CAND(64, 32, 2),  CAND(64, 32, 4),
    CAND(64, 64, 3),  CAND(128, 64, 3),
    CANDK(64, 64, 3, 2), CANDK(64, 64, 3, 4), CANDK(64, 128, 3, 4),
    CANDK(64, 128, 2, 4), CANDK(128, 64, 3, 2),
    BULK(128, 64, 4), BULK(128, 64, 6), BULK(128, 32, 8), BULK(256, 64, 4),
    BULK(256, 32, 6),
};
std::string RunShippedNN(const SkinnyLaunch& l) {
  return sk::Run<T, 1, false>(l);
}
std::string RunShippedNT(const SkinnyLaunch& l) {
  return sk::Run<T, 1, true>(l);
}

int sms = 0;

// Where the buffer that B's windows lie in ends: the --deep candidates'
// tensor map covers B's rows from a window's base to there.
const char* g_b_end = nullptr;
const char* g_buf_end = nullptr;  // g_buf.b's end (Time's windows)

bool Check(RunFn run, const char* name, int m, int n, int k, int split,
           float beta, bool tb) {
  const int pad = 8, rows_d = m + 3, ldd = n + 2 * pad, lda = k + pad,
            ldb = (tb ? k : n) + pad, kb_rows = tb ? n : k;
  T *a, *b, *c, *d;
  float* ref;
  int32_t* layer;
  CK(cudaMalloc(&a, size_t(m + 1) * lda * 2));
  CK(cudaMalloc(&b, size_t(3) * kb_rows * ldb * 2));
  g_b_end = reinterpret_cast<const char*>(b) + size_t(3) * kb_rows * ldb * 2;
  CK(cudaMalloc(&c, size_t(rows_d) * ldd * 2));
  CK(cudaMalloc(&d, size_t(rows_d) * ldd * 2));
  CK(cudaMalloc(&ref, size_t(m) * n * 4));
  CK(cudaMalloc(&layer, 4));
  int32_t one = 1;
  CK(cudaMemcpy(layer, &one, 4, cudaMemcpyHostToDevice));
  Fill<<<256, 256>>>(a, size_t(m + 1) * lda, 1);
  Fill<<<256, 256>>>(b, size_t(3) * kb_rows * ldb, 2);
  Fill<<<256, 256>>>(c, size_t(rows_d) * ldd, 3);
  CK(cudaMemset(d, 0x7f, size_t(rows_d) * ldd * 2));
  const T* aw = a + lda + pad;
  const T* cw = c + 2 * ldd + pad;
  T* dw = d + 2 * ldd + pad;
  SkinnyLaunch l;
  l.m = m; l.n = n; l.k = k; l.alpha = 0.5f; l.beta = beta;
  l.a = Op(aw, lda);
  l.b = Op(b, ldb);
  l.b.terms = 1;
  l.b.term[0].slot.value = layer;
  l.b.term[0].dim = 3;
  l.b.term[0].win = 1;
  l.b.term[0].scale = int64_t(kb_rows) * ldb * 2;
  l.c = Op(cw, ldd);
  l.d = Op(dw, ldd);
  l.split_k = split;
  l.device = 0;
  l.sm_count = sms;
  bool ok = true;
  for (int rep = 0; rep < 2 && ok; ++rep) {  // twice: the counts reset
    std::string r = run(l);
    if (!r.empty()) { std::printf("run: %s\n", r.c_str()); return false; }
    CK(cudaGetLastError());
    Ref<<<dim3((n + 127) / 128, m), 128>>>(aw, lda, b + size_t(kb_rows) * ldb,
                                           tb ? 1 : ldb, tb ? ldb : 1, cw,
                                           ldd, ref, m, n, k, 0.5f, beta);
    CK(cudaDeviceSynchronize());
    std::vector<uint16_t> hd(size_t(rows_d) * ldd);
    std::vector<float> hr(size_t(m) * n);
    CK(cudaMemcpy(hd.data(), d, hd.size() * 2, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(hr.data(), ref, hr.size() * 4, cudaMemcpyDeviceToHost));
    double max_err = 0, max_ref = 0;
    long outside = 0;
    for (int i = 0; i < rows_d; ++i)
      for (int j = 0; j < ldd; ++j) {
        uint16_t v = hd[size_t(i) * ldd + j];
        int wi = i - 2, wj = j - pad;
        if (wi < 0 || wi >= m || wj < 0 || wj >= n) {
          outside += v != 0x7f7f;
          continue;
        }
        uint32_t bits = uint32_t(v) << 16;
        float f;
        std::memcpy(&f, &bits, 4);
        float want = hr[size_t(wi) * n + wj];
        max_err = std::max(max_err, double(std::fabs(f - want)));
        max_ref = std::max(max_ref, double(std::fabs(want)));
      }
    ok = outside == 0 && max_err <= 1e-2 * max_ref + 1e-2;
    if (!ok)
      std::printf("check %s %s m=%d n=%d k=%d split=%d beta=%g rep %d: max "
                  "err %.3g (max |ref| %.3g), %ld changed outside: FAIL\n",
                  name, tb ? "NT" : "NN", m, n, k, split, beta, rep, max_err,
                  max_ref, outside);
  }
  cudaFree(a); cudaFree(b); cudaFree(c); cudaFree(d); cudaFree(ref);
  cudaFree(layer);
  return ok;
}


// us per GEMM, 32 GEMMs in a graph, each on a new layer of B (cold), a
// counter kernel after each (as a loop body runs), A's rows at offset 0.
struct Bufs {
  T *a = nullptr, *b = nullptr, *d = nullptr;
  int32_t* ctr = nullptr;
} g_buf;
constexpr int kLayers = 32;

// The timed GEMMs' launch on g_buf: A's and D's windows at row 0, alpha 1,
// beta 0; B's layer and the stream are set per launch.
SkinnyLaunch BufLaunch(int m, int n, int k, int split) {
  SkinnyLaunch l;
  l.m = m; l.n = n; l.k = k; l.alpha = 1.f; l.beta = 0.f;
  l.a = Op(g_buf.a, k);
  l.c = l.d = Op(g_buf.d, n);
  l.split_k = split;
  l.sm_count = sms;
  return l;
}

// hot: every GEMM reads layer 0 (from L2 where it fits, as a loop over
// rows at table offsets reads one weight): the kernel's own rate, not HBM's.
double Time(RunFn run, int m, int n, int k, int split, bool tb,
            bool hot = false) {
  cudaStream_t st;
  CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  SkinnyLaunch l = BufLaunch(m, n, k, split);
  l.stream = st;
  g_b_end = g_buf_end;
  bool failed = false;
  const double us = GraphUsPerLaunch(st, kLayers, 20, [&](int i) {
    SkinnyLaunch li = l;
    li.b = Op(g_buf.b + size_t(hot ? 0 : i) * k * n, tb ? k : n);
    if (!run(li).empty()) failed = true;
    Counter<<<1, 1, 0, st>>>(g_buf.ctr);
  });
  cudaStreamDestroy(st);
  return failed ? -1 : us;
}

// Fixed costs of a launch in a graph, each followed by the counter kernel
// as in a loop body: what a GEMM of almost no bytes cannot go below.
__global__ void Empty() {}
__global__ void ReadOne(const int32_t* p, int32_t* out) {
  // One dependent global read, as a kernel that locates its operand.
  const int32_t v = __ldcg(p);
  if (v == 0x12345678) out[blockIdx.x] = v;
}
__global__ void StreamK(const uint4* p, size_t n, uint32_t* out) {
  uint32_t acc = 0;
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += 8 * stride) {
    uint4 v[8];
#pragma unroll
    for (int u = 0; u < 8; ++u)
      v[u] = i + u * stride < n ? __ldcg(p + i + u * stride)
                                : make_uint4(0, 0, 0, 0);
#pragma unroll
    for (int u = 0; u < 8; ++u) acc ^= v[u].x ^ v[u].w;
  }
  if (acc == 0x12345678u) out[blockIdx.x] = acc;
}
template <typename Launch>
double Floor(const char* label, Launch launch, bool counter = true) {
  cudaStream_t st;
  CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  const double us = GraphUsPerLaunch(st, kLayers, 50, [&](int i) {
    launch(st, i);
    if (counter) Counter<<<1, 1, 0, st>>>(g_buf.ctr);
  });
  std::printf("FLOOR %-44s %7.2f us\n", label, us);
  cudaStreamDestroy(st);
  return us;
}
// A launch of `fn` in clusters of `cluster` CTAs along x; its error, not
// checked (LaunchEx checks it).
cudaError_t TryLaunchEx(const void* fn, int grid, int threads, int smem,
                        int cluster, cudaStream_t st, void** args) {
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = cluster;
  attr[0].val.clusterDim.y = attr[0].val.clusterDim.z = 1;
  cudaLaunchConfig_t c = {};
  c.gridDim = dim3(grid);
  c.blockDim = dim3(threads);
  c.dynamicSmemBytes = smem;
  c.stream = st;
  c.attrs = attr;
  c.numAttrs = 1;
  return cudaLaunchKernelExC(&c, fn, args);
}
void LaunchEx(const void* fn, int grid, int threads, int smem, int cluster,
              cudaStream_t st, void** args) {
  CK(TryLaunchEx(fn, grid, threads, smem, cluster, st, args));
}
void Floors() {
  const size_t big = size_t(8) << 20;  // bytes per layer
  uint4* sb;
  uint32_t* so;
  CK(cudaMalloc(&sb, big * kLayers));
  CK(cudaMalloc(&so, 8192 * 4));
  CK(cudaMemset(sb, 1, big * kLayers));
  CK(cudaFuncSetAttribute(reinterpret_cast<const void*>(&Empty),
                          cudaFuncAttributeMaxDynamicSharedMemorySize,
                          74 * 1024));
  CK(cudaFuncSetAttribute(reinterpret_cast<const void*>(&StreamK),
                          cudaFuncAttributeMaxDynamicSharedMemorySize,
                          74 * 1024));
  Floor("counter alone", [&](cudaStream_t, int) {}, true);
  Floor("empty 1x32, no counter", [&](cudaStream_t st, int) {
    Empty<<<1, 32, 0, st>>>(); }, false);
  Floor("empty 1x32", [&](cudaStream_t st, int) { Empty<<<1, 32, 0, st>>>(); });
  Floor("empty 128x128", [&](cudaStream_t st, int) {
    Empty<<<128, 128, 0, st>>>(); });
  Floor("empty 128x128 74K smem", [&](cudaStream_t st, int) {
    Empty<<<128, 128, 74 * 1024, st>>>(); });
  Floor("empty 128x128 cluster 8", [&](cudaStream_t st, int) {
    LaunchEx(reinterpret_cast<const void*>(&Empty), 128, 128, 0, 8, st,
             nullptr); });
  Floor("empty 128x128 cluster 8 74K", [&](cudaStream_t st, int) {
    LaunchEx(reinterpret_cast<const void*>(&Empty), 128, 128, 74 * 1024, 8,
             st, nullptr); });
  Floor("empty 128x128 cluster 1 attr", [&](cudaStream_t st, int) {
    LaunchEx(reinterpret_cast<const void*>(&Empty), 128, 128, 0, 1, st,
             nullptr); });
  // What a cluster of each size costs an empty launch of the grids a K
  // split runs (the wide tile's 64 threads and 46 KiB, 2 CTAs an SM, and
  // 128 threads), against no cluster: the floor under any cluster
  // exchange of partials.  16 is a non-portable size.
  CK(cudaFuncSetAttribute(reinterpret_cast<const void*>(&Empty),
                          cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
  for (int ctas : {256, 512})
    for (int threads : {64, 128})
      for (int cluster : {1, 2, 4, 8, 16}) {
        char label[64];
        std::snprintf(label, sizeof label, "empty %dx%d 46K cluster %d", ctas,
                      threads, cluster);
        // One launch first, outside a graph: a size the device cannot
        // schedule is reported, not fatal.
        cudaError_t e = TryLaunchEx(reinterpret_cast<const void*>(&Empty),
                                    ctas, threads, 46 * 1024, cluster,
                                    nullptr, nullptr);
        if (e == cudaSuccess) e = cudaDeviceSynchronize();
        if (e != cudaSuccess) {
          std::printf("FLOOR %-44s unavailable: %s\n", label,
                      cudaGetErrorString(e));
          cudaGetLastError();
          continue;
        }
        Floor(label, [&](cudaStream_t st, int) {
          LaunchEx(reinterpret_cast<const void*>(&Empty), ctas, threads,
                   46 * 1024, cluster, st, nullptr);
        });
      }
  Floor("read one value 128x128", [&](cudaStream_t st, int i) {
    ReadOne<<<128, 128, 0, st>>>(g_buf.ctr, reinterpret_cast<int32_t*>(so)); });
  for (size_t bytes : {size_t(512) << 10, size_t(2) << 20, size_t(8) << 20}) {
    for (int ctas : {132, 528}) {
      char label[64];
      std::snprintf(label, sizeof label, "stream %zu KiB %dx256 cold",
                    bytes >> 10, ctas);
      Floor(label, [&](cudaStream_t st, int i) {
        StreamK<<<ctas, 256, 0, st>>>(sb + i * (big / 16), bytes / 16, so);
      });
    }
    char label[64];
    std::snprintf(label, sizeof label, "stream %zu KiB 528x256 74K", bytes >> 10);
    Floor(label, [&](cudaStream_t st, int i) {
      StreamK<<<528, 256, 74 * 1024, st>>>(sb + i * (big / 16), bytes / 16, so);
    });
  }
  // The shipped kernel on a problem of almost no bytes, split 1 (no
  // reduction) and its planned split.
  for (auto sh : {std::tuple{16, 128, 64}, {16, 512, 64}, {16, 512, 512},
                  {8, 2048, 2048}})
    for (int split : {1, 2, 4, 8}) {
      const int m = std::get<0>(sh), n = std::get<1>(sh), k = std::get<2>(sh);
      if ((k + 63) / 64 < split) continue;
      char label[64];
      std::snprintf(label, sizeof label, "shipped %dx%dx%d split %d", m, n, k,
                    split);
      const SkinnyLaunch l = BufLaunch(m, n, k, split);
      Floor(label, [&](cudaStream_t st, int i) {
        SkinnyLaunch li = l;
        li.stream = st;
        li.b = Op(g_buf.b + size_t(i) * k * n, n);
        if (!RunShippedNN(li).empty()) std::exit(1);
      });
    }
  // Programmatic dependent launch: the candidate v128x64s4 after the
  // counter (which never triggers early: the gain is the launch's own
  // latency) and after itself (it triggers once its main loop is done),
  // each plain and as a dependent.
  for (auto sh : {std::tuple{16, 512, 512, 4}, {8, 2048, 2048, 8}})
    for (bool counter : {true, false})
      for (bool pdl : {false, true}) {
        const int m = std::get<0>(sh), n = std::get<1>(sh), k = std::get<2>(sh);
        char label[80];
        std::snprintf(label, sizeof label, "v128x64s4 %dx%dx%d s%d%s%s", m, n,
                      k, std::get<3>(sh), counter ? " +counter" : " chained",
                      pdl ? " PDL" : "");
        const SkinnyLaunch l = BufLaunch(m, n, k, std::get<3>(sh));
        g_pdl = pdl;
        Floor(label, [&](cudaStream_t st, int i) {
          SkinnyLaunch li = l;
          li.stream = st;
          li.b = Op(g_buf.b + size_t(i) * k * n, n);
          if (!RunV<false, 128, 64, 4>(li).empty()) std::exit(1);
        }, counter);
        g_pdl = false;
      }
  // L2 prefetch of the next layer (Prefetch above): the candidate
  // v128x64s4 with the counter after it, each GEMM asking for layer i + 1's
  // bytes at its start or after its main loop; none, for the baseline.  The
  // 32 layers (8 MiB each at 2048 x 2048) outgrow L2, so a layer is cold
  // unless the GEMM before it prefetched it.
  for (auto sh : {std::tuple{8, 2048, 2048, 8}, {16, 2048, 2048, 8},
                  {16, 4096, 4096, 4}, {16, 4096, 4096, 8},
                  {16, 512, 2048, 4}, {16, 1536, 1536, 4}})
    for (int at : {0, 1, 2}) {
      const int m = std::get<0>(sh), n = std::get<1>(sh), k = std::get<2>(sh);
      char label[80];
      std::snprintf(label, sizeof label, "v128x64s4 %dx%dx%d s%d +counter%s",
                    m, n, k, std::get<3>(sh),
                    at == 0 ? "" : at == 1 ? " prefetch@start"
                                           : " prefetch@end");
      const SkinnyLaunch l = BufLaunch(m, n, k, std::get<3>(sh));
      const size_t layer = size_t(k) * n;
      const double us = Floor(label, [&](cudaStream_t st, int i) {
        SkinnyLaunch li = l;
        li.stream = st;
        li.b = Op(g_buf.b + size_t(i) * layer, n);
        g_pf.next = reinterpret_cast<const char*>(
            g_buf.b + size_t((i + 1) % kLayers) * layer);
        g_pf.bytes = at == 0 ? 0 : layer * 2;
        g_pf.at = at;
        if (!RunV<false, 128, 64, 4>(li).empty()) std::exit(1);
      });
      std::printf("      %.2f TB/s of weights\n", layer * 2 / us / 1e6);
    }
  g_pf = Prefetch{};
  cudaFree(sb);
  cudaFree(so);
}

// The library's narrow tile (kernels/sm90_skinny_narrow.h), NN or NT,
// prepared and launched as the handler does.
template <bool kTransB>
std::string RunNarrow(const SkinnyLaunch& l) {
  SkinnyLaunch one = l;
  one.split_k = 1;
  jax_dynoff::kernels::PreparedLaunch ready;
  if (std::string r =
          jax_dynoff::kernels::skinny_narrow::Prepare<T, kTransB, T>(one,
                                                                    &ready);
      !r.empty())
    return r;
  return jax_dynoff::kernels::LaunchPrepared(ready, one.stream);
}
std::string RunNarrowNN(const SkinnyLaunch& l) { return RunNarrow<false>(l); }

// The library's wide tile (kernels/sm90_skinny.h: K split across a
// cluster, the partials added in distributed shared memory) with kWarps
// warps of 32 columns and kStages stages: 4 warps is the shipped tile
// (128 columns, B's NN rows 256 bytes); 2 warps reads 128-byte rows.
template <int kWarps, int kStages, bool kTransB = false>
std::string RunWideW(const SkinnyLaunch& l) {
  return sk::Run<T, 1, kTransB, kStages, T, sk::NoMarks, kWarps>(l);
}
struct Wide {
  RunFn run;
  const char* name;
  int bn;
};
const Wide kWides[] = {{&RunWideW<4, 4>, "wide128s4", 128},
                       {&RunWideW<2, 4>, "wide64s4", 64},
                       {&RunWideW<2, 6>, "wide64s6", 64},
                       {&RunWideW<2, 8>, "wide64s8", 64}};

// --hot: the table loop's cells where the narrow tile is planned (B one
// weight, hot in L2; NN, as x @ W): the narrow tile against every
// candidate at every split.  The candidates of 64 columns read B's rows
// 128 bytes at a time where the narrow tile reads 32, at the price of a
// K split and its reduction (the narrow NN stage is bound by the L2's
// request rate: benchmarks/results/2026-12-06-h100-b83e815/).
// One kernel at each of its splits in the hot table loop: prints its line
// ("s" a split through global memory, "c" a cluster's) and keeps the
// fastest in *best.
struct Best {
  double us = 1e30;
  char name[64] = "";
};
// tb: B transposed (run is then the NT form); hot: B one weight in L2.
void TimeSplits(RunFn run, const char* name, int bn, int bk,
                std::initializer_list<int> splits, const char* tag, int m,
                int n, int k, Best* best, bool tb = false, bool hot = true) {
  const int tiles = (n + bn - 1) / bn, ktiles = (k + bk - 1) / bk;
  char line[512];
  int len = std::snprintf(line, sizeof line, "  %-10s", name);
  for (int split : splits) {
    if (split > ktiles || tiles * split > 8 * sms) continue;
    const double us = Time(run, m, n, k, split, tb, hot);
    len += std::snprintf(line + len, sizeof line - len, " %s%d %.2f", tag,
                         split, us);
    if (us > 0 && us < best->us) {
      best->us = us;
      std::snprintf(best->name, sizeof best->name, "%s %s%d (%d CTAs)", name,
                    tag, split, tiles * split);
    }
  }
  std::printf("%s\n", line);
}

void Hot() {
  const int shapes[][3] = {{8, 2048, 2048}, {16, 2048, 2048}, {8, 1536, 1536},
                           {16, 512, 1536}, {8, 512, 1024},   {1, 2048, 2048},
                           {16, 4096, 1536}, {8, 4096, 1024}};
  for (auto& s : shapes) {
    const int m = s[0], n = s[1], k = s[2];
    const double narrow = Time(&RunNarrowNN, m, n, k, 1, false, true);
    Best best, wide;
    for (const Candidate& c : kCands)
      TimeSplits(c.nn, c.name, c.bn, c.bk, {1, 2, 4, 8, 16, 32}, "s", m, n, k,
                 &best);
    std::printf("HOT NN m=%d n=%d k=%d: narrow %.2f us, best %s %.2f us: "
                "%.2fx\n", m, n, k, narrow, best.name, best.us,
                narrow / best.us);
    // The wide tile at 128 and 64 columns, at every cluster size.
    for (const Wide& w : kWides)
      TimeSplits(w.run, w.name, w.bn, sk::kTileK, {1, 2, 4, 8}, "c", m, n, k,
                 &wide);
    std::printf("HOT NN WIDE m=%d n=%d k=%d: narrow %.2f us, best %s %.2f "
                "us: %.2fx\n", m, n, k, narrow, wide.name, wide.us,
                narrow / wide.us);
    std::fflush(stdout);
  }
}

// The timed GEMMs' buffers (g_buf): A of a_elems, B of b_elems (every
// layer), D of 16 rows of max_n, the counter; A and B filled.
void AllocBufs(size_t a_elems, size_t b_elems, size_t max_n) {
  CK(cudaMalloc(&g_buf.a, a_elems * 2));
  CK(cudaMalloc(&g_buf.b, b_elems * 2));
  g_buf_end = reinterpret_cast<const char*>(g_buf.b) + b_elems * 2;
  CK(cudaMalloc(&g_buf.d, size_t(16) * max_n * 2));
  CK(cudaMalloc(&g_buf.ctr, 4));
  Fill<<<1024, 256>>>(g_buf.a, a_elems, 5);
  Fill<<<1024, 256>>>(g_buf.b, b_elems, 6);
  CK(cudaDeviceSynchronize());
}

// --wide: the cells where the wide tile is planned (plan.h
// SkinnyTileChoice: K past the narrow tile's bound), NN and NT, B hot (the
// table loop) and cold (a new layer each call, the stacked loop): the
// shipped tile at the planner's split ("shipped") against the kernel at
// 128 columns (4 warps; 256-byte NN rows) and at 64 (2 warps; 128-byte
// rows), 4 and 6 stages, at every cluster size.  Its first run, with 128
// columns shipped, had 64 faster at the same cluster size in all 40 cases
// (benchmarks/results/2026-12-06-h100-e5738be/variants_wide.txt), so the
// library's wide tile is 64 columns since.
const Wide kWidesNT[] = {{&RunWideW<4, 4, true>, "wide128s4", 128},
                         {&RunWideW<2, 4, true>, "wide64s4", 64},
                         {&RunWideW<2, 6, true>, "wide64s6", 64}};
void WideCells() {
  const int shapes[][3] = {{16, 4096, 4096}, {8, 4096, 4096}, {1, 4096, 4096},
                           {16, 4096, 2048}, {8, 4096, 2048}, {16, 2048, 4096},
                           {8, 2048, 3072},  {16, 1024, 4096}, {16, 4096, 3072},
                           {8, 1536, 4096}};
  for (auto& s : shapes) {
    const int m = s[0], n = s[1], k = s[2], s0 = SkinnySplit(n, k, sms);
    for (bool tb : {false, true})
      for (bool hot : {true, false}) {
        const double shipped =
            Time(tb ? &RunShippedNT : &RunShippedNN, m, n, k, s0, tb, hot);
        std::printf("WIDE %s %s m=%d n=%d k=%d: shipped c%d %.2f us\n",
                    tb ? "NT" : "NN", hot ? "hot" : "cold", m, n, k, s0,
                    shipped);
        for (int i = 0; i < 3; ++i) {  // not the 8-stage NN one
          const Wide& w = tb ? kWidesNT[i] : kWides[i];
          char line[256];
          int len = std::snprintf(line, sizeof line, "  %-10s", w.name);
          const int tiles = (n + w.bn - 1) / w.bn;
          for (int split : {1, 2, 4, 8}) {
            if (split > k / sk::kTileK || tiles * split > 8 * sms) continue;
            len += std::snprintf(line + len, sizeof line - len, " c%d %.2f",
                                 split, Time(w.run, m, n, k, split, tb, hot));
          }
          std::printf("%s\n", line);
        }
        std::fflush(stdout);
      }
  }
}

// --rule: the two skinny tiles side by side around the tile rule's
// bounds (plan.h SkinnyTileChoice), each as the handler launches it (the
// wide one at the planner's split), NN and NT, B hot and cold.  The rule
// was measured against the 128-column wide tile; this retook it with the
// 64-column one (its first run, with NN's bounds for NT too and no wave
// bound, is benchmarks/results/2026-12-06-h100-1249f15/).  A line a case:
// both times and which the rule plans.
void RuleCells() {
  for (int m : {1, 8, 16})
    for (int n : {1536, 2048, 3072, 4096, 8192})
      for (int k : {1024, 1536, 2048, 3072})
        for (bool tb : {false, true})
          for (bool hot : {true, false}) {
            const int s0 = SkinnySplit(n, k, sms);
            const double narrow = Time(tb ? &RunNarrow<true> : &RunNarrow<false>,
                                       m, n, k, 1, tb, hot);
            const double wide = Time(tb ? &RunShippedNT : &RunShippedNN, m, n,
                                     k, s0, tb, hot);
            const bool planned_narrow =
                jax_dynoff::kernels::SkinnyTileChoice(n, k, tb, sms) ==
                jax_dynoff::SkinnyTile::kNarrow;
            std::printf("RULE %s %-4s m=%d n=%d k=%d: narrow %.2f wide c%d "
                        "%.2f us: narrow/wide %.3f, planned %s\n",
                        tb ? "NT" : "NN", hot ? "hot" : "cold", m, n, k,
                        narrow, s0, wide, narrow / wide,
                        planned_narrow ? "narrow" : "wide");
            std::fflush(stdout);
          }
}

// --xsplit: the table loop's cells (B one weight, hot in L2, NN) where
// XLA's Triton GEMM takes about half the skinny kernels' time on an H200
// (benchmarks/results/2026-12-06-h200-6c35c90/timeline_table_body.txt:
// 2.26-6.25 us against 4.92-11.11).  XLA splits K 8 ways into float32
// partials and adds them in the next fusion.  Each candidate at each split
// three ways: its one-launch form (the last CTA adds the partials), the
// two-kernel form (RunX), and the partials' grid alone ("part", which
// leaves D unwritten: its own time, beside XLA's GEMM kernel).  Each
// figure, as everywhere here, is a GEMM and the loop's counter kernel, 32
// in a graph; the counter alone is printed first.
struct XCand {
  const char* name;
  RunFn one, two;
  int bn, bk;
};
#define XCAND(BN, BK, ST) \
  {"v" #BN "x" #BK "s" #ST, &RunV<false, BN, BK, ST>, &RunX<false, BN, BK, ST>, BN, BK}
const XCand kXCands[] = {XCAND(128, 64, 3), XCAND(128, 64, 4),
                         XCAND(128, 32, 4), XCAND(64, 64, 3),
                         XCAND(64, 64, 4),  XCAND(64, 32, 4)};
void XSplitCells() {
  Floor("counter alone", [&](cudaStream_t, int) {}, true);
  const int shapes[][3] = {{8, 2048, 2048}, {16, 1024, 2048}, {16, 4096, 4096},
                           {16, 512, 1536}, {8, 4096, 1024},  {16, 2048, 2048}};
  for (auto& sh : shapes) {
    const int m = sh[0], n = sh[1], k = sh[2], s0 = SkinnySplit(n, k, sms);
    const double narrow = Time(&RunNarrowNN, m, n, k, 1, false, true);
    const double wide = Time(&RunShippedNN, m, n, k, s0, false, true);
    std::printf("XSPLIT m=%d n=%d k=%d: narrow %.2f us, wide c%d %.2f us\n", m,
                n, k, narrow, s0, wide);
    double best = 1e30;
    char best_name[64] = "";
    for (const XCand& c : kXCands) {
      const int tiles = (n + c.bn - 1) / c.bn, ktiles = (k + c.bk - 1) / c.bk;
      for (int split : {4, 8, 16}) {
        if (split > ktiles || tiles * split > 8 * sms) continue;
        const double one = Time(c.one, m, n, k, split, false, true);
        const double two = Time(c.two, m, n, k, split, false, true);
        g_xpdl = false;
        const double two_plain = Time(c.two, m, n, k, split, false, true);
        g_xpdl = true;
        g_xreduce = false;
        const double part = Time(c.two, m, n, k, split, false, true);
        g_xreduce = true;
        std::printf("  %-10s s%-2d (%4d CTAs): one launch %6.2f, two %6.2f "
                    "(no PDL %6.2f), part %6.2f\n",
                    c.name, split, tiles * split, one, two, two_plain, part);
        if (two > 0 && two < best) {
          best = two;
          std::snprintf(best_name, sizeof best_name, "%s s%d", c.name, split);
        }
      }
    }
    std::printf("XSPLIT m=%d n=%d k=%d: best two-kernel %s %.2f us against "
                "narrow %.2f, wide %.2f\n", m, n, k, best_name, best, narrow,
                wide);
    std::fflush(stdout);
  }
}

// --deep: 64 columns a CTA over ALL of K, no split, so no reduction across
// CTAs (no cluster, no last CTA, no second grid): B's NN rows are 128
// bytes (one L2 line, where the narrow tile asks for 32-byte sectors) and
// its stages arrive by TMA boxes of BK rows x 64 columns in the 128-byte
// swizzle, ST of them in flight (up to ~200 KiB a CTA, where the
// cp.async candidates keep 32 KiB), one thread issuing them; A's stages by
// cp.async.  The W warps share each stage's K and add their partials in
// shared memory at the end.  At n = 2048 that is 32 CTAs, each streaming
// its whole 256 KiB slab: benchmarks/skinny/stream.cu times the same loads
// without the math.  NN only; m <= 16.
struct TParams {
  CUtensorMap b_map;  // B's buffer from the window's base, 64 x BK boxes
  SkinnyLaunch l;
};

template <int BK, int ST, int W>
struct TCfg {
  static constexpr int kBN = 64, kM = 16, kThreads = 32 * W;
  static constexpr int kBStage = BK * kBN * 2, kAStage = kM * BK * 2;
  static constexpr int kPipe = ST * (kBStage + kAStage);
  static constexpr int kRed = W * kM * kBN * 4;  // each warp's partials
  static constexpr int kBarsAt = kPipe > kRed ? kPipe : kRed;
  // +1024: the stages start 1024-byte aligned (the swizzle's period).
  static constexpr int kSmem = kBarsAt + ST * 8 + 1024;
  static_assert(BK % 16 == 0 && BK <= 256, "a TMA box is at most 256 rows");
};

template <int BK, int ST, int W>
__global__ void __launch_bounds__(32 * W, 1)
    SkinnyT(const __grid_constant__ TParams P) {
  using C = TCfg<BK, ST, W>;
  constexpr int kBN = C::kBN, kM = C::kM, kThreads = C::kThreads;
  constexpr int kAChunks = BK / 8;  // 16-byte chunks of an A stage row
  extern __shared__ unsigned char smem_raw[];
  const uint32_t raw =
      static_cast<uint32_t>(__cvta_generic_to_shared(smem_raw));
  const uint32_t base = (raw + 1023u) & ~1023u;
  auto b_stage = [&](int s) { return base + s * C::kBStage; };
  auto a_stage = [&](int s) {
    return base + ST * C::kBStage + s * C::kAStage;
  };
  auto full = [&](int s) { return base + C::kBarsAt + 8 * s; };
  const SkinnyLaunch& L = P.l;
  const int n0 = static_cast<int>(blockIdx.x) * kBN;
  const T* A = reinterpret_cast<const T*>(L.a.Locate());
  const int64_t lda = L.a.ld;
  const int tiles = (L.k + BK - 1) / BK;
  const int tid = static_cast<int>(threadIdx.x), warp = tid >> 5,
            lane = tid & 31;
  // The window's first row and column in the map (thread 0 issues the
  // boxes): the map starts at B's base, its rows L.b.ld elements apart.
  int b_row = 0, b_col = 0;
  if (tid == 0) {
    const int64_t off = L.b.Locate() - L.b.base, pitch = L.b.ld * 2;
    b_row = static_cast<int>(off / pitch);
    b_col = static_cast<int>(off % pitch / 2);
    for (int s = 0; s < ST; ++s) MbarInit(full(s));
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();
  auto load = [&](int t, int s) {
    const int k0 = t * BK;
    LoadAStage<BK, kThreads>(a_stage(s), A, lda, L.m, L.k, k0, tid);
    if (tid == 0) {  // the whole box counts, rows past the map zero-filled
      MbarExpectTx(full(s), C::kBStage);
      TmaBox(b_stage(s), &P.b_map, b_col + n0, b_row + k0, full(s));
    }
  };
  float acc[8][4] = {};
#pragma unroll
  for (int i = 0; i < ST - 1; ++i) {
    if (i < tiles) load(i, i);
    sk::CpAsyncCommit();
  }
  const int mrow = ((lane >> 3) & 1) * 8 + (lane & 7), half = lane >> 4;
  for (int i = 0; i < tiles; ++i) {
    const int s = i % ST;
    sk::CpAsyncWait<ST - 2>();
    MbarWait(full(s), (i / ST) & 1);
    // The last stage's rows past K: zeros, not the buffer's next rows (A
    // is zero there, but 0 * inf is NaN).  Whole 128-byte rows: the
    // swizzle moves chunks within a row only.
    const int valid = L.k - i * BK;
    for (int q = tid; q < (BK - valid) * 8; q += kThreads)
      asm volatile("st.shared.v4.u32 [%0], {%1, %1, %1, %1};\n" ::"r"(
                       b_stage(s) + valid * 128 + q * 16),
                   "r"(0)
                   : "memory");
    __syncthreads();  // stage s landed; everyone is done with stage s - 1
    if (i + ST - 1 < tiles) load(i + ST - 1, (i + ST - 1) % ST);
    sk::CpAsyncCommit();
#pragma unroll 2
    for (int kk = warp; kk < BK / 16; kk += W) {
      uint32_t af[4];
      sk::Ldsm4(a_stage(s) + SwzC<kAChunks>(mrow, kk * 2 + half), af);
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        uint32_t bf[4];
        sk::Ldsm4T(b_stage(s) + SwzC<8>(kk * 16 + mrow, j * 2 + half), bf);
        sk::Mma<T>(acc[2 * j], af, bf[0], bf[1]);
        sk::Mma<T>(acc[2 * j + 1], af, bf[2], bf[3]);
      }
    }
  }
  sk::CpAsyncWait<0>();
  __syncthreads();  // every warp is done with the stages: partials there
  float* red = reinterpret_cast<float*>(smem_raw + (base - raw));
  const bool two_halves = L.m > 8;
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    const int row = lane >> 2, col = j * 8 + (lane & 3) * 2;
    *reinterpret_cast<float2*>(&red[(warp * kM + row) * kBN + col]) =
        make_float2(acc[j][0], acc[j][1]);
    if (two_halves)
      *reinterpret_cast<float2*>(&red[(warp * kM + row + 8) * kBN + col]) =
          make_float2(acc[j][2], acc[j][3]);
  }
  __syncthreads();
  T* D = reinterpret_cast<T*>(const_cast<char*>(L.d.Locate()));
  const T* Cm = L.beta != 0.f ? reinterpret_cast<const T*>(L.c.Locate())
                              : nullptr;
  for (int q = tid; q < kM * (kBN / 8); q += kThreads) {
    const int row = q / (kBN / 8), col = (q % (kBN / 8)) * 8;
    if (row >= L.m || n0 + col >= L.n) continue;
    float v[8] = {};
#pragma unroll
    for (int w = 0; w < W; ++w) sk::AddChunk(&red[(w * kM + row) * kBN + col], v);
    float c[8] = {};
    if (Cm != nullptr) sk::LoadChunk(Cm + row * L.c.ld + n0 + col, 8, c);
    float o[8];
#pragma unroll
    for (int e = 0; e < 8; ++e) o[e] = L.alpha * v[e] + L.beta * c[e];
    sk::StoreChunk(D + row * L.d.ld + n0 + col, L.n - (n0 + col), o);
  }
}

template <int BK, int ST, int W>
std::string RunT(const SkinnyLaunch& l) {
  using C = TCfg<BK, ST, W>;
  if (l.m > 16) return "m past 16";
  static const PFN_cuTensorMapEncodeTiled_v12000 encode = [] {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult q;
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000,
                                         cudaEnableDefault, &q) != cudaSuccess)
      fn = nullptr;
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(fn);
  }();
  if (encode == nullptr) return "no cuTensorMapEncodeTiled";
  const int64_t pitch = l.b.ld * 2;
  if (pitch % 16 || reinterpret_cast<uintptr_t>(l.b.base) % 16)
    return "B's base or rows not 16-byte aligned";
  TParams p;
  p.l = l;
  p.l.split_k = 1;
  cuuint64_t dims[2] = {static_cast<cuuint64_t>(l.b.ld),
                        static_cast<cuuint64_t>((g_b_end - l.b.base) / pitch)};
  cuuint64_t strides[1] = {static_cast<cuuint64_t>(pitch)};
  cuuint32_t box[2] = {64, BK}, elem[2] = {1, 1};
  const CUresult r = encode(
      &p.b_map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2,
      const_cast<char*>(l.b.base), dims, strides, box, elem,
      CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
      CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS)
    return "cuTensorMapEncodeTiled failed (" + std::to_string(r) + ")";
  auto* fn = &SkinnyT<BK, ST, W>;
  static const cudaError_t attr = cudaFuncSetAttribute(
      reinterpret_cast<const void*>(fn),
      cudaFuncAttributeMaxDynamicSharedMemorySize, C::kSmem);
  if (attr != cudaSuccess) return cudaGetErrorString(attr);
  fn<<<(l.n + 63) / 64, C::kThreads, C::kSmem, l.stream>>>(p);
  const cudaError_t e = cudaGetLastError();
  return e == cudaSuccess ? "" : cudaGetErrorString(e);
}

struct Deep {
  RunFn run;
  const char* name;
};
const Deep kDeeps[] = {{&RunT<128, 8, 4>, "t64x128s8w4"},
                       {&RunT<128, 8, 8>, "t64x128s8w8"},
                       {&RunT<256, 5, 8>, "t64x256s5w8"},
                       {&RunT<64, 12, 4>, "t64x64s12w4"}};

// The table loop's cells (B hot) and the stacked loop's (B cold, a new
// layer each call), m <= 16: the deep candidates beside the library's
// narrow tile and its wide tile at the planner's split.
void DeepCells() {
  const int shapes[][3] = {{8, 2048, 2048},  {16, 2048, 2048},
                           {16, 4096, 4096}, {8, 4096, 4096},
                           {16, 512, 1536},  {8, 1536, 1536},
                           {16, 4096, 1536}, {1, 2048, 2048},
                           {16, 2048, 4096}, {8, 4096, 2048}};
  for (auto& s : shapes) {
    const int m = s[0], n = s[1], k = s[2], s0 = SkinnySplit(n, k, sms);
    for (bool hot : {true, false}) {
      const double narrow = Time(&RunNarrowNN, m, n, k, 1, false, hot);
      const double wide = Time(&RunShippedNN, m, n, k, s0, false, hot);
      char line[512];
      int len = std::snprintf(line, sizeof line,
                              "DEEP %s m=%d n=%d k=%d: narrow %.2f wide c%d "
                              "%.2f |", hot ? "hot " : "cold", m, n, k,
                              narrow, s0, wide);
      double best = 1e30;
      for (const Deep& d : kDeeps) {
        const double us = Time(d.run, m, n, k, 1, false, hot);
        if (us > 0) best = std::min(best, us);
        len += std::snprintf(line + len, sizeof line - len, " %s %.2f", d.name,
                             us);
      }
      std::printf("%s | best/min(narrow,wide) %.2f\n", line,
                  best / std::min(narrow, wide));
      std::fflush(stdout);
    }
  }
}

// --kwarps: SkinnyV with warps along K (KW 2 and 4) beside the library's
// tiles, NN and NT, B hot (the table loop) and cold (the stacked loop),
// on the sweep's cells where the table loop with body graphs lost to
// XLA's loop (2026-12-06-h200-6c35c90) and their neighbours: the narrow
// tile (where one wave), the wide tile at the planner's split, and each
// candidate at every split (through the probe's workspace and last-CTA
// count, not a cluster: whether more warps a scheduler pay, before a
// cluster form is built).  Ratio: the faster library tile over the best
// candidate (> 1: a candidate is faster).
void KWarps() {
  const int shapes[][3] = {{8, 2048, 2048}, {16, 2048, 2048}, {16, 512, 1536},
                           {16, 4096, 4096}, {8, 4096, 2048}, {16, 4096, 1536},
                           {1, 4096, 4096},  {16, 1536, 1536}};
  const char* names[] = {"v64x64s3",  "v64x64s3k2", "v64x64s3k4",
                         "v64x128s3k4", "v64x128s2k4", "v128x64s3k2"};
  for (bool tb : {false, true})
    for (bool hot : {true, false})
      for (auto& sh : shapes) {
        const int m = sh[0], n = sh[1], k = sh[2], s0 = SkinnySplit(n, k, sms);
        namespace kn = jax_dynoff::kernels;
        const bool one_wave = (n + kn::kSkinnyNarrowTileN - 1) /
                                  kn::kSkinnyNarrowTileN <=
                              kn::kSkinnyNarrowCtasPerSm * sms;
        const double narrow =
            one_wave ? Time(tb ? &RunNarrow<true> : &RunNarrow<false>, m, n,
                            k, 1, tb, hot)
                     : 1e30;
        const double wide =
            Time(tb ? &RunShippedNT : &RunShippedNN, m, n, k, s0, tb, hot);
        Best best;
        for (const Candidate& c : kCands) {
          bool wanted = false;
          for (const char* w : names) wanted |= std::strcmp(w, c.name) == 0;
          if (wanted)
            TimeSplits(tb ? c.nt : c.nn, c.name, c.bn, c.bk, {1, 2, 4, 8, 16},
                       "s", m, n, k, &best, tb, hot);
        }
        std::printf("KWARPS %s %s m=%d n=%d k=%d: narrow %.2f wide s%d %.2f "
                    "us, best %s %.2f us: %.3fx\n", tb ? "NT" : "NN",
                    hot ? "hot " : "cold", m, n, k, narrow > 1e29 ? 0.0 : narrow,
                    s0, wide, best.name, best.us,
                    std::min(narrow, wide) / best.us);
        std::fflush(stdout);
      }
}

int main(int argc, char** argv) {
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  CK(cudaMalloc(&g_red.partials, kPartialFloats * 4));
  CK(cudaMalloc(&g_red.counters, kMaxCounters * 4));
  CK(cudaMemset(g_red.counters, 0, kMaxCounters * 4));
  if (argc > 1 && std::strcmp(argv[1], "--hot") == 0) {
    AllocBufs(size_t(16) * 2048, size_t(4096) * 2048, 4096);
    bool ok = true;
    for (const Candidate& c : kCands)
      for (int split : {1, 4, 16}) {
        ok &= Check(c.nn, c.name, 13, 1000, 1000, split, 1.5f, false);
        ok &= Check(c.nn, c.name, 8, 2048, 2048, split, 0.f, false);
      }
    for (const Wide& w : kWides)
      for (int split : {1, 2, 4, 8}) {
        ok &= Check(w.run, w.name, 13, 1000, 1000, split, 1.5f, false);
        ok &= Check(w.run, w.name, 8, 2048, 2048, split, 0.f, false);
        ok &= Check(w.run, w.name, 1, 72, 40, 1, 0.f, false);
      }
    std::printf(ok ? "CHECKS OK\n" : "SOME CHECKS FAILED\n");
    if (!ok) return 1;
    Hot();
    return 0;
  }
  if (argc > 1 && std::strcmp(argv[1], "--wide") == 0) {
    AllocBufs(size_t(16) * 4096, size_t(4096) * 4096 * kLayers, 4096);
    bool ok = true;
    for (const Wide* set : {kWides, kWidesNT})
      for (int i = 0; i < 3; ++i)
        for (int split : {1, 2, 4, 8}) {
          const bool tb = set == kWidesNT;
          ok &= Check(set[i].run, set[i].name, 13, 1000, 1000, split, 1.5f, tb);
          ok &= Check(set[i].run, set[i].name, 16, 4096, 4096, split, 0.f, tb);
          ok &= Check(set[i].run, set[i].name, 5, 136, 2056, split, 1.f, tb);
        }
    std::printf(ok ? "CHECKS OK\n" : "SOME CHECKS FAILED\n");
    if (!ok) return 1;
    WideCells();
    return 0;
  }
  if (argc > 1 && std::strcmp(argv[1], "--kwarps") == 0) {
    AllocBufs(size_t(16) * 4096, size_t(4096) * 4096 * kLayers, 4096);
    bool ok = true;
    for (const Candidate& c : kCands) {
      if (std::strchr(c.name + 1, 'k') == nullptr) continue;  // KW > 1 only
      for (bool tb : {false, true})
        for (int split : {1, 4, 16}) {
          ok &= Check(tb ? c.nt : c.nn, c.name, 13, 1000, 1000, split, 1.5f, tb);
          ok &= Check(tb ? c.nt : c.nn, c.name, 8, 2048, 2048, split, 0.f, tb);
          ok &= Check(tb ? c.nt : c.nn, c.name, 1, 72, 40, 1, 0.f, tb);
        }
    }
    std::printf(ok ? "CHECKS OK\n" : "SOME CHECKS FAILED\n");
    if (!ok) return 1;
    KWarps();
    return 0;
  }
  if (argc > 1 && std::strcmp(argv[1], "--rule") == 0) {
    AllocBufs(size_t(16) * 3072, size_t(8192) * 3072 * kLayers, 8192);
    bool ok = true;
    for (bool tb : {false, true}) {
      const RunFn narrow = tb ? &RunNarrow<true> : &RunNarrow<false>;
      ok &= Check(narrow, "narrow", 13, 1000, 1000, 1, 1.5f, tb);
      ok &= Check(narrow, "narrow", 16, 4096, 2048, 1, 0.f, tb);
    }
    std::printf(ok ? "CHECKS OK\n" : "SOME CHECKS FAILED\n");
    if (!ok) return 1;
    RuleCells();
    return 0;
  }
  if (argc > 1 && std::strcmp(argv[1], "--deep") == 0) {
    AllocBufs(size_t(16) * 4096, size_t(4096) * 4096 * kLayers, 4096);
    bool ok = true;
    for (const Deep& d : kDeeps) {
      ok &= Check(d.run, d.name, 13, 1000, 1000, 1, 1.5f, false);
      ok &= Check(d.run, d.name, 8, 2048, 2048, 1, 0.f, false);
      ok &= Check(d.run, d.name, 16, 4096, 4096, 1, 1.f, false);
      ok &= Check(d.run, d.name, 1, 72, 40, 1, 0.f, false);
      ok &= Check(d.run, d.name, 5, 136, 2056, 1, 1.f, false);
    }
    std::printf(ok ? "CHECKS OK\n" : "SOME CHECKS FAILED\n");
    if (!ok) return 1;
    DeepCells();
    return 0;
  }
  if (argc > 4 && std::strcmp(argv[1], "--ncu") == 0) {
    // One shape (m n k), B hot: the narrow tile, the wide tile at the
    // planner's split and the deep candidates, three launches each with
    // the loop's counter after each, stream-ordered, no graph: for ncu
    // (--cache-control none keeps B in L2 as the table loop has it).
    const int m = std::atoi(argv[2]), n = std::atoi(argv[3]),
              k = std::atoi(argv[4]), s0 = SkinnySplit(n, k, sms);
    AllocBufs(size_t(16) * k, size_t(k) * n, n);
    g_b_end = g_buf_end;
    SkinnyLaunch l = BufLaunch(m, n, k, 1);
    l.b = Op(g_buf.b, n);
    std::vector<std::pair<RunFn, int>> runs = {{&RunNarrowNN, 1},
                                               {&RunShippedNN, s0}};
    for (const Deep& d : kDeeps) runs.push_back({d.run, 1});
    for (auto& r : runs)
      for (int i = 0; i < 3; ++i) {
        SkinnyLaunch li = l;
        li.split_k = r.second;
        const std::string e = r.first(li);
        if (!e.empty()) std::printf("launch failed: %s\n", e.c_str());
        Counter<<<1, 1>>>(g_buf.ctr);
      }
    CK(cudaDeviceSynchronize());
    std::printf("ncu mode done: m=%d n=%d k=%d wide split %d\n", m, n, k, s0);
    return 0;
  }
  if (argc > 1 && std::strcmp(argv[1], "--xsplit") == 0) {
    AllocBufs(size_t(16) * 4096, size_t(4096) * 4096, 4096);
    bool ok = true;
    for (const XCand& c : kXCands)
      for (int split : {4, 8, 16}) {
        ok &= Check(c.two, c.name, 13, 1000, 1000, split, 1.5f, false);
        ok &= Check(c.two, c.name, 8, 2048, 2048, split, 0.f, false);
      }
    std::printf(ok ? "CHECKS OK\n" : "SOME CHECKS FAILED\n");
    if (!ok) return 1;
    XSplitCells();
    return 0;
  }
  if (argc > 1 && std::strcmp(argv[1], "--floors") == 0) {
    AllocBufs(size_t(16) * 4096, size_t(4096) * 4096 * kLayers, 4096);
    Floors();
    return 0;
  }
  bool ok = true;
  for (const Candidate& c : kCands)
    for (bool tb : {false, true}) {
      const RunFn run = tb ? c.nt : c.nn;
      if (run == nullptr) continue;  // (the bulk candidates: NN only)
      for (int split : {1, 3, 8, 16}) {
        ok &= Check(run, c.name, 16, 4096, 4096, split, 0.f, tb);
        ok &= Check(run, c.name, 13, 1000, 1000, split, 1.5f, tb);
        ok &= Check(run, c.name, 5, 136, 2056, split, 1.f, tb);
      }
      ok &= Check(run, c.name, 1, 72, 40, 1, 0.f, tb);
    }
  std::printf(ok ? "CHECKS OK\n" : "SOME CHECKS FAILED\n");
  if (!ok) return 1;
  // Stacked-weights shapes of the sweep (m <= 16).
  const int shapes[][3] = {{16, 4096, 4096}, {8, 2048, 2048}, {16, 2048, 2048},
                           {1, 2048, 2048},  {16, 512, 1536}, {8, 4096, 512},
                           {1, 512, 1024},   {16, 1536, 1536}, {8, 768, 768},
                           {16, 1024, 4096}, {8, 4096, 1024}, {16, 512, 512}};
  size_t max_b = 0, max_a = 0;
  for (auto& s : shapes) {
    max_b = std::max(max_b, size_t(s[1]) * s[2]);
    max_a = std::max(max_a, size_t(s[0]) * s[2]);
  }
  AllocBufs(max_a, max_b * kLayers, 4096);
  for (auto& s : shapes) {
    const int m = s[0], n = s[1], k = s[2];
    const double bytes = double(n) * k * 2;
    for (bool tb : {false, true}) {
      const int s0 = SkinnySplit(n, k, sms);
      const double base = Time(tb ? &RunShippedNT : &RunShippedNN, m, n, k,
                               s0, tb);
      double best = 1e30;
      char best_name[64] = "";
      for (const Candidate& c : kCands) {
        if ((tb ? c.nt : c.nn) == nullptr) continue;
        const int tiles = (n + c.bn - 1) / c.bn, ktiles = (k + c.bk - 1) / c.bk;
        char line[512];
        int len = std::snprintf(line, sizeof line, "  %-10s", c.name);
        for (int split : {1, 2, 4, 8, 16, 32}) {
          if (split > ktiles || tiles * split > 8 * sms) continue;
          const double us = Time(tb ? c.nt : c.nn, m, n, k, split, tb);
          len += std::snprintf(line + len, sizeof line - len, " s%d %.2f",
                               split, us);
          if (us > 0 && us < best) {
            best = us;
            std::snprintf(best_name, sizeof best_name, "%s split %d (%d CTAs)",
                          c.name, split, tiles * split);
          }
        }
        std::printf("%s\n", line);
      }
      std::printf("SHAPE %s m=%d n=%d k=%d: shipped %.2f us (%.2f TB/s), best "
                  "%s %.2f us (%.2f TB/s): %.2fx\n",
                  tb ? "NT" : "NN", m, n, k, base, bytes / base / 1e6,
                  best_name, best, bytes / best / 1e6, base / best);
      if (!tb) {  // hot: the shipped kernel and the bulk candidates, NN
        char line[1024];
        int len = std::snprintf(line, sizeof line, "  hot shipped s%d %.2f",
                                s0, Time(&RunShippedNN, m, n, k, s0, false,
                                         true));
        for (const Candidate& c : kCands) {
          if (c.nt != nullptr) continue;  // the bulk candidates
          const int tiles = (n + c.bn - 1) / c.bn,
                    ktiles = (k + c.bk - 1) / c.bk;
          len += std::snprintf(line + len, sizeof line - len, " | %s", c.name);
          for (int split : {1, 2, 4, 8, 16, 32}) {
            if (split > ktiles || tiles * split > 8 * sms) continue;
            len += std::snprintf(line + len, sizeof line - len, " s%d %.2f",
                                 split, Time(c.nn, m, n, k, split, false,
                                             true));
          }
        }
        std::printf("%s\n", line);
      }
      std::fflush(stdout);
    }
  }
  return 0;
}
