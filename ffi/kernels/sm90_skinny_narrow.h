// The skinny kernel's narrow tile: D = cast(alpha * A @ B + beta * C) for
// m <= 16, each CTA owning 16 output columns over the whole of K, its 8
// warps splitting every K stage among themselves and adding their partials
// through shared memory at the end.  No cluster, no split of K across
// CTAs, no workspace: one launch whose CTAs never wait for each other.
//
// Why beside the wide tile (kernels/sm90_skinny.h: 64 columns a CTA, K
// split across a cluster): where K is short the wide tile's cluster
// reduction is most of the call.  At K = 512 it splits K over a cluster of
// 4, two 64-deep stages a CTA, and this tile is about 1 us (20%) faster
// with the loop's counter on an H100: 3.72 against 4.73 us at 8x512x512,
// 4.53 against 5.51 at 8x4096x512, hot or cold
// (benchmarks/results/2026-12-06-h100-eecdbf4/narrow.txt, probe.cu
// --narrow).  In the table loop with body graphs it is faster at every K
// up to 1536, and up to 2048 where n <= 2048, by 4-19%
// (benchmarks/skinny_tiles.py; 2026-12-06-h100-ff27639 and -2be2540);
// since both tiles locate their chunks once, the wide one is faster at K
// = 1536 with n >= 3072 (2026-12-07-h100-b408ce1).
// Where K is longer the wide tile wins: 16 columns a CTA stream B too
// slowly.  plan.h SkinnyTileChoice holds the rule.
//
// The price: every CTA reads all of A (m x K, small beside its K x 16 of
// B where m <= 16).  B is row-major k x n (NN) or, with kTransB, n x k
// with K contiguous (NT: x @ W^T).  Loads are 16-byte cp.async,
// zero-filled past K and ignored past m and n; the epilogue reads C and
// writes D in whole 8-column chunks (two float4 for a float32 D, the
// second only inside the width), so the plan's alignment proof (16-byte
// addresses, leading dimensions and widths) is what it relies on, as the
// wide tile does.  Elements outside D's window are never written.
#ifndef JAX_DYNOFF_KERNELS_SM90_SKINNY_NARROW_H_
#define JAX_DYNOFF_KERNELS_SM90_SKINNY_NARROW_H_

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstring>
#include <string>

#include "kernels/launch.h"
#include "kernels/sm90_skinny.h"  // the cp.async, ldmatrix, mma and chunk helpers

