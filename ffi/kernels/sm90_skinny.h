// The skinny kernel: D = cast(alpha * A @ B + beta * C) for m <= 16 * MFrags
// rows (stacked-weight layers, decode steps), where the time is streaming B
// and the wgmma tiles (64 rows or more) waste most of their work and launch
// one CTA per output tile, too few to pull B at the HBM rate (the 64x64
// direct tile at m = 16: docs/design.md, small problems).
//
// Each CTA (2 warps, 64 columns: 32 per warp) owns one column tile and a
// K range; the `split` CTAs of a column tile form one thread-block cluster
// and add their float32 partials through distributed shared memory, each
// rank owning 64 / split of the columns: every rank pushes its partial of
// those columns into the owner's reduction buffer (one slot per rank) with
// st.async, which counts the bytes on the owner's mbarrier; the owner
// waits for its own barrier alone, adds its slots in rank order
// (deterministic) and stores.  Against pulling the partials between two
// cluster barriers this saves 0.4-0.9 us a call on an H100 (6.2 to 5.5 us
// for 16x512x512 with the loop's counter; benchmarks/skinny/phases.cu
// times the phases).
// So a layer is one launch, with no workspace and no memset, and for
// n = 4096 it runs 64 column tiles x 4 ranks = 256 CTAs, two an SM, each
// streaming a 1024 x 64 slab of B through a 4-stage cp.async pipeline
// into mma.sync m16n8k16 (bfloat16 / float16, float32 accumulation).
// 64 columns a CTA, not 128: B's NN rows are then 128 bytes, one L2 line,
// and twice the CTAs keep as many bytes in flight; at the same cluster
// size the 128-column tile (4 warps) was 2-7% slower wherever this tile
// is planned (plan.h SkinnySplit says where that was measured).
//
// B is row-major k x n (NN), or with kTransB row-major n x k, K
// contiguous (NT: x @ W^T, the gradient of x @ W): its stage is then 64
// rows of output columns, 64 K each, and plain ldmatrix reads the mma's
// column-major B fragments where NN's needs the transposing one.
//
// Windows: any (row-major A, B, C and D; the handler's SkinnyOperand
// locates each on the device from the clamped offsets).  Loads are 16-byte
// cp.async, predicated (zero-filled) past the window along K and ignored
// past m and n; stores are 16-byte vectors of whole 8-column chunks (for a
// float32 C and D two, the second only inside the width), so the plan
// proves every window address, leading dimension and width a multiple of 16
// bytes (jax_dynoff/plan.py, alignment_proof).  Elements outside D's
// window are never written.  sm_90 (clusters) only.
#ifndef JAX_DYNOFF_KERNELS_SM90_SKINNY_H_
#define JAX_DYNOFF_KERNELS_SM90_SKINNY_H_

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>

#include "kernels/cluster_smem.h"  // MapToRank
#include "kernels/launch.h"

