// The skinny kernel's narrow tile: D = cast(alpha * A @ B + beta * C) for
// m <= 16, each CTA owning 16 output columns over the whole of K, its 8
// warps splitting every K stage among themselves and adding their partials
// through shared memory at the end.  No cluster, no split of K across
// CTAs, no workspace: one launch whose CTAs never wait for each other.
//
// Why beside the wide tile (kernels/sm90_skinny.h: 128 columns a CTA, K
// split across a cluster): where K is short the wide tile's cluster
// reduction is most of the call.  At K = 512 it splits K over a cluster of
// 4, two 64-deep stages a CTA, and this tile is about 1 us (20%) faster
// with the loop's counter on an H100: 3.72 against 4.73 us at 8x512x512,
// 4.53 against 5.51 at 8x4096x512, hot or cold
// (benchmarks/results/2026-12-06-h100-eecdbf4/narrow.txt, probe.cu
// --narrow).  In the table loop with body graphs it is faster at every K
// up to 1536, and up to 2048 where n <= 2048, by 4-19%
// (benchmarks/skinny_tiles.py; 2026-12-06-h100-ff27639 and -2be2540).
// Where K is longer the wide tile wins: 16 columns a CTA stream B too
// slowly.  plan.h SkinnyTileChoice holds the rule.
//
// The price: every CTA reads all of A (m x K, small beside its K x 16 of
// B where m <= 16).  B is row-major k x n (NN) or, with kTransB, n x k
// with K contiguous (NT: x @ W^T).  A's loads and NT's are 16-byte
// cp.async, zero-filled past K and ignored past m and n; NN's B stages
// come by TMA from a descriptor over B's whole buffer (below: its rows
// are 32 bytes), rows past K zeroed in shared memory; the epilogue reads C and
// writes D in whole 8-column chunks (two float4 for a float32 D, the
// second only inside the width), so the plan's alignment proof (16-byte
// addresses, leading dimensions and widths) is what it relies on, as the
// wide tile does.  Elements outside D's window are never written.
#ifndef JAX_DYNOFF_KERNELS_SM90_SKINNY_NARROW_H_
#define JAX_DYNOFF_KERNELS_SM90_SKINNY_NARROW_H_

#include <cuda.h>  // CUtensorMap and its enums (no driver call linked)
#include <cudaTypedefs.h>  // PFN_cuTensorMapEncodeTiled
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>

#include "kernels/launch.h"
#include "kernels/sm90_skinny.h"  // the cp.async, ldmatrix, mma and chunk helpers