namespace jax_dynoff {
namespace kernels {
namespace skinny_narrow {

using skinny::AddChunk;
using skinny::ChunkRowCol;
using skinny::CpAsync16;
using skinny::CpAsyncCommit;
using skinny::CpAsyncWait;
using skinny::KColChunk;
using skinny::Kept;
using skinny::Ldsm4;
using skinny::Ldsm4T;
using skinny::LoadChunk;
using skinny::LocateKRowChunks;
using skinny::Mma;
using skinny::StoreChunk;
using skinny::Swz;
using skinny::ThreadChunks;

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
// The tile rule (plan.h SkinnyTileChoice) counts a wave of this tile as
// kSkinnyNarrowCtasPerSm CTAs an SM: they must fit an SM's 228 KiB of
// shared memory, 1 KiB of it reserved a CTA.
static_assert(kSkinnyNarrowCtasPerSm * (ShippedConfig::kBytes + 1024) <=
                  228 * 1024,
              "the rule's CTAs an SM fit the shipped configuration");

// NN's B rows are 32 bytes (16 columns): chunk c (of 2) of row r sits at
// c ^ ((r / 4) % 2), so the 8 rows one transposing ldmatrix reads (the
// same logical chunk) fall in 8 different 16-byte bank groups.
__host__ __device__ __forceinline__ uint32_t SwzB(int row, int chunk) {
  return static_cast<uint32_t>(row * kTileN * 2 +
                               ((chunk ^ ((row >> 2) & 1)) << 4));
}

template <typename T, bool kTransB, typename TOut, typename Cfg>
__global__ void __launch_bounds__(Cfg::kThreads)
    NarrowKernel(const SkinnyLaunch L) {
  constexpr int kTileK = Cfg::kTileK, kStages = Cfg::kStages,
                kWarps = Cfg::kWarps, kThreads = Cfg::kThreads;
  extern __shared__ __align__(128) unsigned char smem[];
  const int n0 = static_cast<int>(blockIdx.x) * kTileN;
  const T* A = reinterpret_cast<const T*>(L.a.Locate());
  const T* B = reinterpret_cast<const T*>(L.b.Locate());
  const int64_t lda = L.a.ld, ldb = L.b.ld;
  const int tiles = (L.k + kTileK - 1) / kTileK;
  const int tid = static_cast<int>(threadIdx.x), warp = tid >> 5,
            lane = tid & 31;
  const uint32_t base = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  auto a_stage = [&](int s) { return base + s * Cfg::kAStage; };
  auto b_stage = [&](int s) {
    return base + kStages * Cfg::kAStage + s * Cfg::kBStage;
  };

  // This thread's chunks of a stage, located once (skinny::StageChunk):
  // chunk i of thread tid is chunk q = tid + i * kThreads of A's 16 rows x
  // kTileK / 8 chunks, and of B's kTileK rows (K) x 2 column chunks (NN) or
  // 16 rows (output columns) x kTileK / 8 chunks (NT).  A stage then adds
  // only its K and its stage's shared address.
  constexpr int kAChunks = kM * kTileK / 8 / kThreads,
                kBChunks = kTileK * kTileN / 8 / kThreads;
  ThreadChunks<T, kAChunks> a_ch;
  LocateKRowChunks<kThreads, kTileK>(a_ch, A, tid, 0, L.m, lda, L.k);
  ThreadChunks<T, kBChunks> b_ch;
  if constexpr (kTransB) {  // 16 rows (columns of D) x kTileK / 8 K chunks
    LocateKRowChunks<kThreads, kTileK>(b_ch, B, tid, n0, L.n, ldb, L.k);
  } else {  // kTileK rows (K) x 2 column chunks
#pragma unroll
    for (int i = 0; i < kBChunks; ++i) {
      int row, col;
      ChunkRowCol<kThreads, 2>(tid, i, row, col);
      b_ch.Set(i, B, KColChunk(row, col, n0, L.n, ldb, L.k, SwzB(row, col)));
    }
  }
  // NN: a stage's K moves down B's rows, k0 * ldb elements; the loads come
  // in K order (tiles 0, 1, ...), so that offset is kept for the next load
  // and moved by kTileK rows after each.
  int64_t b_next = 0;
  auto load = [&](int t, int s) {
    const int k0 = Kept(t * kTileK);
#pragma unroll
    for (int i = 0; i < kAChunks; ++i) {
      const bool ok = k0 < a_ch.lim[i];
      CpAsync16(a_stage(s) + a_ch.dst[i], ok ? a_ch.src[i] + k0 : A, ok);
    }
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
  // The lanes' ldmatrix addresses in a stage, located once as well.  A
  // warp takes the stage's k16 steps kk = warp, warp + kWarps, ...:
  // kSteps of them (warp < kWarps: the launch's block is kThreads).
  // ldmatrix: lane l addresses row l % 8 of 8x8 matrix l / 8.
  constexpr int kSteps = kTileK / 16 / kWarps;
  const int mrow = ((lane >> 3) & 1) * 8 + (lane & 7), half = lane >> 4;
  uint32_t a_ld[kSteps], b_ld[kSteps];
#pragma unroll
  for (int j = 0; j < kSteps; ++j) {
    const int kk = warp + j * kWarps;
    a_ld[j] = Swz(mrow, kk * 2 + half, kTileK * 2);
    b_ld[j] = kTransB ? Swz(half * 8 + (lane & 7), kk * 2 + ((lane >> 3) & 1),
                            kTileK * 2)
                      : SwzB(kk * 16 + mrow, half);
  }
  // Tile i sits in stage s = i % kStages, and tile i + kStages - 1 goes
  // to the stage tile i - 1 left, (i - 1) % kStages: both kept as they
  // move, not divided out every stage.
  int s = 0, s_free = kStages - 1;
  for (int i = 0; i < tiles; ++i) {
    CpAsyncWait<kStages - 2>();
    __syncthreads();  // tile i landed; everyone is done with tile i - 1
    if (i + kStages - 1 < tiles) load(i + kStages - 1, s_free);
    CpAsyncCommit();
#pragma unroll
    for (int j = 0; j < kSteps; ++j) {
      uint32_t af[4];
      Ldsm4(a_stage(s) + a_ld[j], af);
      uint32_t bf[4];  // k 0-7 / 8-15 of columns 0..7, then 8..15
      if constexpr (kTransB)
        Ldsm4(b_stage(s) + b_ld[j], bf);
      else
        Ldsm4T(b_stage(s) + b_ld[j], bf);
      Mma<T>(acc[0], af, bf[0], bf[1]);
      Mma<T>(acc[1], af, bf[2], bf[3]);
    }
    s_free = s;
    s = s + 1 == kStages ? 0 : s + 1;
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

// Makes the launch (no cluster: the launch's split is 1 and the plan says
// so), for the handler to keep and launch again at the same addresses.
template <typename T, bool kTransB, typename TOut = T,
          typename Cfg = ShippedConfig>
std::string Prepare(const SkinnyLaunch& l, PreparedLaunch* out) {
  static_assert(sizeof(SkinnyLaunch) <= kMaxParamBytes,
                "the kernel's parameter must fit a PreparedLaunch");
  if (l.m < 1 || l.m > kM || l.n < 1 || l.k < 1)
    return "narrow skinny kernel: bad m, n or k";
  if (l.split_k != 1) return "narrow skinny kernel: split must be 1";
  auto* fn = &NarrowKernel<T, kTransB, TOut, Cfg>;
  if (cudaError_t e = OncePerDevice(l.device, [fn] {
        return cudaFuncSetAttribute(
            reinterpret_cast<const void*>(fn),
            cudaFuncAttributeMaxDynamicSharedMemorySize, Cfg::kBytes);
      });
      e != cudaSuccess)
    return std::string("narrow skinny kernel: cudaFuncSetAttribute: ") +
           cudaGetErrorString(e);
  out->fn = reinterpret_cast<const void*>(fn);
  out->grid = dim3(static_cast<unsigned>((l.n + kTileN - 1) / kTileN));
  out->block = dim3(Cfg::kThreads);
  out->cluster = dim3(1, 1, 1);
  out->smem = Cfg::kBytes;
  out->param_bytes = sizeof(SkinnyLaunch);
  std::memcpy(out->params, &l, sizeof(SkinnyLaunch));
  return "";
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