namespace jax_dynoff {
namespace kernels {
namespace skinny {

constexpr int kTileN = kSkinnyTileN;  // columns per CTA (2 warps x 32)
constexpr int kTileK = kSkinnyTileK;  // K per pipeline stage
constexpr int kDefaultStages = 4;
// The shipped tile's warps, 32 columns each, from its columns (plan.h
// kSkinnyTileN), and its threads.  A probe may instantiate the kernel
// with more warps (benchmarks/skinny/variants.cu: 4 warps, 128 columns a
// CTA, the tile before this one); the library's lines all take the
// default.
constexpr int kDefaultWarps = kTileN / 32;
constexpr int kThreads = 32 * kDefaultWarps;
static_assert(kTileN % 32 == 0, "32 columns a warp");
// The reduction buffer's row padding, in floats: 16 bytes keep its rows'
// float4 reads aligned and shift the rows of a slot across the banks.
constexpr int kRedPad = 4;
// Epilogue chunks (8 columns of a row) a thread handles: a rank owns
// kM x (kTileN / split) outputs, most at split 1.
template <int kM, int kWarps = kDefaultWarps>
constexpr int kEpilogueItems =
    (kM * (32 * kWarps / 8) + 32 * kWarps - 1) / (32 * kWarps);

// The pipeline's stages, then the reduction buffer: `split` slots, slot r
// holding rank r's partial of this rank's kM x (kTileN / split) outputs,
// rows kTileN / split + kRedPad floats apart, then the mbarrier that
// counts the bytes arriving there.  Apart from the pipeline, so that a
// rank may fill an owner's slot while the owner is still in its main loop.
template <int kMFrags, int kStages, int kWarps = kDefaultWarps>
struct Smem {
  static constexpr int kTileN = 32 * kWarps;  // the CTA's columns
  static constexpr int kM = 16 * kMFrags;
  static constexpr int kAStage = kM * kTileK * 2;      // 128 B per row
  static constexpr int kBStage = kTileK * kTileN * 2;  // 128 B a row shipped
  static constexpr int kPipe = kStages * (kAStage + kBStage);
  // split x kM x (kTileN / split + kRedPad) floats, largest at the
  // largest split.
  static constexpr int kRed = kM * (kTileN + kRedPad * kSkinnyMaxSplit) * 4;
  // What every rank pushes to each owner, summed over the ranks: a float32
  // kM x kTileN tile, whatever the split.
  static constexpr int kRedBytesIn = kM * kTileN * 4;
  static constexpr int kBarrier = kPipe + kRed;
  static constexpr int kBytes = kBarrier + 8;
  static_assert(kBarrier % 8 == 0, "an mbarrier is 8-byte aligned");
};

// The reduction's cluster primitives (PTX ISA 8.0+, sm_90).  A launch
// without a cluster is a cluster of one CTA: they hold at split 1 as well.
__device__ __forceinline__ void MbarInit(uint32_t bar) {
  // One arrival: MbarExpectBytes's.
  asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;\n" ::"r"(bar)
               : "memory");
  // The initialisation, visible across the cluster at its next barrier.
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}
// The one arrival, and the bytes to come: the phase completes when they
// have all landed.  Bytes that land first take the count below zero (its
// range is +-(2^20 - 1)), so this may follow the peers' first stores.
__device__ __forceinline__ void MbarExpectBytes(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::
                   "r"(bar), "r"(bytes)
               : "memory");
}
__device__ __forceinline__ void ClusterArriveRelaxed() {
  asm volatile("barrier.cluster.arrive.relaxed.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void ClusterWait() {  // acquire
  asm volatile("barrier.cluster.wait.aligned;\n" ::: "memory");
}
// Two floats into a cluster shared address, counted on `bar` (the same
// rank's mbarrier) when they land.
__device__ __forceinline__ void StAsync2(uint32_t dst, float x, float y,
                                         uint32_t bar) {
  asm volatile(
      "st.async.shared::cluster.mbarrier::complete_tx::bytes.v2.f32 [%0], "
      "{%1, %2}, [%3];\n" ::"r"(dst),
      "f"(x), "f"(y), "r"(bar)
      : "memory");
}
__device__ __forceinline__ void MbarWaitPhase0(uint32_t bar) {
  uint32_t done = 0;
  while (!done)
    asm volatile(
        "{\n .reg .pred p;\n"
        " mbarrier.try_wait.parity.shared::cta.b64 p, [%1], 0;\n"
        " selp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(bar)
        : "memory");
}

__device__ __forceinline__ void CpAsync16(uint32_t dst, const void* src,
                                          bool valid) {
  // src-size 0 reads nothing and zero-fills the 16 bytes.
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst),
               "l"(src), "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void CpAsyncCommit() {
  asm volatile("cp.async.commit_group;\n" ::);
}
template <int N>
__device__ __forceinline__ void CpAsyncWait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}
__device__ __forceinline__ void Ldsm4(uint32_t addr, uint32_t (&r)[4]) {
  asm volatile(
      "ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
      : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
      : "r"(addr));
}
__device__ __forceinline__ void Ldsm4T(uint32_t addr, uint32_t (&r)[4]) {
  asm volatile(
      "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
      : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
      : "r"(addr));
}
template <typename T>
__device__ __forceinline__ void Mma(float (&d)[4], const uint32_t (&a)[4],
                                    uint32_t b0, uint32_t b1) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
        "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
        "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
}

template <typename T>
__device__ __forceinline__ float ToFloat(T x) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) return __bfloat162float(x);
  else return __half2float(x);
}
template <typename T>
__device__ __forceinline__ T FromFloat(float x) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) return __float2bfloat16_rn(x);
  else return __float2half_rn(x);
}

