// The small-group forward kernel: for every item t of a grouped call with
// A not transposed (ragged_dot's forward x @ W[e], NN, and its input
// gradient dY @ W[e]^T, NT),
//   D_t = cast(alpha * A_t @ op(B_t))      (float32 accumulation)
// where A_t is m_t x k_t (row-major, ld lda_t: the expert's rows of x),
// B_t is k_t x n_t row-major (NN: W[e] of an (E, K, N) array) or n_t x
// k_t row-major (NT, kTransB: W[e] of an (E, N, K) array, K contiguous)
// with ld ldb_t, and D_t is m_t x n_t (row-major, ld ldd_t).  The shapes,
// addresses and strides are the grouped path's: the grouped pointer kernel
// writes them into the workspace (kernels/launch.h GroupedLaunch, plan.h
// GroupedItemOf), as for the small-group weight-gradient kernel
// (kernels/small_group_grad.h), so every window rule of the grouped path
// holds here unchanged.
//
// Why: with a few rows per expert (decode-sized MoE layers, 1-32 rows an
// expert) the CUTLASS grouped kernel pads every expert's rows to its
// 128-row tile, so most of its MMAs multiply zeros; the time is the
// weight stream either way.  This kernel swaps the operands: the weights
// are the mma.sync m16n8k16 M (128 features a CTA, one expert), the tokens
// its N (8 a fragment), so an expert of r rows pads to a multiple of 8,
// and an expert without rows reads nothing.  K streams through a 4-stage
// cp.async pipeline (64 K a stage: NN's W rows are K, read with
// ldmatrix.trans; NT's are features, K contiguous, the row-major A of the
// mma, plain ldmatrix; the tokens by plain ldmatrix, the mma's
// column-major B); the tile leaves through shared memory as 16-byte rows.
//
// Work items: (item, chunk of kTok = 64 rows of it).  grid.x runs over
// the 128-feature blocks of n (fastest), grid.y over a static bound on the
// work items, groups + ceil(m / kTok) (the sum of ceil(m_t / kTok) where
// the items' rows add up to at most m, as ragged_dot's do); each CTA finds
// its (item, chunk) by a prefix sum over the items' row counts on the
// device (a few hundred ints from L2), and a CTA past the last work item
// returns at once; where the items' rows add up past m, the CTAs take
// work items y, y + gridDim.y, ... so that none is left out.  An expert
// taller than kTok is several chunks that are adjacent in launch order
// (the same feature block, grid.x apart), so its weight tiles are read
// from HBM once and shared through L2 while its chunks are in flight,
// where the probe's version re-read them a pass of 32 tokens at a time.
// kTok = 64: 64 float32 accumulators a thread (2 m16 x 8 n8 fragments of
// a warp's 32 features), well inside the 255 registers a 128-thread CTA
// may use (ptxas, nvcc 13.0: 115 registers NN, 120 NT, no spills); 64
// halves the L2 re-reads of a tall expert's weights against 32 and
// doubles the MMAs per weight fragment, while an expert of <= 8 rows
// still runs one n8 fragment.  Shared memory: 4 stages of 24 KiB, two
// CTAs an SM.
//
// Alignment (the grouped path's rules, planner_rules.cc
// GroupedExtentReasons and AlignmentProof): every address and leading
// dimension a multiple of 16 bytes, and k_t and n_t (they run along a
// contiguous dim of A, B or D) static multiples of 8 elements, so that a
// 16-byte chunk of a row lies wholly inside or outside the item; m_t (the
// rows) is any.  Loads past k_t, n_t or the chunk's rows are zero-filled;
// stores stop at the chunk's rows and at n_t: elements outside D_t are
// never written.  An item with k_t = 0 but rows (GroupedItemOf keeps its
// m and n on this kernel) gets its zeros from this kernel, reading
// nothing.  D of the input's dtype or float32.  mma.sync and cp.async only
// (sm_80 ISA), built with the sm_90a kernels: the grouped path runs on
// sm_90 only.  benchmarks/small_groups_fwd/probe.cu runs it alone.
//
// kSwiglu (NN, D of the input's dtype): ragged_dot(activation="swiglu")'s
// epilogue, as the fused CUTLASS kernel has it (kernels/sm90_grouped.h
// Sm90GluEpilogueArray): B's n_t columns hold gate and up columns
// interleaved (2j gate j, 2j + 1 up j), h = alpha * A_t @ B_t, and D_t's
// column j (D_t is m_t x n_t / 2) is silu(h_2j) * h_2j+1 in float32, then
// cast.  The tile of h is staged in float32 and a CTA's 128 features are
// 64 of D's columns, written 4 at a time (8 bytes: n_t is a multiple of 8,
// so n_t / 2 of 4).  The planner runs it only where
// KernelOptions(grouped_tile="small_groups") forces it: the fused CUTLASS
// kernel stays the planned one for swiglu calls until GPU timings say
// otherwise.
#ifndef JAX_DYNOFF_KERNELS_SMALL_GROUP_FWD_H_
#define JAX_DYNOFF_KERNELS_SMALL_GROUP_FWD_H_

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>

