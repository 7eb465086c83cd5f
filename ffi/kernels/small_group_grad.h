// The small-group weight-gradient kernel: for every item t of a grouped
// call with A transposed (the dW shape of jax_dynoff.ragged_dot's gradient,
// dW[e] = X_e^T @ G_e, the contraction over expert e's rows, a ragged K),
//   D_t = cast(alpha * A_t^T @ B_t)      (float32 accumulation)
// where A_t is k_t x m_t (row-major, ld lda_t: the expert's rows of X),
// B_t is k_t x n_t (row-major, ld ldb_t: its rows of the cotangent) and D_t
// m_t x n_t (row-major, ld ldd_t).  The shapes, addresses and strides are
// the grouped path's: the grouped pointer kernel writes them into the
// workspace (kernels/launch.h GroupedLaunch, plan.h GroupedItemOf), so
// every window rule of the grouped path holds here unchanged.
//
// Why: with a few rows per expert (decode-sized MoE layers) the gradient
// is m x n per expert of output for k x (m + n) of input, so its time is
// the writes.  The grouped CUTLASS kernel runs one 64-deep k-block and a
// 32 KB epilogue per 128 x 128 tile there, and an expert without rows was
// zeroed apart by the pointer kernel.  This kernel: one CTA per 128 x 128
// output tile of D_t, the item's rows 16 at a time through a two-stage
// cp.async pipeline into mma.sync m16n8k16 (A^T and B read with
// ldmatrix.trans), the tile staged through shared memory and written with
// 16-byte stores; an item without rows (k_t = 0) writes its zeros in the
// same launch (GroupedItemOf keeps its m and n for this tile, so the
// pointer kernel writes none).  benchmarks/small_k_grad/probe.cu runs it
// alone; on an H100 it reached 0.85-0.97 of a write-only kernel's time on
// decode layers, 0.24-0.41 on groups of hundreds of rows, where the
// CUTLASS kernel stays (plan.h kSmallGroupMaxMeanRows).
//
// Alignment (the grouped path's rules, planner_rules.cc): every address,
// leading dimension and m_t, n_t a multiple of 16 bytes of the input dtype
// (8 elements), so that a 16-byte chunk of a row lies wholly inside or
// outside the item; loads past k_t, m_t or n_t are zero-filled, stores
// stop at m_t and n_t: elements outside D_t are never written.  D of the
// input's dtype or float32.  mma.sync and cp.async only (sm_80 ISA), built
// with the sm_90a kernels: the grouped path runs on sm_90 only.
#ifndef JAX_DYNOFF_KERNELS_SMALL_GROUP_GRAD_H_
#define JAX_DYNOFF_KERNELS_SMALL_GROUP_GRAD_H_

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
#include "plan.h"                 // kSmallGroupTileM, kSmallGroupTileN