// One 8-column chunk of a C or D row, of which the first `valid` columns
// lie inside the window (at least 8 for 16-bit elements: the plan proves
// widths 16-byte multiples; at least 4 for float32, whose second 16 bytes
// are then past the window's width and left alone).
template <typename TOut>
__device__ __forceinline__ void LoadChunk(const TOut* p, int valid,
                                          float (&v)[8]) {
  if constexpr (std::is_same_v<TOut, float>) {
    const float4 lo = *reinterpret_cast<const float4*>(p);
    const float4 hi = valid >= 8 ? *reinterpret_cast<const float4*>(p + 4)
                                 : make_float4(0.f, 0.f, 0.f, 0.f);
    v[0] = lo.x; v[1] = lo.y; v[2] = lo.z; v[3] = lo.w;
    v[4] = hi.x; v[5] = hi.y; v[6] = hi.z; v[7] = hi.w;
  } else {
    alignas(16) TOut c[8];
    *reinterpret_cast<uint4*>(c) = *reinterpret_cast<const uint4*>(p);
#pragma unroll
    for (int e = 0; e < 8; ++e) v[e] = ToFloat(c[e]);
  }
}
// Adds 8 float32 partials (16-byte aligned, in shared memory) to v: a
// slot of the cluster's reduction here, a warp's partial in the narrow
// tile (kernels/sm90_skinny_narrow.h).
__device__ __forceinline__ void AddChunk(const float* p, float (&v)[8]) {
  const float4 x0 = *reinterpret_cast<const float4*>(p);
  const float4 x1 = *reinterpret_cast<const float4*>(p + 4);
  v[0] += x0.x; v[1] += x0.y; v[2] += x0.z; v[3] += x0.w;
  v[4] += x1.x; v[5] += x1.y; v[6] += x1.z; v[7] += x1.w;
}
template <typename TOut>
__device__ __forceinline__ void StoreChunk(TOut* p, int valid,
                                           const float (&v)[8]) {
  if constexpr (std::is_same_v<TOut, float>) {
    *reinterpret_cast<float4*>(p) = make_float4(v[0], v[1], v[2], v[3]);
    if (valid >= 8)
      *reinterpret_cast<float4*>(p + 4) = make_float4(v[4], v[5], v[6], v[7]);
  } else {
    alignas(16) TOut out[8];
#pragma unroll
    for (int e = 0; e < 8; ++e) out[e] = FromFloat<TOut>(v[e]);
    *reinterpret_cast<uint4*>(p) = *reinterpret_cast<const uint4*>(out);
  }
}

// Shared-memory rows hold 16-byte chunks; chunk c of row r sits at
// c ^ (r % 8), so the 8 rows one ldmatrix reads (same logical chunk) hit 8
// different bank groups, and the cp.async writes stay 16-byte aligned.
__host__ __device__ __forceinline__ uint32_t Swz(int row, int chunk,
                                                 int row_bytes) {
  return static_cast<uint32_t>(row * row_bytes + ((chunk ^ (row & 7)) << 4));
}