#include "kernels/launch.h"
#include "kernels/pdl.h"
#include "kernels/sm90_skinny.h"  // the cp.async, ldmatrix and mma helpers
#include "plan.h"                 // kSmallGroupFwdTileN, kSmallGroupFwdChunk

namespace jax_dynoff {
namespace kernels {
namespace small_group_fwd {

constexpr int kTok = kSmallGroupFwdChunk;  // rows (tokens) a work item
constexpr int kBK = 64;                    // K a stage
static_assert(kTok % 16 == 0 && kTok <= 64, "x4 ldmatrix pairs of n8");

// A configuration: the features (D's columns) a CTA, one warp per 32 of
// them, and the pipeline's stages.  The shipped one (Shipped below) is
// 128 features, 4 stages: stages of 16 KiB of W and 8 KiB of tokens, two
// CTAs an SM.  `probe.cu --configs` times others on the decode layers
// (uniform groups, and three skewed draws), on an H100 and an H200
// (2026-12-07): 128 features at 3 stages (three CTAs an SM) was 2-6%
// faster by geometric mean with uniform groups and within 2% either way
// with skewed ones (case by case from 5% slower to 16% faster); 64
// features (smaller work items, so a skewed call's last wave is fuller)
// at 3, 4 or 6 stages was 1-13% slower with skewed groups on the H100 and
// 3-33% on the H200.  So the shipped one stays.
template <int kTileF_, int kStages_>
struct FwdConfig {
  static constexpr int kTileF = kTileF_, kStages = kStages_;
  static constexpr int kThreads = kTileF;  // a warp per 32 features
  static_assert(kTileF % 32 == 0 && kTileF / 8 <= 16,
                "whole warps, rows of at most 16 chunks (NN's swizzle)");
  static constexpr int kWStage = kBK * kTileF * 2;  // 16 KiB at 128
  static constexpr int kXStage = kTok * kBK * 2;    // 8 KiB: kTok rows of 128 B
  static constexpr int kStageBytes = kWStage + kXStage;
  static constexpr int kPipeBytes = kStages * kStageBytes;
  static_assert(kBK * kTileF / 8 % kThreads == 0 &&
                    kTok * kBK / 8 % kThreads == 0,
                "every thread loads as many chunks of a stage");