namespace jax_dynoff {
namespace kernels {
namespace small_group_grad {

constexpr int kTileM = kSmallGroupTileM;  // D's rows a CTA (A's columns)
constexpr int kTileN = kSmallGroupTileN;  // D's columns a CTA
constexpr int kRows = 16;                 // the item's rows a pipeline step
constexpr int kThreads = 256;             // 8 warps: 4 (M) x 2 (N)
static_assert(kTileM == 128 && kTileN == 128,
              "the warp layout covers 128 x 128: 4 x 2 warps of 32 x 64");
constexpr int kStageBytes = kRows * kTileM * 2 + kRows * kTileN * 2;

// The staged output tile's row, in elements: 8 of padding, 16 bytes for a
// 16-bit D (one warp's 4-byte pair stores hit 32 distinct banks), 32 for
// float32 (each half-warp's float2 stores do).
constexpr int kOutLd = kTileN + 8;
template <typename TOut>
constexpr int kSmemBytes =
    kTileM * kOutLd * static_cast<int>(sizeof(TOut)) > 2 * kStageBytes
        ? kTileM * kOutLd * static_cast<int>(sizeof(TOut))
        : 2 * kStageBytes;

// The kernel's parameter: GroupedLaunch's device arrays and alpha, and the
// column tiles of the largest item (the static bound of every item's n).
struct Params : GroupedArrays {
  int tiles_n = 0;
};

using skinny::CpAsync16;
using skinny::CpAsyncCommit;
using skinny::CpAsyncWait;
using skinny::Ldsm4T;
using skinny::Mma;

// A stage row holds 16 chunks of 16 bytes (128 elements), swizzled as the
// skinny kernel's: the 8 rows one ldmatrix reads hit 8 bank groups.
__device__ __forceinline__ uint32_t Swz(int row, int chunk) {
  return skinny::Swz(row, chunk, kTileM * 2);
}

template <typename TOut>
__device__ __forceinline__ void StorePair(TOut* p, float x, float y) {
  if constexpr (std::is_same_v<TOut, float>) {
    *reinterpret_cast<float2*>(p) = make_float2(x, y);
  } else if constexpr (std::is_same_v<TOut, __nv_bfloat16>) {
    *reinterpret_cast<__nv_bfloat162*>(p) = __floats2bfloat162_rn(x, y);
  } else {
    *reinterpret_cast<__half2*>(p) = __floats2half2_rn(x, y);
  }
}

// grid: x over the output tiles of the largest item (tile row-major),
// y over the items (a CTA takes items y, y + gridDim.y, ...).
template <typename T, typename TOut>
__global__ void __launch_bounds__(kThreads)
    SmallGroupGradKernel(const __grid_constant__ Params P) {
  extern __shared__ __align__(128) unsigned char smem[];
  const int m0 = static_cast<int>(blockIdx.x) / P.tiles_n * kTileM;
  const int n0 = static_cast<int>(blockIdx.x) % P.tiles_n * kTileN;
  const int tid = static_cast<int>(threadIdx.x), warp = tid >> 5,
            lane = tid & 31;
  const int wm = warp >> 1, wn = warp & 1;  // warp tile: 32 (M) x 64 (N)
  const uint32_t base = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  auto as = [&](int s) { return base + s * kStageBytes; };
  auto bs = [&](int s) { return base + s * kStageBytes + kRows * kTileM * 2; };
  WaitForPriorGrid();  // the pointer kernel's arrays (a programmatic launch)

  for (int t = static_cast<int>(blockIdx.y); t < P.groups;
       t += static_cast<int>(gridDim.y)) {
    const int m = P.shapes[3 * t], n = P.shapes[3 * t + 1],
              rows = P.shapes[3 * t + 2];
    if (m0 >= m || n0 >= n) continue;  // the whole CTA: no barrier skipped
    const T* A = static_cast<const T*>(P.ptr_a[t]);
    const T* B = static_cast<const T*>(P.ptr_b[t]);
    TOut* D = static_cast<TOut*>(P.ptr_d[t]);
    const int64_t lda = P.stride_a[t], ldb = P.stride_b[t],
                  ldd = P.stride_d[t];

    // Step s: rows [16 s, 16 s + 16) of the item: one 16-byte chunk of A
    // and one of B per thread (16 rows x 16 chunks each), zeros past the
    // item's rows and past m and n (multiples of 8: whole chunks).
    auto load = [&](int step, int stage) {
      const int r = tid >> 4, c = tid & 15, row = step * kRows + r;
      const bool in = row < rows;
      const int mm = m0 + c * 8, nn = n0 + c * 8;
      const bool av = in && mm < m, bv = in && nn < n;
      CpAsync16(as(stage) + Swz(r, c), av ? A + row * lda + mm : A, av);
      CpAsync16(bs(stage) + Swz(r, c), bv ? B + row * ldb + nn : B, bv);
    };

    float acc[2][8][4];
#pragma unroll
    for (int f = 0; f < 2; ++f)
#pragma unroll
      for (int j = 0; j < 8; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[f][j][e] = 0.f;
    const int steps = (rows + kRows - 1) / kRows;
    if (steps > 0) load(0, 0);
    CpAsyncCommit();
    for (int s = 0; s < steps; ++s) {
      if (s + 1 < steps) load(s + 1, (s + 1) & 1);
      CpAsyncCommit();
      CpAsyncWait<1>();
      __syncthreads();
      const int st = s & 1;
      const int q = lane >> 3, j = lane & 7;
      // op(A) = A^T (i along m, r along the rows): 8x8 blocks of the stage
      // (rows r, columns i), transposed by ldmatrix: matrix q holds
      // (i + (q % 2) 8, r + (q / 2) 8).
      uint32_t af[2][4];
#pragma unroll
      for (int f = 0; f < 2; ++f) {
        const int i0 = wm * 32 + f * 16;
        Ldsm4T(as(st) + Swz((q >> 1) * 8 + j, (i0 >> 3) + (q & 1)), af[f]);
      }
      // B (r along the rows, columns n): matrix q holds
      // (r + (q % 2) 8, n + (q / 2) 8): b0, b1 of two n8 fragments.
#pragma unroll
      for (int p = 0; p < 4; ++p) {
        const int j0 = wn * 64 + p * 16;
        uint32_t bf[4];
        Ldsm4T(bs(st) + Swz((q & 1) * 8 + j, (j0 >> 3) + (q >> 1)), bf);
#pragma unroll
        for (int f = 0; f < 2; ++f) {
          Mma<T>(acc[f][2 * p], af[f], bf[0], bf[1]);
          Mma<T>(acc[f][2 * p + 1], af[f], bf[2], bf[3]);
        }
      }
      __syncthreads();  // the stage is free for step s + 2
    }
    CpAsyncWait<0>();
    __syncthreads();

    // The tile through shared memory, then 16-byte chunks of D's rows.
    constexpr int ld = kOutLd;
    TOut* out = reinterpret_cast<TOut*>(smem);
#pragma unroll
    for (int f = 0; f < 2; ++f)
#pragma unroll
      for (int jj = 0; jj < 8; ++jj) {
        const int row = wm * 32 + f * 16 + (lane >> 2);
        const int col = wn * 64 + jj * 8 + (lane & 3) * 2;
        StorePair(&out[row * ld + col], P.alpha * acc[f][jj][0],
                     P.alpha * acc[f][jj][1]);
        StorePair(&out[(row + 8) * ld + col], P.alpha * acc[f][jj][2],
                     P.alpha * acc[f][jj][3]);
      }
    __syncthreads();
    constexpr int kPer = 16 / static_cast<int>(sizeof(TOut));  // a chunk
    constexpr int kChunks = kTileN / kPer;                     // a row
    for (int i = tid; i < kTileM * kChunks; i += kThreads) {
      const int row = i / kChunks, c = (i % kChunks) * kPer;
      if (m0 + row < m && n0 + c < n)  // n a multiple of 8: whole chunks
        *reinterpret_cast<uint4*>(D + int64_t{m0 + row} * ldd + n0 + c) =
            *reinterpret_cast<const uint4*>(&out[row * ld + c]);
    }
    __syncthreads();  // the staged tile is read before the next item loads
  }
}

// The shared memory above 48 KiB needs opting in, once per device (as for
// the skinny kernel).
template <typename T, typename TOut>
cudaError_t PrepareOnce(int device) {
  return OncePerDevice(device, [] {
    return cudaFuncSetAttribute(
        reinterpret_cast<const void*>(&SmallGroupGradKernel<T, TOut>),
        cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes<TOut>);
  });
}

inline size_t Workspace(const GroupedLaunch&) { return 0; }

// Makes the launch Run makes, without launching it (kernels/launch.h
// PreparedLaunch): its parameters hold only the workspace's arrays, so
// the handler's runner keeps it for every call on the same workspace.
template <typename T, typename TOut>
std::string Prepare(const GroupedLaunch& l, PreparedLaunch* out) {
  static_assert(sizeof(Params) <= kMaxParamBytes,
                "the kernel's parameter must fit a PreparedLaunch");
  if (l.groups < 1 || l.m < 1 || l.n < 1)
    return "small-group weight-gradient kernel: bad groups, m or n";
  const int64_t tiles_m = (int64_t{l.m} + kTileM - 1) / kTileM;
  const int64_t tiles_n = (int64_t{l.n} + kTileN - 1) / kTileN;
  if (tiles_m * tiles_n > 0x7fffffff)
    return "small-group weight-gradient kernel: more than 2^31 - 1 tiles";
  if (cudaError_t e = PrepareOnce<T, TOut>(l.device); e != cudaSuccess)
    return std::string("small-group weight-gradient kernel: "
                       "cudaFuncSetAttribute: ") +
           cudaGetErrorString(e);
  Params p;
  static_cast<GroupedArrays&>(p) = GroupedArraysOf(l);
  p.tiles_n = static_cast<int>(tiles_n);
  out->fn = reinterpret_cast<const void*>(&SmallGroupGradKernel<T, TOut>);
  out->grid = dim3(static_cast<unsigned>(tiles_m * tiles_n),
                   static_cast<unsigned>(l.groups < 65535 ? l.groups : 65535));
  out->block = dim3(kThreads);
  out->cluster = dim3(1, 1, 1);
  out->smem = kSmemBytes<TOut>;
  out->programmatic = true;  // WaitForPriorGrid before any global access
  out->param_bytes = sizeof(Params);
  std::memcpy(out->params, &p, sizeof(Params));
  return "";
}

// Prepare and launch at once (the probe, and the entry's `run`).
template <typename T, typename TOut>
std::string Run(const GroupedLaunch& l) {
  PreparedLaunch ready;
  if (std::string r = Prepare<T, TOut>(l, &ready); !r.empty()) return r;
  const std::string r = LaunchPrepared(ready, l.stream);
  return r.empty() ? "" : "small-group weight-gradient kernel: " + r;
}

}  // namespace small_group_grad
}  // namespace kernels
}  // namespace jax_dynoff

// One instantiation:
//   JAX_DYNOFF_SM90_SMALL_GROUP_GRAD_KERNEL(kSm90SmallGroupGradBf16TN,
//                                           __nv_bfloat16, __nv_bfloat16)
#define JAX_DYNOFF_SM90_SMALL_GROUP_GRAD_KERNEL(NAME, IN, OUT)             \
  namespace jax_dynoff {                                                   \
  namespace kernels {                                                      \
  extern const GroupedKernelEntry NAME = {                                 \
      #NAME, &small_group_grad::Workspace,                                 \
      &small_group_grad::Run<IN, OUT>,                                     \
      &small_group_grad::Prepare<IN, OUT>};                                \
  }                                                                        \
  }

#endif  // JAX_DYNOFF_KERNELS_SMALL_GROUP_GRAD_H_