// One of a thread's 16-byte cp.async chunks of a pipeline stage, located
// once before the main loop, so that a stage adds only its K and its
// stage's shared address.  (Rebuilt from the thread index every stage --
// row and chunk, swizzle, a 64-bit row x ld product, the bound checks --
// they were most of the wide tile's main loop, which is bound by issuing
// instructions with one warp a scheduler.)  At the stage whose first K is
// k0 (never negative) the chunk reads the operand's elements from src +
// k0 (K contiguous) or src + k0 * ld (K down B's rows) on, into dst of
// the stage; it is loaded where k0 < lim and zero-filled elsewhere.  lim
// folds both bound checks: 0 for a row or column outside m or n, else the
// end of K less the chunk's K offset in the stage, so that k0 < lim is
// exactly "inside m or n, and the chunk's first K below the end".  src is
// 0 where lim <= 0 (never loaded), so that every address formed lies in
// the operand.
struct StageChunk {
  int64_t src;
  uint32_t dst;
  int lim;
};
// Chunk c of stage row `row` where a stage's rows run along K, kTileK
// elements (kTileK / 8 chunks) a row, swizzled (Swz): A's rows, or B's
// output columns where B is transposed.  Stage row `row` is the operand's
// row row0 + row, which exists below rows_end; K exists below k_end.
template <int kTileK>
__host__ __device__ __forceinline__ StageChunk KRowChunk(int row, int c,
                                                         int row0,
                                                         int rows_end,
                                                         int64_t ld,
                                                         int k_end) {
  const int lim = row0 + row < rows_end ? k_end - c * 8 : 0;
  return {lim > 0 ? (row0 + row) * ld + c * 8 : 0, Swz(row, c, kTileK * 2),
          lim};
}
// Chunk c of stage row `row` where a stage's rows are K (B not
// transposed): columns col0 + 8c to col0 + 8c + 7 of K k0 + row, at dst
// (the layout's swizzle).  Columns exist below n, K below k_end.
__host__ __device__ __forceinline__ StageChunk KColChunk(int row, int c,
                                                         int col0, int n,
                                                         int64_t ld,
                                                         int k_end,
                                                         uint32_t dst) {
  const int col = col0 + c * 8;
  const int lim = col < n ? k_end - row : 0;
  return {lim > 0 ? row * ld + col : 0, dst, lim};
}
// The row and column of chunk i of thread tid, where a stage's rows are
// kRowChunks chunks and its chunks go to the kThreads threads in turn:
// chunk q = tid + i * kThreads, in row q / kRowChunks, column
// q % kRowChunks.  Where kThreads is a multiple of kRowChunks this is
// written as what it is, one column and rows kThreads / kRowChunks apart,
// so that the compiler sees it: where that is a multiple of 8 rows, the
// swizzle repeats and the chunks' shared offsets differ by constants (one
// register and immediate offsets).
template <int kThreads, int kRowChunks>
__host__ __device__ __forceinline__ void ChunkRowCol(int tid, int i, int& row,
                                                     int& c) {
  if constexpr (kThreads % kRowChunks == 0) {
    row = tid / kRowChunks + i * (kThreads / kRowChunks);
    c = tid % kRowChunks;
  } else {
    const int q = tid + i * kThreads;
    row = q / kRowChunks;
    c = q % kRowChunks;
  }
}
// A value as computed, its making hidden from the compiler's optimiser by
// an empty asm (no instruction).  A chunk's address left as a sum would be
// folded with the stage's K back into the row x ld product (row * ld +
// k0 * ld = (row + k0) * ld) and rebuilt every stage; a stage's K seen
// as the loop's induction variable makes the chunks' addresses 64-bit
// pointer increments, two instructions a chunk where one multiply-add
// does.
template <typename V>
__device__ __forceinline__ V Kept(V v) {
  static_assert(sizeof(V) == 4 || sizeof(V) == 8, "a 32- or 64-bit value");
  if constexpr (sizeof(V) == 8)
    asm("" : "+l"(v));
  else
    asm("" : "+r"(v));
  return v;
}

// One operand's chunks of a stage as one thread holds them, located once
// (StageChunk each), for both skinny tiles.
template <typename T, int kN>
struct ThreadChunks {
  const T* src[kN];
  uint32_t dst[kN];
  int lim[kN];
  __device__ __forceinline__ void Set(int i, const T* base, StageChunk c) {
    src[i] = Kept(base + c.src);
    dst[i] = c.dst;
    lim[i] = c.lim;
  }
};
// The chunks of an operand whose stage rows run along K (KRowChunk: A's
// rows, or B's output columns where B is transposed): stage rows row0 on,
// below rows_end, of kTileK / 8 chunks each.
template <int kThreads, int kTileK, typename T, int kN>
__device__ __forceinline__ void LocateKRowChunks(ThreadChunks<T, kN>& ch,
                                                 const T* base, int tid,
                                                 int row0, int rows_end,
                                                 int64_t ld, int k_end) {
#pragma unroll
  for (int i = 0; i < kN; ++i) {
    int row, col;
    ChunkRowCol<kThreads, kTileK / 8>(tid, i, row, col);
    ch.Set(i, base, KRowChunk<kTileK>(row, col, row0, rows_end, ld, k_end));
  }
}