namespace jax_dynoff {
namespace kernels {
namespace skinny_narrow {

using skinny::AddChunk;
using skinny::CpAsync16;
using skinny::CpAsyncCommit;
using skinny::CpAsyncWait;
using skinny::Ldsm4;
using skinny::Ldsm4T;
using skinny::LoadChunk;
using skinny::MbarExpectBytes;
using skinny::MbarInit;
using skinny::Mma;
using skinny::StoreChunk;
using skinny::Swz;

constexpr int kTileN = kSkinnyNarrowTileN;  // output columns a CTA
constexpr int kM = 16;                      // one m16 fragment

// A configuration: the K of a stage, the stages and the warps (each takes
// every kWarps-th k16 step of a stage).  benchmarks/skinny/probe.cu times
// others against the shipped one (--slope, --narrow).
template <int kTileK_, int kStages_, int kWarps_>
struct NarrowConfig {
  static constexpr int kTileK = kTileK_, kStages = kStages_,
                       kWarps = kWarps_, kThreads = kWarps_ * 32;
  // A stage: A's 16 rows x kTileK, then B's kTileK x 16 (NN: K rows of 32
  // bytes) or 16 x kTileK (NT: output columns, K contiguous).
  static constexpr int kAStage = kM * kTileK * 2;
  static constexpr int kBStage = kTileK * kTileN * 2;
  static constexpr int kBytes = kStages * (kAStage + kBStage);
  // The warps' partials, after the main loop, over the stages.
  static constexpr int kRedBytes = kWarps * kM * kTileN * 4;
  static_assert(kRedBytes <= kBytes, "the partials fit the stages");
  static_assert(kM * kTileK / 8 % kThreads == 0 &&
                    kTileK * kTileN / 8 % kThreads == 0,
                "every thread loads as many chunks of a stage");
  static_assert(kTileK / 16 % kWarps == 0, "the warps share a stage evenly");
  static_assert(kTileK % 64 == 0, "A's rows swizzle over 8 chunks");
};

// The shipped configuration: 512-deep stages, 3 of them (2 in flight, 32
// KiB of B a CTA), 8 warps.  Against 256-deep stages, 4 of them (3 in
// flight, 24 KiB), the deeper ones take 0.3-0.8 us off a call where K >=
// 1024 and cost 0.1-0.2 at K <= 512 (probe.cu --slope: 8x512x2048 with B
// in L2 5.63 against 6.49 us, 8x2048x2048 5.83 against 6.62; 8x512x256
// 3.75 against 3.58; a 256-deep stage costs about 0.5 us, bound by
// latency).  More warps or 1024-deep stages were no faster.
using ShippedConfig = NarrowConfig<512, 3, 8>;

// NN's B rows are 32 bytes (16 columns): chunk c (of 2) of row r sits at
// c ^ ((r / 4) % 2), so the 8 rows one transposing ldmatrix reads (the
// same logical chunk) fall in 8 different 16-byte bank groups.  This is
// the tensor memory accelerator's 32-byte swizzle (address bit 4 ^= bit 7)
// on a stage that starts 256-byte aligned, so a TMA box of 32-byte rows
// lands in it as the cp.async loads place it.
__device__ __forceinline__ uint32_t SwzB(int row, int chunk) {
  return static_cast<uint32_t>(row * kTileN * 2 +
                               ((chunk ^ ((row >> 2) & 1)) << 4));
}

// NN's B through the tensor memory accelerator.  A cp.async NN stage is
// 512 rows of 32 bytes, one sector of each 128-byte line, and the same
// tile reading 1-KiB rows (NT) is 0.2-1.7 us faster a call (probe.cu
// --launchform, 2026-12-06-h100-f38a9e2): the many short rows bound it.
// One thread's TMA boxes (kBoxK rows of 16 columns) fetch the stage with
// no per-thread requests.  The descriptor covers B's whole buffer as rows
// of b.ld elements, so one descriptor serves every window of the buffer;
// the kernel finds the window's row and column in it on the device.  Rows
// past the window's K inside the buffer are loaded too and zeroed in
// shared memory before they are read (A is zero there, but 0 * inf is
// NaN); columns past its n feed only outputs that are never stored.
constexpr int kBoxK = 256;  // a TMA box dimension is at most 256

// The kernel's parameter: the launch, and with kTmaB B's descriptor
// first (64-byte aligned, as TMA requires).
template <bool kTmaB>
struct NarrowParams {
  SkinnyLaunch l;
};
template <>
struct NarrowParams<true> {
  CUtensorMap b_map;
  SkinnyLaunch l;
};

__device__ __forceinline__ void MbarWaitParity(uint32_t bar, uint32_t parity) {
  uint32_t done = 0;
  while (!done)
    asm volatile(
        "{\n .reg .pred p;\n"
        " mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
        " selp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(bar), "r"(parity)
        : "memory");
}

// A TMA box of `map` at (column c0, row c1) into shared memory at `dst`,
// its bytes counted on the mbarrier `bar`.
__device__ __forceinline__ void TmaLoad2d(uint32_t dst, const CUtensorMap* map,
                                          int c0, int c1, uint32_t bar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::"
      "complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(bar)
      : "memory");
}

template <typename T, bool kTransB, typename TOut, typename Cfg, bool kTmaB>
__global__ void __launch_bounds__(Cfg::kThreads)
    NarrowKernel(const __grid_constant__ NarrowParams<kTmaB> P) {
  static_assert(!(kTmaB && kTransB), "TMA loads NN's 32-byte rows only");
  static_assert(!kTmaB || Cfg::kTileK % kBoxK == 0, "a stage is whole boxes");
  constexpr int kTileK = Cfg::kTileK, kStages = Cfg::kStages,
                kWarps = Cfg::kWarps, kThreads = Cfg::kThreads;
  // 1024: the stages start 256-byte aligned (the 32-byte swizzle).
  extern __shared__ __align__(1024) unsigned char smem[];
  const SkinnyLaunch& L = P.l;
  const int n0 = static_cast<int>(blockIdx.x) * kTileN;
  const T* A = reinterpret_cast<const T*>(L.a.Locate());
  const int64_t lda = L.a.ld, ldb = L.b.ld;
  const int tiles = (L.k + kTileK - 1) / kTileK;
  const int tid = static_cast<int>(threadIdx.x), warp = tid >> 5,
            lane = tid & 31;
  const uint32_t base = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  auto a_stage = [&](int s) { return base + s * Cfg::kAStage; };
  auto b_stage = [&](int s) {
    return base + kStages * Cfg::kAStage + s * Cfg::kBStage;
  };
  // kTmaB: stage s's B is counted on the mbarrier after the stages.
  auto b_full = [&](int s) { return base + Cfg::kBytes + 8 * s; };

  // kTmaB: the window's first row and column in B's buffer (thread 0's).
  int b_row = 0, b_col = 0;
  const T* B = nullptr;
  if constexpr (kTmaB) {
    if (tid == 0) {
      const int64_t off = L.b.Locate() - L.b_buffer,
                    pitch = ldb * static_cast<int64_t>(sizeof(T));
      b_row = static_cast<int>(off / pitch);
      b_col = static_cast<int>(off % pitch / static_cast<int64_t>(sizeof(T)));
#pragma unroll
      for (int s = 0; s < kStages; ++s) MbarInit(b_full(s));
    }
    __syncthreads();  // the barriers, initialised, before anyone waits
  } else {
    B = reinterpret_cast<const T*>(L.b.Locate());
  }

  auto load = [&](int t, int s) {
    const int k0 = t * kTileK;
    constexpr int kChunksA = kM * kTileK / 8;
#pragma unroll
    for (int i = 0; i < kChunksA / kThreads; ++i) {
      const int q = tid + i * kThreads, row = q / (kTileK / 8),
                c = q % (kTileK / 8), kk = k0 + c * 8;
      const bool ok = row < L.m && kk < L.k;
      CpAsync16(a_stage(s) + Swz(row, c, kTileK * 2),
                ok ? A + row * lda + kk : A, ok);
    }
    if constexpr (kTmaB) {
      if (tid == 0) {  // the boxes that hold rows of the window
        const int boxes = min(kTileK, L.k - k0 + kBoxK - 1) / kBoxK;
        MbarExpectBytes(b_full(s), boxes * kBoxK * kTileN * 2);
        for (int h = 0; h < boxes; ++h)
          TmaLoad2d(b_stage(s) + h * kBoxK * kTileN * 2, &P.b_map, b_col + n0,
                    b_row + k0 + h * kBoxK, b_full(s));
      }
      return;
    } else {
      constexpr int kChunksB = kTileK * kTileN / 8;
#pragma unroll
      for (int i = 0; i < kChunksB / kThreads; ++i) {
        const int q = tid + i * kThreads;
        if constexpr (kTransB) {  // 16 rows (columns of D) x 32 K chunks
          const int row = q / (kTileK / 8), c = q % (kTileK / 8);
          const int kk = k0 + c * 8, col = n0 + row;
          const bool ok = kk < L.k && col < L.n;
          CpAsync16(b_stage(s) + Swz(row, c, kTileK * 2),
                    ok ? B + col * ldb + kk : B, ok);
        } else {  // kTileK rows (K) x 2 column chunks
          const int row = q >> 1, c = q & 1;
          const int kk = k0 + row, col = n0 + c * 8;
          const bool ok = kk < L.k && col < L.n;
          CpAsync16(b_stage(s) + SwzB(row, c), ok ? B + kk * ldb + col : B,
                    ok);
        }
      }
    }
  };

  float acc[kTileN / 8][4];
#pragma unroll
  for (int j = 0; j < kTileN / 8; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) acc[j][e] = 0.f;

#pragma unroll
  for (int i = 0; i < kStages - 1; ++i) {
    if (i < tiles) load(i, i);
    CpAsyncCommit();
  }
  // ldmatrix: lane l addresses row l % 8 of 8x8 matrix l / 8.
  const int mrow = ((lane >> 3) & 1) * 8 + (lane & 7), half = lane >> 4;
  for (int i = 0; i < tiles; ++i) {
    const int s = i % kStages;
    CpAsyncWait<kStages - 2>();
    if constexpr (kTmaB) {
      MbarWaitParity(b_full(s), (i / kStages) & 1);
      // The last stage's rows past K: zeros, not the buffer's next rows.
      const int valid = L.k - i * kTileK;
      for (int q = tid; q < (kTileK - valid) * 2; q += kThreads)
        asm volatile("st.shared.v4.u32 [%0], {%1, %1, %1, %1};\n" ::"r"(
                         b_stage(s) + (valid * 2 + q) * 16),
                     "r"(0)
                     : "memory");
    }
    __syncthreads();  // tile i landed; everyone is done with tile i - 1
    if (i + kStages - 1 < tiles)
      load(i + kStages - 1, (i + kStages - 1) % kStages);
    CpAsyncCommit();
#pragma unroll
    for (int kk = warp; kk < kTileK / 16; kk += kWarps) {
      uint32_t af[4];
      Ldsm4(a_stage(s) + Swz(mrow, kk * 2 + half, kTileK * 2), af);
      uint32_t bf[4];  // k 0-7 / 8-15 of columns 0..7, then 8..15
      if constexpr (kTransB)
        Ldsm4(b_stage(s) + Swz(half * 8 + (lane & 7),
                               kk * 2 + ((lane >> 3) & 1), kTileK * 2),
              bf);
      else
        Ldsm4T(b_stage(s) + SwzB(kk * 16 + mrow, half), bf);
      Mma<T>(acc[0], af, bf[0], bf[1]);
      Mma<T>(acc[1], af, bf[2], bf[3]);
    }
  }
  CpAsyncWait<0>();
  __syncthreads();  // every warp is done with the stages: the partials go there

  // red[warp][row][col]: kWarps x 16 x 16 floats.
  float* red = reinterpret_cast<float*>(smem);
#pragma unroll
  for (int j = 0; j < kTileN / 8; ++j) {
    const int row = lane >> 2, col = j * 8 + (lane & 3) * 2;
    float* p = red + (warp * kM + row) * kTileN + col;
    *reinterpret_cast<float2*>(p) = make_float2(acc[j][0], acc[j][1]);
    *reinterpret_cast<float2*>(p + 8 * kTileN) =
        make_float2(acc[j][2], acc[j][3]);
  }
  TOut* D = reinterpret_cast<TOut*>(const_cast<char*>(L.d.Locate()));
  const TOut* C = L.beta != 0.f
                      ? reinterpret_cast<const TOut*>(L.c.Locate())
                      : nullptr;
  __syncthreads();
  // 16 rows x 2 chunks of 8 columns: the first 32 threads, the warps'
  // partials added in warp order (the same bits every run).
  if (tid < kM * (kTileN / 8)) {
    const int row = tid / (kTileN / 8), col = (tid % (kTileN / 8)) * 8;
    if (row < L.m && n0 + col < L.n) {
      float v[8] = {};
#pragma unroll
      for (int w = 0; w < kWarps; ++w)
        AddChunk(red + (w * kM + row) * kTileN + col, v);
      float c[8] = {};
      if (C != nullptr)
        LoadChunk(C + row * L.c.ld + n0 + col, L.n - (n0 + col), c);
#pragma unroll
      for (int e = 0; e < 8; ++e) v[e] = L.alpha * v[e] + L.beta * c[e];
      StoreChunk(D + row * L.d.ld + n0 + col, L.n - (n0 + col), v);
    }
  }
}

// B's descriptor for the TMA stages: the buffer as b_buffer_rows rows of
// b.ld elements, boxes of kBoxK rows x 16 columns, the 32-byte swizzle,
// zeros past the buffer.  `promotion` is the L2 fetch size per miss.
template <typename T>
std::string EncodeB(const SkinnyLaunch& l, CUtensorMap* map,
                    CUtensorMapL2promotion promotion) {
  static const PFN_cuTensorMapEncodeTiled_v12000 encode = [] {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult found;
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn,
                                         12000, cudaEnableDefault,
                                         &found) != cudaSuccess ||
        found != cudaDriverEntryPointSuccess)
      fn = nullptr;
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(fn);
  }();
  if (encode == nullptr) return "no cuTensorMapEncodeTiled in the driver";
  const cuuint64_t dims[2] = {static_cast<cuuint64_t>(l.b.ld),
                              static_cast<cuuint64_t>(l.b_buffer_rows)};
  const cuuint64_t strides[1] = {
      static_cast<cuuint64_t>(l.b.ld) * sizeof(T)};
  const cuuint32_t box[2] = {kTileN, kBoxK}, element_strides[2] = {1, 1};
  const CUresult r = encode(
      map,
      std::is_same_v<T, __half> ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16
                                : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16,
      2, const_cast<char*>(l.b_buffer), dims, strides, box, element_strides,
      CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_32B, promotion,
      CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  return r == CUDA_SUCCESS
             ? ""
             : "cuTensorMapEncodeTiled failed (" + std::to_string(r) + ")";
}

// Whether the TMA stages can load this launch's B: NN, and B's buffer
// given (the handler gives it) with coordinates TMA can hold.
inline bool TmaCanLoadB(const SkinnyLaunch& l, bool trans_b) {
  return !trans_b && l.b_buffer != nullptr && l.b_buffer_rows > 0 &&
         l.b_buffer_rows < (int64_t{1} << 31) && l.b.ld < (int64_t{1} << 31);
}

// Makes the launch (no cluster: the launch's split is 1 and the plan says
// so), for the handler to keep and launch again at the same addresses.
// NN loads B through TMA wherever TmaCanLoadB (kTma = false, stages of
// part of a box, or a B it cannot describe: cp.async, as NT always does).
template <typename T, bool kTransB, typename TOut = T,
          typename Cfg = ShippedConfig, bool kTma = true,
          CUtensorMapL2promotion kPromotion = CU_TENSOR_MAP_L2_PROMOTION_L2_256B>
std::string Prepare(const SkinnyLaunch& l, PreparedLaunch* out) {
  if (l.m < 1 || l.m > kM || l.n < 1 || l.k < 1)
    return "narrow skinny kernel: bad m, n or k";
  if (l.split_k != 1) return "narrow skinny kernel: split must be 1";
  // The function's shared-memory limit, set once per device (at each call
  // site: OncePerDevice keeps one record per lambda type), then the launch.
  auto finish = [&](const void* fn, cudaError_t set, unsigned smem,
                    const void* params, size_t bytes) -> std::string {
    if (set != cudaSuccess)
      return std::string("narrow skinny kernel: cudaFuncSetAttribute: ") +
             cudaGetErrorString(set);
    out->fn = fn;
    out->grid = dim3(static_cast<unsigned>((l.n + kTileN - 1) / kTileN));
    out->block = dim3(Cfg::kThreads);
    out->cluster = dim3(1, 1, 1);
    out->smem = smem;
    out->param_bytes = bytes;
    std::memcpy(out->params, params, bytes);
    return "";
  };
  if constexpr (!kTransB && kTma && Cfg::kTileK % kBoxK == 0) {
    if (TmaCanLoadB(l, kTransB)) {
      using Params = NarrowParams<true>;
      static_assert(sizeof(Params) <= kMaxParamBytes,
                    "the kernel's parameter must fit a PreparedLaunch");
      Params p;
      p.l = l;
      if (std::string r = EncodeB<T>(l, &p.b_map, kPromotion); !r.empty())
        return "narrow skinny kernel: " + r;
      const void* fn =
          reinterpret_cast<const void*>(&NarrowKernel<T, false, TOut, Cfg, true>);
      constexpr unsigned kSmem = Cfg::kBytes + 8 * Cfg::kStages;
      const cudaError_t set = OncePerDevice(l.device, [fn] {
        return cudaFuncSetAttribute(
            fn, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem);
      });
      return finish(fn, set, kSmem, &p, sizeof(Params));
    }
  }
  using Params = NarrowParams<false>;
  static_assert(sizeof(Params) <= kMaxParamBytes,
                "the kernel's parameter must fit a PreparedLaunch");
  Params p;
  p.l = l;
  const void* fn = reinterpret_cast<const void*>(
      &NarrowKernel<T, kTransB, TOut, Cfg, false>);
  const cudaError_t set = OncePerDevice(l.device, [fn] {
    return cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                Cfg::kBytes);
  });
  return finish(fn, set, Cfg::kBytes, &p, sizeof(Params));
}

}  // namespace skinny_narrow
}  // namespace kernels
}  // namespace jax_dynoff

// One instantiation, B transposed or not:
//   JAX_DYNOFF_SM90_SKINNY_NARROW_KERNEL(kSm90SkinnyNarrowBf16NN,
//                                        __nv_bfloat16, __nv_bfloat16, false)
#define JAX_DYNOFF_SM90_SKINNY_NARROW_KERNEL(NAME, IN, OUT, TRANS_B)      \
  namespace jax_dynoff {                                                  \
  namespace kernels {                                                     \
  extern const SkinnyKernelEntry NAME = {                                 \
      #NAME, &skinny_narrow::Prepare<IN, TRANS_B, OUT>};                  \
  }                                                                       \
  }

#endif  // JAX_DYNOFF_KERNELS_SM90_SKINNY_NARROW_H_
