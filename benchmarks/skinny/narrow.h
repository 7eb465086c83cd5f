// A narrow candidate for the skinny GEMM (m <= 16), for probe.cu --narrow:
// each CTA owns a few output columns (kBN: 16 or 32) over the whole of K,
// its warps split K among themselves stage by stage and add their partials
// through shared memory at the end.  No cluster, no split of K across
// CTAs, no workspace: a GEMM is one launch whose CTAs never wait on each
// other.
//
// Why: where B sits in L2 (the table loop: one weight, rows of A at table
// offsets) XLA's Triton GEMM takes 3.0 us at 8x2048x2048 where the skinny
// kernel (128-column tiles, K split across a cluster of 8) takes 5.9 on an
// H100 (benchmarks/results/2026-12-06-h100-669ff0d, cell_timeline.txt),
// and 2.1 against 4.7 at 16x512x1536.  The skinny kernel's fixed costs
// (the cluster's partials, ~0.75 us; its CTAs wait for each other) are
// what this drops; it pays instead with A read by every CTA (m x K, small
// against B's K x kBN where m <= kBN) and fewer CTAs where n is small
// (n / kBN).
//
// NN only (B row-major k x n), one m fragment (m <= 16), T in and out,
// alpha and beta (C read at the end).  Shared memory: kStages stages of A
// (16 x kBK) and B (kBK x kBN); the reduction reuses the stages.
#pragma once
#include <cuda_bf16.h>

#include <string>

#include "kernels/launch.h"
#include "kernels/sm90_skinny.h"