// Where a probe can time the kernel's phases (benchmarks/skinny/phases.cu
// passes a Marks type that reads the clocks).  The library's kernels take
// NoMarks, which compiles to nothing.  `dep`, where given, is a value the
// phase has produced (an operand's located address): a timing Marks waits
// for it, so the mark falls after the offset reads, not at their issue.
enum SkinnyPhase {
  kPhaseEntry,      // the CTA starts
  kPhaseLocated,    // A's and B's windows located (the offsets read)
  kPhaseFirstTile,  // the first K tile has landed in shared memory
  kPhaseMainLoop,   // every K tile multiplied
  kPhasePartials,   // every rank's partial of this rank's columns landed
  kPhaseStored,     // this rank's columns reduced and stored
  kPhaseExit,       // the CTA leaves (no barrier after the stores)
  kNumPhases
};
struct NoMarks {
  __device__ __forceinline__ static void At(SkinnyPhase, const void* = nullptr) {}
};

// TOut: C's and D's element (T's, or float32).
template <typename T, int kMFrags, int kStages, bool kTransB,
          typename TOut = T, typename Marks = NoMarks,
          int kWarps = kDefaultWarps>
__global__ void __launch_bounds__(32 * kWarps, 1)
    SkinnyKernel(const SkinnyLaunch L) {
  using Sm = Smem<kMFrags, kStages, kWarps>;
  constexpr int kM = Sm::kM;
  // The CTA's columns and threads (the namespace's kTileN and kThreads at
  // the default warps).
  constexpr int kTileN = Sm::kTileN, kThreads = 32 * kWarps;
  extern __shared__ __align__(128) unsigned char smem[];

  const int split = L.split_k;  // == the cluster size along x
  const int rank = static_cast<int>(blockIdx.x) % split;
  const int n0 = static_cast<int>(blockIdx.x) / split * kTileN;
  Marks::At(kPhaseEntry);
  const T* A = reinterpret_cast<const T*>(L.a.Locate());
  const T* B = reinterpret_cast<const T*>(L.b.Locate());
  Marks::At(kPhaseLocated, B);
  const int64_t lda = L.a.ld, ldb = L.b.ld;
  // This rank's K tiles: an even share, in order.
  const int k_tiles = (L.k + kTileK - 1) / kTileK;
  const int t_begin = static_cast<int>(int64_t{rank} * k_tiles / split);
  const int t_end = static_cast<int>(int64_t{rank + 1} * k_tiles / split);
  const int k_hi = min(L.k, t_end * kTileK);  // zero-fill from here on

  const int tid = static_cast<int>(threadIdx.x), warp = tid >> 5,
            lane = tid & 31;
  const uint32_t base = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  auto a_stage = [&](int s) { return base + s * Sm::kAStage; };
  auto b_stage = [&](int s) {
    return base + kStages * Sm::kAStage + s * Sm::kBStage;
  };

  // This thread's chunks of a stage, located once (StageChunk): A's kM
  // rows x 8 chunks, then B's 64 rows (K) x kTileN / 8 chunks (NN) or
  // kTileN rows (output columns) x 8 chunks (NT).
  constexpr int kAChunks = kM * kTileK / 8 / kThreads,
                kBChunks = kTileK * kTileN / 8 / kThreads;
  static_assert(kAChunks * kThreads == kM * kTileK / 8 &&
                    kBChunks * kThreads == kTileK * kTileN / 8,
                "every thread loads as many chunks of a stage");
  static_assert(kTileN == 64 || kTileN == 128, "64 or 128 columns a CTA");
  ThreadChunks<T, kAChunks> a_ch;
  LocateKRowChunks<kThreads, kTileK>(a_ch, A, tid, 0, L.m, lda, k_hi);
  ThreadChunks<T, kBChunks> b_ch;
  if constexpr (kTransB) {
    LocateKRowChunks<kThreads, kTileK>(b_ch, B, tid, n0, L.n, ldb, k_hi);
  } else {
#pragma unroll
    for (int i = 0; i < kBChunks; ++i) {
      int row, col;
      ChunkRowCol<kThreads, kTileN / 8>(tid, i, row, col);
      b_ch.Set(i, B,
               KColChunk(row, col, n0, L.n, ldb, k_hi,
                         Swz(row, col, kTileN * 2)));
    }
  }
  auto load_a = [&](int t, int s) {
    const int k0 = t * kTileK;
#pragma unroll
    for (int i = 0; i < kAChunks; ++i) {
      const bool ok = k0 < a_ch.lim[i];
      CpAsync16(a_stage(s) + a_ch.dst[i], ok ? a_ch.src[i] + k0 : A, ok);
    }
  };
  // NN: a stage's K moves down B's rows, k0 * ldb elements.  The loads
  // come in K order (tiles t_begin, t_begin + 1, ...), so that offset is
  // kept for the next load and moved by kTileK rows after each, against a
  // 64-bit product every stage.
  int64_t b_next = kTransB ? 0 : int64_t{t_begin} * kTileK * ldb;
  auto load_b = [&](int t, int s) {
    const int k0 = t * kTileK;
    int64_t k_off = k0;  // NT: K runs along a row
    if constexpr (!kTransB) {
      k_off = b_next;  // == k0 * ldb
      b_next += kTileK * ldb;
    }
#pragma unroll
    for (int i = 0; i < kBChunks; ++i) {
      const bool ok = k0 < b_ch.lim[i];
      CpAsync16(b_stage(s) + b_ch.dst[i], ok ? b_ch.src[i] + k_off : B, ok);
    }
  };
  // And the lanes' ldmatrix addresses in a stage.  ldmatrix: lane l
  // addresses row l % 8 of 8x8 matrix l / 8.
  const int mrow = ((lane >> 3) & 1) * 8 + (lane & 7), half = lane >> 4;
  uint32_t a_ld[kTileK / 16][kMFrags], b_ld[kTileK / 16][2];
#pragma unroll
  for (int kk = 0; kk < kTileK / 16; ++kk) {
#pragma unroll
    for (int f = 0; f < kMFrags; ++f)
      a_ld[kk][f] = Swz(f * 16 + mrow, kk * 2 + half, kTileK * 2);
#pragma unroll
    for (int j = 0; j < 2; ++j)
      // k 0-7 / 8-15 of columns +0..7, then +8..15; NT: lane l reads
      // column l % 8 (+8 from lane 16 on), K chunk (l / 8) % 2.
      b_ld[kk][j] =
          kTransB ? Swz(warp * 32 + j * 16 + half * 8 + (lane & 7),
                        kk * 2 + ((lane >> 3) & 1), kTileK * 2)
                  : Swz(kk * 16 + mrow, warp * 4 + j * 2 + half, kTileN * 2);
  }

  float acc[kMFrags][4][4];
#pragma unroll
  for (int f = 0; f < kMFrags; ++f)
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[f][j][e] = 0.f;

  const int tiles = t_end - t_begin;
#pragma unroll
  for (int i = 0; i < kStages - 1; ++i) {
    if (i < tiles) {
      load_a(t_begin + i, i);
      load_b(t_begin + i, i);
    }
    CpAsyncCommit();
  }

  // While the first tiles land: the reduction's barrier, set up and
  // announced (a rank may push into this CTA's slots once every CTA of
  // the cluster has arrived here: ClusterWait below), and C and D
  // located, so that the epilogue waits on no offset.
  const uint32_t bar =
      static_cast<uint32_t>(__cvta_generic_to_shared(smem + Sm::kBarrier));
  if (split > 1) {
    if (tid == 0) MbarInit(bar);
    ClusterArriveRelaxed();
  }
  TOut* D = reinterpret_cast<TOut*>(const_cast<char*>(L.d.Locate()));
  const TOut* C = L.beta != 0.f
                      ? reinterpret_cast<const TOut*>(L.c.Locate())
                      : nullptr;
  // This rank's outputs, 8 columns (a chunk) at a time: item i of thread
  // tid is chunk tid + i * kThreads.  C's chunks are read now, their
  // latency under the main loop's.
  const int width = kTileN / split, chunks_per_row = width / 8;
  float c_pre[kEpilogueItems<kM, kWarps>][8];
#pragma unroll
  for (int i = 0; i < kEpilogueItems<kM, kWarps>; ++i) {
    const int q = tid + i * kThreads, row = q / chunks_per_row;
    const int col = n0 + rank * width + (q % chunks_per_row) * 8;
#pragma unroll
    for (int e = 0; e < 8; ++e) c_pre[i][e] = 0.f;
    if (C != nullptr && q < kM * chunks_per_row && row < L.m && col < L.n)
      LoadChunk(C + row * L.c.ld + col, L.n - col, c_pre[i]);
  }
  for (int i = 0; i < tiles; ++i) {
    CpAsyncWait<kStages - 2>();
    __syncthreads();  // tile i landed; everyone is done with tile i - 1
    if (i == 0) Marks::At(kPhaseFirstTile);
    if (i + kStages - 1 < tiles) {
      load_a(t_begin + i + kStages - 1, (i + kStages - 1) % kStages);
      load_b(t_begin + i + kStages - 1, (i + kStages - 1) % kStages);
    }
    CpAsyncCommit();
    const int s = i % kStages;
#pragma unroll
    for (int kk = 0; kk < kTileK / 16; ++kk) {
      uint32_t af[kMFrags][4];
#pragma unroll
      for (int f = 0; f < kMFrags; ++f) Ldsm4(a_stage(s) + a_ld[kk][f], af[f]);
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        uint32_t bf[4];  // k 0-7 / 8-15 of columns +0..7, then +8..15
        if constexpr (kTransB)
          Ldsm4(b_stage(s) + b_ld[kk][j], bf);
        else
          Ldsm4T(b_stage(s) + b_ld[kk][j], bf);
#pragma unroll
        for (int f = 0; f < kMFrags; ++f) {
          Mma<T>(acc[f][2 * j], af[f], bf[0], bf[1]);
          Mma<T>(acc[f][2 * j + 1], af[f], bf[2], bf[3]);
        }
      }
    }
  }
  CpAsyncWait<0>();
  Marks::At(kPhaseMainLoop);

  // Each partial into its owner's slot `rank` (the owner of column c is
  // c / width; a lane's two columns have the same owner), counted on the
  // owner's barrier; then this rank's own slots, all landed.  Alone (split
  // 1, a launch without a cluster, where st.async is not defined), plain
  // stores and the CTA's barrier.
  float* const red_f = reinterpret_cast<float*>(smem + Sm::kPipe);
  const uint32_t red = static_cast<uint32_t>(__cvta_generic_to_shared(red_f));
  const int slot_ld = width + kRedPad, slot = kM * slot_ld;
  if (split > 1) {
    ClusterWait();  // every owner's barrier is initialised
    if (tid == 0) MbarExpectBytes(bar, Sm::kRedBytesIn);
  }