  // The staged output tile's row (kTok rows of kTileF features), in
  // elements: 16 bytes of padding for a 16-bit D, 16 for float32 too (4
  // floats): the 8 rows one warp's scalar stores reach (2 apart) then fall
  // on distinct banks, and rows stay 16-byte aligned for the reads.
  // TStage: D's element, or float32 for the swiglu epilogue (h's tile).
  template <typename TStage>
  static constexpr int kOutLd = kTileF + 16 / static_cast<int>(sizeof(TStage));
  template <typename TStage>
  static constexpr int kSmemBytes =
      kTok * kOutLd<TStage> * static_cast<int>(sizeof(TStage)) > kPipeBytes
          ? kTok * kOutLd<TStage> * static_cast<int>(sizeof(TStage))
          : kPipeBytes;
};
using Shipped = FwdConfig<kSmallGroupFwdTileN, 4>;

template <typename TOut, bool kSwiglu>
using StageOf = std::conditional_t<kSwiglu, float, TOut>;

// The kernel's parameter: GroupedLaunch's device arrays and alpha.
using Params = GroupedArrays;

using skinny::CpAsync16;
using skinny::CpAsyncCommit;
using skinny::CpAsyncWait;
using skinny::Ldsm4;
using skinny::Ldsm4T;
using skinny::Mma;
using skinny::Swz;

template <typename TOut>
__device__ __forceinline__ TOut Cast(float x) {
  if constexpr (std::is_same_v<TOut, float>) return x;
  else if constexpr (std::is_same_v<TOut, __nv_bfloat16>)
    return __float2bfloat16_rn(x);
  else return __float2half_rn(x);
}

// The work items of a chunk count: an item without rows or columns has
// none (it reads nothing and writes nothing).
__device__ __forceinline__ int64_t Chunks(const int32_t* shapes, int t) {
  const int m = shapes[3 * t], n = shapes[3 * t + 1];
  return m > 0 && n > 0 ? (m + kTok - 1) / kTok : 0;
}

// Finds work item w: sets *item (-1: none, w is past the last) and
// *chunk, the same for every thread of the CTA.  A block-wide exclusive
// prefix sum over the items' chunk counts, kPer items a thread (all of
// them loaded at once: one L2 round trip a window of 512 items).
constexpr int kPer = 4;
template <int kThreads>
__device__ __forceinline__ void FindWork(const Params& P, int64_t w,
                                         int* item, int* chunk) {
  __shared__ int64_t warp_sum[kThreads / 32];
  __shared__ int found_item, found_chunk;
  const int tid = static_cast<int>(threadIdx.x), warp = tid >> 5,
            lane = tid & 31;
  if (tid == 0) found_item = -1;
  int64_t before = 0;  // chunks of the windows already scanned
  for (int t0 = 0; t0 < P.groups; t0 += kPer * kThreads) {
    int64_t c[kPer], sum = 0;
#pragma unroll
    for (int i = 0; i < kPer; ++i) {
      const int t = t0 + tid * kPer + i;
      c[i] = t < P.groups ? Chunks(P.shapes, t) : 0;
      sum += c[i];
    }
    int64_t incl = sum;  // inclusive scan over the warp
#pragma unroll
    for (int d = 1; d < 32; d <<= 1) {
      const int64_t v = __shfl_up_sync(0xffffffffu, incl, d);
      if (lane >= d) incl += v;
    }
    if (lane == 31) warp_sum[warp] = incl;
    __syncthreads();  // also publishes found_item = -1
    int64_t e = before + incl - sum, total = 0;
#pragma unroll
    for (int v = 0; v < kThreads / 32; ++v) {
      if (v < warp) e += warp_sum[v];
      total += warp_sum[v];
    }
#pragma unroll
    for (int i = 0; i < kPer; ++i) {
      if (c[i] > 0 && w >= e && w < e + c[i]) {  // one thread at most
        found_item = t0 + tid * kPer + i;
        found_chunk = static_cast<int>(w - e);
      }
      e += c[i];
    }
    __syncthreads();  // found_* written; warp_sum read by all
    if (found_item >= 0 || w < before + total) break;  // CTA-uniform
    before += total;
  }
  *item = found_item;
  *chunk = found_chunk;
  __syncthreads();  // all have read found_*: the next search may reset it
}

// v, held in a register from here on: NVVM sinks a value computed from
// the thread's index into every block that uses it (the main loop's
// predicated loads and fragment pairs), where it is rebuilt each stage;
// the empty asm's result is a definition it cannot rebuild.
__device__ __forceinline__ uint32_t Held(uint32_t v) {
  asm volatile("" : "+r"(v));
  return v;
}

// grid: x over the kTileF-feature blocks of the largest n, y over the work
// items (item, chunk of kTok rows): a CTA takes y, y + gridDim.y, ...
template <typename Cfg, typename T, typename TOut, bool kTransB, bool kSwiglu>
__global__ void __launch_bounds__(Cfg::kThreads)
    SmallGroupFwdKernel(const __grid_constant__ Params P) {
  static_assert(!kSwiglu || (!kTransB && !std::is_same_v<TOut, float>),
                "the swiglu epilogue: NN, D of the input's dtype");
  constexpr int kTileF = Cfg::kTileF, kStages = Cfg::kStages,
                kThreads = Cfg::kThreads, kWStage = Cfg::kWStage,
                kStageBytes = Cfg::kStageBytes;
  extern __shared__ __align__(128) unsigned char smem[];
  const int f0 = static_cast<int>(blockIdx.x) * kTileF;
  const int tid = static_cast<int>(threadIdx.x), warp = tid >> 5,
            lane = tid & 31;
  const uint32_t base = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  auto ws = [&](int s) { return base + s * kStageBytes; };
  auto xs = [&](int s) { return base + s * kStageBytes + kWStage; };
  WaitForPriorGrid();  // the pointer kernel's arrays (a programmatic launch)

  // Where a thread's chunks lie, located once rather than rebuilt from
  // the thread's index every stage (that integer math was nearly half of
  // the main loop's instructions).  A stage is row-major 16-byte chunks (W's: NN 64
  // K rows of kTileF / 8 chunks of features, NT kTileF feature rows of 8
  // chunks of K; the rows': kTok rows of 8 chunks of K), of which thread
  // tid copies chunks tid + i kThreads: the same column for every i, and
  // rows a row step apart, a multiple of 8, so the same swizzle (Swz: the
  // row's low 3 bits) and shared offsets a row step's bytes apart.  Here,
  // the shared offsets (the thread's alone); per work item, chunk 0's
  // global address and the bounds that do not move with K; a stage adds
  // its K and checks K's bound.
  constexpr int kWRowChunks = kTransB ? kBK / 8 : kTileF / 8;
  constexpr int kWRowBytes = kWRowChunks * 16;
  constexpr int kWChunks = kBK * kTileF / 8 / kThreads;  // a thread's, a stage
  constexpr int kWRowStep = kThreads / kWRowChunks;      // rows
  constexpr int kXChunks = kTok * kBK / 8 / kThreads;
  constexpr int kXRowStep = kThreads / 8;
  static_assert(kThreads % kWRowChunks == 0 && kWRowStep % 8 == 0 &&
                    kXRowStep % 8 == 0,
                "a thread's chunks of a stage: one column, rows 8 k apart");
  const int w_row = tid / kWRowChunks, w_col = tid % kWRowChunks;
  const int x_row = tid >> 3, x_col = tid & 7;
  const uint32_t w_dst = Held(Swz(w_row, w_col, kWRowBytes));
  const uint32_t x_dst = Held(Swz(x_row, x_col, kBK * 2));
  // The ldmatrix offsets (lane: row j of matrix q).  Every row one reads is
  // j mod 8, so 16 rows on is 16 rows' bytes on under the same swizzle:
  // the offsets hold what moves the column (the rows' stage and NT's W:
  // the K step kk; NN's W: the m16 fragment mf), the loop adds the rest
  // (np, or mf for NT's W, or kk for NN's, times 16 rows).
  uint32_t x_ld[kBK / 16];                // by kk
  uint32_t w_ld[kTransB ? kBK / 16 : 2];  // NT: by kk, NN: by mf
  {
    const int q = lane >> 3, j = lane & 7;
#pragma unroll
    for (int kk = 0; kk < kBK / 16; ++kk)
      x_ld[kk] = Held(Swz((q >> 1) * 8 + j, kk * 2 + (q & 1), kBK * 2));
    if constexpr (kTransB) {  // stage rows are features, K contiguous
#pragma unroll
      for (int kk = 0; kk < kBK / 16; ++kk)
        w_ld[kk] = Held(
            Swz(warp * 32 + (q & 1) * 8 + j, kk * 2 + (q >> 1), kBK * 2));
    } else {  // stage rows are K: transposed by ldmatrix
#pragma unroll
      for (int mf = 0; mf < 2; ++mf)
        w_ld[mf] = Held(Swz((q >> 1) * 8 + j, warp * 4 + mf * 2 + (q & 1),
                            kTileF * 2));
    }
  }

  for (int64_t w = blockIdx.y;; w += gridDim.y) {
    int t, chunk;
    FindWork<kThreads>(P, w, &t, &chunk);
    if (t < 0) return;  // past the last work item (CTA-uniform)
    const int m = P.shapes[3 * t], n = P.shapes[3 * t + 1],
              k = P.shapes[3 * t + 2];
    if (f0 >= n) continue;  // a narrower item (CTA-uniform)
    const int row0 = chunk * kTok;
    const int toks = min(kTok, m - row0);
    const int frags = (toks + 7) / 8;       // n8 fragments with a row
    const int rows_read = (frags + 1) / 2 * 16;  // the x4 ldmatrix pairs
    const T* A = static_cast<const T*>(P.ptr_a[t]) + row0 * P.stride_a[t];
    const T* B = static_cast<const T*>(P.ptr_b[t]);
    TOut* D = static_cast<TOut*>(P.ptr_d[t]) + row0 * P.stride_d[t];
    const int64_t lda = P.stride_a[t], ldb = P.stride_b[t],
                  ldd = P.stride_d[t];
    const int k_tiles = (k + kBK - 1) / kBK;

    // The thread's chunk 0 of K tile 0 (chunk i is i row steps on), and
    // its bounds as what is left past chunk 0's row or column: chunk i of
    // K tile kt (k0 = kt kBK) is inside k, n or the chunk's rows where
    // its offset from chunk 0, i row steps along the rows or k0 along K,
    // is below what is left.  NN: W's rows run along K, its column is 8
    // features; NT: W's rows are features, its column 8 K.
    const T* const w_src =
        kTransB ? B + static_cast<int64_t>(f0 + w_row) * ldb + w_col * 8
                : B + static_cast<int64_t>(w_row) * ldb + f0 + w_col * 8;
    const int64_t w_step = kWRowStep * ldb;
    const int w_k_left = kTransB ? k - w_col * 8 : k - w_row;
    const int w_n_left = kTransB ? n - f0 - w_row : n - f0 - w_col * 8;
    const T* const x_src = A + static_cast<int64_t>(x_row) * lda + x_col * 8;
    const int64_t x_step = kXRowStep * lda;
    const int x_k_left = k - x_col * 8;
    const int x_rows_left = toks - x_row, x_read_left = rows_read - x_row;

    // Stage s of K tile kt: W's 64 K x 128 features (8 chunks of 16 bytes
    // a thread), the chunk's rows x 64 K (up to 4 a thread: the rows the
    // ldmatrix pairs reach, zeros past the chunk's rows).
    auto load = [&](int kt, int s) {
      const int k0 = kt * kBK;
      const int k_left = w_k_left - k0;
      const T* src = kTransB ? w_src + k0
                             : w_src + static_cast<int64_t>(k0) * ldb;
#pragma unroll
      for (int i = 0; i < kWChunks; ++i, src += w_step) {
        const bool ok = kTransB
                            ? i * kWRowStep < w_n_left && 0 < k_left
                            : i * kWRowStep < k_left && 0 < w_n_left;
        CpAsync16(ws(s) + w_dst + i * kWRowStep * kWRowBytes, ok ? src : B,
                  ok);
      }
      src = x_src + k0;
#pragma unroll
      for (int i = 0; i < kXChunks; ++i, src += x_step) {
        if (i * kXRowStep >= x_read_left) continue;  // a pair no row reaches
        const bool ok = i * kXRowStep < x_rows_left && k0 < x_k_left;
        CpAsync16(xs(s) + x_dst + i * kXRowStep * (kBK * 2), ok ? src : A,
                  ok);
      }
    };

    float acc[2][kTok / 8][4];
#pragma unroll
    for (int f = 0; f < 2; ++f)
#pragma unroll
      for (int j = 0; j < kTok / 8; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[f][j][e] = 0.f;
#pragma unroll
    for (int i = 0; i < kStages - 1; ++i) {
      if (i < k_tiles) load(i, i);
      CpAsyncCommit();
    }
    for (int kt = 0; kt < k_tiles; ++kt) {
      CpAsyncWait<kStages - 2>();
      __syncthreads();  // tile kt landed; all are done with tile kt - 1
      if (kt + kStages - 1 < k_tiles)
        load(kt + kStages - 1, (kt + kStages - 1) % kStages);
      CpAsyncCommit();
      const int s = kt % kStages;
#pragma unroll
      for (int kk = 0; kk < kBK / 16; ++kk) {
        // The mma's A (16 features x 16 K, row-major) of the warp's two
        // m16 fragments: matrix q is features + (q % 2) 8, K + (q / 2) 8
        // (a0 .. a3).
        uint32_t af[2][4];
#pragma unroll
        for (int mf = 0; mf < 2; ++mf) {
          if constexpr (kTransB)  // stage rows are features, K contiguous
            Ldsm4(ws(s) + w_ld[kk] + mf * 16 * (kBK * 2), af[mf]);
          else  // stage rows are K: transposed by ldmatrix
            Ldsm4T(ws(s) + w_ld[mf] + kk * 16 * (kTileF * 2), af[mf]);
        }
        // The mma's B (16 K x 8 rows, column-major) from the rows' stage
        // (rows, K): matrix q is rows np 16 + (q / 2) 8, K + (q % 2) 8:
        // b0, b1 of fragment 2 np, then of 2 np + 1.
#pragma unroll
        for (int np = 0; np < kTok / 16; ++np) {
          if (2 * np >= frags) break;  // CTA-uniform
          uint32_t bf[4];
          Ldsm4(xs(s) + x_ld[kk] + np * 16 * (kBK * 2), bf);
#pragma unroll
          for (int mf = 0; mf < 2; ++mf) {
            Mma<T>(acc[mf][2 * np], af[mf], bf[0], bf[1]);
            if (2 * np + 1 < frags)
              Mma<T>(acc[mf][2 * np + 1], af[mf], bf[2], bf[3]);
          }
        }
      }
    }
    CpAsyncWait<0>();
    __syncthreads();  // the pipeline's memory becomes the output tile

    // acc[mf][nf]: c0, c1 at (feature fw + lane / 4, rows nf 8 +
    // (lane % 4) 2 + 0, 1), c2, c3 at feature + 8.  Staged as (row,
    // feature), then 16-byte chunks of D's rows (swiglu: 8-byte ones of 4
    // of D's columns, from 8 features).
    using TStage = StageOf<TOut, kSwiglu>;
    constexpr int ld = Cfg::template kOutLd<TStage>;
    TStage* tile = reinterpret_cast<TStage*>(smem);
#pragma unroll
    for (int mf = 0; mf < 2; ++mf)
#pragma unroll
      for (int nf = 0; nf < kTok / 8; ++nf) {
        if (nf >= frags) break;  // CTA-uniform
        const int f = warp * 32 + mf * 16 + (lane >> 2);
        const int r = nf * 8 + (lane & 3) * 2;
        tile[r * ld + f] = Cast<TStage>(P.alpha * acc[mf][nf][0]);
        tile[(r + 1) * ld + f] = Cast<TStage>(P.alpha * acc[mf][nf][1]);
        tile[r * ld + f + 8] = Cast<TStage>(P.alpha * acc[mf][nf][2]);
        tile[(r + 1) * ld + f + 8] = Cast<TStage>(P.alpha * acc[mf][nf][3]);
      }
    __syncthreads();
    if constexpr (kSwiglu) {
      // D's columns f0 / 2 + c .. + 3 from h's f0 + 2 c .. + 7: gate, up
      // pairs; inside n_t wholly or not at all (n_t a multiple of 8).
      constexpr int kQuads = kTileF / 8;  // a row's 4-column groups of D
      for (int i = tid; i < toks * kQuads; i += kThreads) {
        const int r = i / kQuads, c = (i % kQuads) * 4;
        if (f0 + 2 * c >= n) continue;
        const float4 lo = *reinterpret_cast<const float4*>(&tile[r * ld + 2 * c]);
        const float4 hi =
            *reinterpret_cast<const float4*>(&tile[r * ld + 2 * c + 4]);
        const auto glu = [](float g, float u) {
          return g / (1.f + __expf(-g)) * u;  // as Sm90GluEpilogueArray
        };
        alignas(8) TOut o[4] = {Cast<TOut>(glu(lo.x, lo.y)),
                                Cast<TOut>(glu(lo.z, lo.w)),
                                Cast<TOut>(glu(hi.x, hi.y)),
                                Cast<TOut>(glu(hi.z, hi.w))};
        *reinterpret_cast<uint2*>(D + r * ldd + f0 / 2 + c) =
            *reinterpret_cast<const uint2*>(o);
      }
    } else {
      constexpr int kPer16 = 16 / static_cast<int>(sizeof(TOut));  // a chunk
      constexpr int kChunks = kTileF / kPer16;                     // a row
      for (int i = tid; i < toks * kChunks; i += kThreads) {
        const int r = i / kChunks, c = (i % kChunks) * kPer16;
        if (f0 + c < n)  // n a multiple of 8: whole chunks
          *reinterpret_cast<uint4*>(D + r * ldd + f0 + c) =
              *reinterpret_cast<const uint4*>(&tile[r * ld + c]);
      }
    }
    __syncthreads();  // the tile is read before the next item's loads
  }
}

// The shared memory above 48 KiB needs opting in, once per device (as for
// the skinny kernel).
template <typename Cfg, typename T, typename TOut, bool kTransB, bool kSwiglu>
cudaError_t PrepareOnce(int device) {
  return OncePerDevice(device, [] {
    const void* fn = reinterpret_cast<const void*>(
        &SmallGroupFwdKernel<Cfg, T, TOut, kTransB, kSwiglu>);
    cudaError_t e = cudaFuncSetAttribute(
        fn, cudaFuncAttributeMaxDynamicSharedMemorySize,
        Cfg::template kSmemBytes<StageOf<TOut, kSwiglu>>);
    // The whole carveout as shared memory, so that two CTAs fit an SM (the
    // driver may otherwise size it for one).
    if (e == cudaSuccess)
      e = cudaFuncSetAttribute(fn,
                               cudaFuncAttributePreferredSharedMemoryCarveout,
                               cudaSharedmemCarveoutMaxShared);
    return e;
  });
}

inline size_t Workspace(const GroupedLaunch&) { return 0; }

// The grid's y: the bound on the work items where the items' rows add up
// to at most m (ragged_dot's), at most 65535 (the CTAs loop past it).
inline int64_t WorkBound(int64_t groups, int64_t m) {
  const int64_t bound = groups + (m + kTok - 1) / kTok;
  return bound < 65535 ? bound : 65535;
}

// Makes the launch Run makes, without launching it (kernels/launch.h
// PreparedLaunch): its parameters hold only the workspace's arrays, so
// the handler's runner keeps it for every call on the same workspace.
template <typename T, typename TOut, bool kTransB, bool kSwiglu = false,
          typename Cfg = Shipped>
std::string Prepare(const GroupedLaunch& l, PreparedLaunch* out) {
  constexpr int kTileF = Cfg::kTileF;
  static_assert(sizeof(Params) <= kMaxParamBytes,
                "the kernel's parameter must fit a PreparedLaunch");
  if (l.groups < 1 || l.m < 1 || l.n < 1)
    return "small-group forward kernel: bad groups, m or n";
  const int64_t tiles_f = (int64_t{l.n} + kTileF - 1) / kTileF;
  if (tiles_f > 0x7fffffff)
    return "small-group forward kernel: more than 2^31 - 1 feature blocks";
  if (cudaError_t e = PrepareOnce<Cfg, T, TOut, kTransB, kSwiglu>(l.device);
      e != cudaSuccess)
    return std::string("small-group forward kernel: cudaFuncSetAttribute: ") +
           cudaGetErrorString(e);
  const Params p = GroupedArraysOf(l);
  out->fn = reinterpret_cast<const void*>(
      &SmallGroupFwdKernel<Cfg, T, TOut, kTransB, kSwiglu>);
  out->grid = dim3(static_cast<unsigned>(tiles_f),
                   static_cast<unsigned>(WorkBound(l.groups, l.m)));
  out->block = dim3(Cfg::kThreads);
  out->cluster = dim3(1, 1, 1);
  out->smem = Cfg::template kSmemBytes<StageOf<TOut, kSwiglu>>;
  out->programmatic = true;  // WaitForPriorGrid before any global access
  out->param_bytes = sizeof(Params);
  std::memcpy(out->params, &p, sizeof(Params));
  return "";
}

// Prepare and launch at once (the probe, and the entry's `run`).
template <typename T, typename TOut, bool kTransB, bool kSwiglu = false,
          typename Cfg = Shipped>
std::string Run(const GroupedLaunch& l) {
  PreparedLaunch ready;
  if (std::string r = Prepare<T, TOut, kTransB, kSwiglu, Cfg>(l, &ready);
      !r.empty())
    return r;
  const std::string r = LaunchPrepared(ready, l.stream);
  return r.empty() ? "" : "small-group forward kernel: " + r;
}

}  // namespace small_group_fwd
}  // namespace kernels
}  // namespace jax_dynoff

// One instantiation, B transposed (NT) or not (NN):
//   JAX_DYNOFF_SM90_SMALL_GROUP_FWD_KERNEL(kSm90SmallGroupFwdBf16NN,
//                                          __nv_bfloat16, __nv_bfloat16,
//                                          false)
#define JAX_DYNOFF_SM90_SMALL_GROUP_FWD_KERNEL(NAME, IN, OUT, TRANS_B)     \
  namespace jax_dynoff {                                                   \
  namespace kernels {                                                      \
  extern const GroupedKernelEntry NAME = {                                 \
      #NAME, &small_group_fwd::Workspace,                                  \
      &small_group_fwd::Run<IN, OUT, TRANS_B>,                             \
      &small_group_fwd::Prepare<IN, OUT, TRANS_B>};                        \
  }                                                                        \
  }

// With the swiglu epilogue (NN, D of the input's dtype):
//   JAX_DYNOFF_SM90_SMALL_GROUP_FWD_SWIGLU_KERNEL(
//       kSm90SmallGroupFwdSwigluBf16NN, __nv_bfloat16, __nv_bfloat16)
#define JAX_DYNOFF_SM90_SMALL_GROUP_FWD_SWIGLU_KERNEL(NAME, IN, OUT)       \
  namespace jax_dynoff {                                                   \
  namespace kernels {                                                      \
  extern const GroupedKernelEntry NAME = {                                 \
      #NAME, &small_group_fwd::Workspace,                                  \
      &small_group_fwd::Run<IN, OUT, false, true>,                         \
      &small_group_fwd::Prepare<IN, OUT, false, true>};                    \
  }                                                                        \
  }

#endif  // JAX_DYNOFF_KERNELS_SMALL_GROUP_FWD_H_