namespace narrow {

namespace sk = jax_dynoff::kernels::skinny;
using jax_dynoff::kernels::SkinnyLaunch;

// B's rows of kRowBytes (32 or 64 bytes: kBN = 16 or 32 columns): chunk c
// of row r at c ^ ((r / P) % C), P = 128 / kRowBytes rows per 128 bytes,
// C = kRowBytes / 16 chunks a row, so that the 8 rows one ldmatrix reads
// (same logical chunk) fall in 8 different 16-byte bank groups.
template <int kRowBytes>
__device__ __forceinline__ uint32_t SwzB(int row, int chunk) {
  constexpr int P = 128 / kRowBytes, C = kRowBytes / 16;
  return static_cast<uint32_t>(row * kRowBytes +
                               ((chunk ^ ((row / P) & (C - 1))) << 4));
}

template <int kBN, int kBK, int kStages>
struct Smem {
  static constexpr int kAStage = 16 * kBK * 2;
  static constexpr int kBStage = kBK * kBN * 2;
  static constexpr int kBytes = kStages * (kAStage + kBStage);
};

template <typename T, int kBN, int kWarps, int kBK, int kStages>
__global__ void __launch_bounds__(kWarps * 32)
    NarrowKernel(const SkinnyLaunch L) {
  static_assert(kBN == 16 || kBN == 32, "16 or 32 columns a CTA");
  static_assert(kBK % 64 == 0, "A's rows swizzle over 8 chunks");
  using Sm = Smem<kBN, kBK, kStages>;
  constexpr int kThreads = kWarps * 32;
  extern __shared__ __align__(128) unsigned char smem[];
  const int n0 = static_cast<int>(blockIdx.x) * kBN;
  const T* A = reinterpret_cast<const T*>(L.a.Locate());
  const T* B = reinterpret_cast<const T*>(L.b.Locate());
  const int64_t lda = L.a.ld, ldb = L.b.ld;
  const int tiles = (L.k + kBK - 1) / kBK;
  const int tid = static_cast<int>(threadIdx.x), warp = tid >> 5,
            lane = tid & 31;
  const uint32_t base = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  auto a_stage = [&](int s) { return base + s * Sm::kAStage; };
  auto b_stage = [&](int s) {
    return base + kStages * Sm::kAStage + s * Sm::kBStage;
  };
  auto load = [&](int t, int s) {
    const int k0 = t * kBK;
    constexpr int kAChunks = 16 * kBK / 8, kBChunks = kBK * kBN / 8;
#pragma unroll
    for (int i = 0; i < (kAChunks + kThreads - 1) / kThreads; ++i) {
      const int q = tid + i * kThreads;
      if (kAChunks % kThreads != 0 && q >= kAChunks) break;
      const int row = q / (kBK / 8), c = q % (kBK / 8), kk = k0 + c * 8;
      const bool ok = row < L.m && kk < L.k;
      sk::CpAsync16(a_stage(s) + sk::Swz(row, c, kBK * 2),
                    ok ? A + row * lda + kk : A, ok);
    }
#pragma unroll
    for (int i = 0; i < (kBChunks + kThreads - 1) / kThreads; ++i) {
      const int q = tid + i * kThreads;
      if (kBChunks % kThreads != 0 && q >= kBChunks) break;
      const int row = q / (kBN / 8), c = q % (kBN / 8);
      const int kk = k0 + row, col = n0 + c * 8;
      const bool ok = kk < L.k && col < L.n;
      sk::CpAsync16(b_stage(s) + SwzB<kBN * 2>(row, c),
                    ok ? B + kk * ldb + col : B, ok);
    }
  };

  float acc[kBN / 8][4];
#pragma unroll
  for (int j = 0; j < kBN / 8; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) acc[j][e] = 0.f;

#pragma unroll
  for (int i = 0; i < kStages - 1; ++i) {
    if (i < tiles) load(i, i);
    sk::CpAsyncCommit();
  }
  const int mrow = ((lane >> 3) & 1) * 8 + (lane & 7), half = lane >> 4;
  for (int i = 0; i < tiles; ++i) {
    sk::CpAsyncWait<kStages - 2>();
    __syncthreads();
    if (i + kStages - 1 < tiles) load(i + kStages - 1, (i + kStages - 1) % kStages);
    sk::CpAsyncCommit();
    const int s = i % kStages;
#pragma unroll
    for (int kk = warp; kk < kBK / 16; kk += kWarps) {
      uint32_t af[4];
      sk::Ldsm4(a_stage(s) + sk::Swz(mrow, kk * 2 + half, kBK * 2), af);
#pragma unroll
      for (int j = 0; j < kBN / 16; ++j) {
        uint32_t bf[4];
        sk::Ldsm4T(b_stage(s) + SwzB<kBN * 2>(kk * 16 + mrow, j * 2 + half),
                   bf);
        sk::Mma<T>(acc[2 * j], af, bf[0], bf[1]);
        sk::Mma<T>(acc[2 * j + 1], af, bf[2], bf[3]);
      }
    }
  }
  sk::CpAsyncWait<0>();
  __syncthreads();  // the stages are free: the partials go there

  // red[w][row][col], kWarps x 16 x kBN floats (16 KiB at 8 warps x 32).
  float* red = reinterpret_cast<float*>(smem);
#pragma unroll
  for (int j = 0; j < kBN / 8; ++j) {
    const int row = lane >> 2, col = j * 8 + (lane & 3) * 2;
    float* p = red + (warp * 16 + row) * kBN + col;
    *reinterpret_cast<float2*>(p) = make_float2(acc[j][0], acc[j][1]);
    *reinterpret_cast<float2*>(p + 8 * kBN) = make_float2(acc[j][2], acc[j][3]);
  }
  __syncthreads();
  T* D = reinterpret_cast<T*>(const_cast<char*>(L.d.Locate()));
  const T* C = L.beta != 0.f ? reinterpret_cast<const T*>(L.c.Locate())
                             : nullptr;
  for (int q = tid; q < 16 * (kBN / 8); q += kThreads) {
    const int row = q / (kBN / 8), col = (q % (kBN / 8)) * 8;
    if (row >= L.m || n0 + col >= L.n) continue;
    float v[8] = {};
#pragma unroll
    for (int w = 0; w < kWarps; ++w) {
      const float* p = red + (w * 16 + row) * kBN + col;
      const float4 x0 = *reinterpret_cast<const float4*>(p);
      const float4 x1 = *reinterpret_cast<const float4*>(p + 4);
      v[0] += x0.x; v[1] += x0.y; v[2] += x0.z; v[3] += x0.w;
      v[4] += x1.x; v[5] += x1.y; v[6] += x1.z; v[7] += x1.w;
    }
    float c[8] = {};
    if (C != nullptr) sk::LoadChunk(C + row * L.c.ld + n0 + col, L.n - n0 - col, c);
#pragma unroll
    for (int e = 0; e < 8; ++e) v[e] = L.alpha * v[e] + L.beta * c[e];
    sk::StoreChunk(D + row * L.d.ld + n0 + col, L.n - n0 - col, v);
  }
}

// Launches the candidate (no cluster; split ignored: K stays in the CTA).
template <typename T, int kBN, int kWarps, int kBK, int kStages>
std::string Run(const SkinnyLaunch& l) {
  using Sm = Smem<kBN, kBK, kStages>;
  static_assert(Sm::kBytes >= kWarps * 16 * kBN * 4,
                "the reduction fits the stages");
  if (l.m < 1 || l.m > 16 || l.n < 1 || l.k < 1) return "narrow: bad m, n or k";
  auto fn = &NarrowKernel<T, kBN, kWarps, kBK, kStages>;
  if (cudaError_t e = jax_dynoff::kernels::OncePerDevice(l.device, [fn] {
        return cudaFuncSetAttribute(
            fn, cudaFuncAttributeMaxDynamicSharedMemorySize, Sm::kBytes);
      });
      e != cudaSuccess)
    return std::string("narrow: ") + cudaGetErrorString(e);
  fn<<<(l.n + kBN - 1) / kBN, kWarps * 32, Sm::kBytes, l.stream>>>(l);
  const cudaError_t e = cudaGetLastError();
  return e == cudaSuccess ? "" : std::string("narrow: ") + cudaGetErrorString(e);
}

}  // namespace narrow