#pragma unroll
  for (int f = 0; f < kMFrags; ++f)
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int row = f * 16 + (lane >> 2);
      const int col = warp * 32 + j * 8 + (lane & 3) * 2;
      const int owner = col / width;
      // Floats into the owner's buffer: slot `rank`, then row and column.
      const int at = rank * slot + row * slot_ld + (col - owner * width);
      if (split > 1) {
        const uint32_t dst = MapToRank(red + 4u * at, owner);
        const uint32_t owner_bar = MapToRank(bar, owner);
        StAsync2(dst, acc[f][j][0], acc[f][j][1], owner_bar);
        StAsync2(dst + 32u * slot_ld, acc[f][j][2], acc[f][j][3], owner_bar);
      } else {
        *reinterpret_cast<float2*>(red_f + at) =
            make_float2(acc[f][j][0], acc[f][j][1]);
        *reinterpret_cast<float2*>(red_f + at + 8 * slot_ld) =
            make_float2(acc[f][j][2], acc[f][j][3]);
      }
    }
  // Only this CTA's own barrier is waited for: no rank touches another's
  // shared memory after its pushes, and an owner cannot leave before the
  // bytes it counts have landed, so no barrier precedes the exit.
  if (split > 1) MbarWaitPhase0(bar);
  else __syncthreads();
  Marks::At(kPhasePartials);

  // This rank's chunks: the slots in rank order, then the epilogue.
#pragma unroll
  for (int i = 0; i < kEpilogueItems<kM, kWarps>; ++i) {
    const int q = tid + i * kThreads, row = q / chunks_per_row;
    const int col = rank * width + (q % chunks_per_row) * 8;
    if (q >= kM * chunks_per_row || row >= L.m || n0 + col >= L.n) continue;
    float v[8] = {};
    const float* p = red_f + row * slot_ld + (col - rank * width);
#pragma unroll
    for (int r = 0; r < kSkinnyMaxSplit; ++r) {
      if (r >= split) break;
      AddChunk(p + r * slot, v);
    }
#pragma unroll
    for (int e = 0; e < 8; ++e) v[e] = L.alpha * v[e] + L.beta * c_pre[i][e];
    StoreChunk(D + row * L.d.ld + n0 + col, L.n - (n0 + col), v);
  }
  Marks::At(kPhaseStored);
  Marks::At(kPhaseExit);
}

// The shared memory above 48 KiB needs opting in, once per device (as for
// the CUTLASS kernels, kernels/run_sm90_gemm.h).
template <typename T, int kMFrags, int kStages, bool kTransB, typename TOut,
          typename Marks, int kWarps>
cudaError_t PrepareOnce(int device) {
  return OncePerDevice(device, [] {
    return cudaFuncSetAttribute(
        reinterpret_cast<const void*>(
            &SkinnyKernel<T, kMFrags, kStages, kTransB, TOut, Marks, kWarps>),
        cudaFuncAttributeMaxDynamicSharedMemorySize,
        Smem<kMFrags, kStages, kWarps>::kBytes);
  });
}

// Makes the launch Run makes, without launching it: the handler keeps it
// and launches it again for a call at the same addresses (kernels/launch.h
// PreparedLaunch), skipping the set-up of the call.
template <typename T, int kMFrags, bool kTransB = false,
          int kStages = kDefaultStages, typename TOut = T,
          typename Marks = NoMarks, int kWarps = kDefaultWarps>
std::string Prepare(const SkinnyLaunch& l, PreparedLaunch* out) {
  using Sm = Smem<kMFrags, kStages, kWarps>;
  static_assert(sizeof(SkinnyLaunch) <= kMaxParamBytes,
                "the kernel's parameter must fit a PreparedLaunch");
  if (l.m < 1 || l.m > 16 * kMFrags || l.n < 1 || l.k < 1)
    return "skinny kernel: bad m, n or k";
  if (l.split_k < 1 || l.split_k > kSkinnyMaxSplit ||
      (l.split_k & (l.split_k - 1)) != 0)
    return "skinny kernel: split must be 1, 2, 4 or 8";
  if (cudaError_t e = PrepareOnce<T, kMFrags, kStages, kTransB, TOut, Marks,
                                  kWarps>(l.device);
      e != cudaSuccess)
    return std::string("skinny kernel: cudaFuncSetAttribute: ") +
           cudaGetErrorString(e);
  const int tiles = (l.n + Sm::kTileN - 1) / Sm::kTileN;
  out->fn = reinterpret_cast<const void*>(
      &SkinnyKernel<T, kMFrags, kStages, kTransB, TOut, Marks, kWarps>);
  out->grid = dim3(static_cast<unsigned>(tiles * l.split_k));
  out->block = dim3(32 * kWarps);
  out->cluster = dim3(static_cast<unsigned>(l.split_k), 1, 1);
  out->smem = Sm::kBytes;
  out->param_bytes = sizeof(SkinnyLaunch);
  std::memcpy(out->params, &l, sizeof(SkinnyLaunch));
  return "";
}

// Prepare and launch at once (the probes, benchmarks/skinny).
template <typename T, int kMFrags, bool kTransB = false,
          int kStages = kDefaultStages, typename TOut = T,
          typename Marks = NoMarks, int kWarps = kDefaultWarps>
std::string Run(const SkinnyLaunch& l) {
  PreparedLaunch ready;
  if (std::string r =
          Prepare<T, kMFrags, kTransB, kStages, TOut, Marks, kWarps>(l, &ready);
      !r.empty())
    return r;
  const std::string r = LaunchPrepared(ready, l.stream);
  return r.empty() ? "" : "skinny kernel: " + r;
}

}  // namespace skinny
}  // namespace kernels
}  // namespace jax_dynoff

// One instantiation, B transposed or not:
//   JAX_DYNOFF_SM90_SKINNY_KERNEL(kSm90Skinny16Bf16NN, __nv_bfloat16,
//                                 __nv_bfloat16, 1, false)
#define JAX_DYNOFF_SM90_SKINNY_KERNEL(NAME, IN, OUT, MFRAGS, TRANS_B)     \
  namespace jax_dynoff {                                                  \
  namespace kernels {                                                     \
  extern const SkinnyKernelEntry NAME = {                                 \
      #NAME,                                                              \
      &skinny::Prepare<IN, MFRAGS, TRANS_B, skinny::kDefaultStages, OUT>};\
  }                                                                       \
  }

#endif  // JAX_DYNOFF_KERNELS_SM90_SKINNY_H_
