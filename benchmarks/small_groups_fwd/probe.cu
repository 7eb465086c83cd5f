// A candidate kernel for ragged_dot's forward where the groups are small
// (decode-sized MoE): out[rows of e] = X_e @ W[e] for every expert e, X the
// (m x K) tokens with expert e's rows at [offset_e, offset_e + rows_e),
// W (E x K x N) row-major, out (m x N), bfloat16 in and out, float32
// accumulation.
//
// Why: the library's grouped CUTLASS kernel pads every expert's rows to its
// 128-row tile, so at decode sizes (1-16 rows an expert) more than 90% of
// its MMAs multiply zeros; the time is the weight stream either way, but
// the skewed decode forward streams slower (3.55 TB/s against 3.89 with
// uniform groups, benchmarks/results/2026-12-05-h200-efa90f3).  This kernel
// swaps the operands: the weights are the MMA's M (128 features a CTA, one
// expert), the tokens its N (8 a fragment), so an expert of r rows pads to
// a multiple of 8, not of 128, and an expert without rows reads nothing.
// One CTA per (128 features, expert); K streamed through a 4-stage
// cp.async pipeline (W^T fragments by ldmatrix.trans, X's by ldmatrix) into
// mma.sync m16n8k16; experts of more than 32 rows take several passes over
// their weights (the second from L2).  The tile leaves through shared
// memory as 16-byte rows.
//
// The probe checks it against a naive float32 kernel (uniform and skewed
// sizes with empty experts, odd N and K tails, out poisoned first, rows
// outside the groups untouched), reports the MMA padding (rows computed
// over rows wanted), and times it beside a kernel that only reads the used
// experts' weights (the floor).  Build and run (offline, sm_90a; no JAX,
// no CUTLASS; the PTX helpers are the skinny kernel's):
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I ffi \
//     benchmarks/small_groups_fwd/probe.cu -o /tmp/small_groups_fwd && \
//     /tmp/small_groups_fwd
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "../cuda_check.h"
#include "kernels/sm90_skinny.h"  // the cp.async, ldmatrix and mma helpers

using T = __nv_bfloat16;

namespace small_fwd {

constexpr int kBF = 128;      // features (W's columns) a CTA
constexpr int kBK = 64;       // K a stage
constexpr int kTok = 32;      // tokens a pass: 4 n8 fragments
constexpr int kStages = 4;
constexpr int kThreads = 128;  // 4 warps x 32 features
constexpr int kWStage = kBK * kBF * 2;   // 16 KiB: 64 rows of 256 B
constexpr int kXStage = kTok * kBK * 2;  // 4 KiB: 32 rows of 128 B
constexpr int kStageBytes = kWStage + kXStage;
constexpr int kOutLd = kBF + 8;  // staged tile's row, elements (+16 B)
constexpr int kSmemBytes = kStages * kStageBytes > kTok * kOutLd * 2
                               ? kStages * kStageBytes
                               : kTok * kOutLd * 2;

using jax_dynoff::kernels::skinny::CpAsync16;
using jax_dynoff::kernels::skinny::CpAsyncCommit;
using jax_dynoff::kernels::skinny::CpAsyncWait;
using jax_dynoff::kernels::skinny::Ldsm4;
using jax_dynoff::kernels::skinny::Ldsm4T;
using jax_dynoff::kernels::skinny::Mma;
using jax_dynoff::kernels::skinny::Swz;

struct Args {
  const T* x;          // m x k, row-major (ld k)
  const T* w;          // e x k x n, row-major (ld n)
  T* out;              // m x n, row-major (ld n)
  const int* offsets;  // per expert: first row
  const int* rows;     // per expert: rows (0: the CTA returns at once)
  int k, n;
};

__global__ void __launch_bounds__(kThreads)
    SmallGroupsFwd(const __grid_constant__ Args A) {
  extern __shared__ __align__(128) unsigned char smem[];
  const int e = blockIdx.y;
  const int f0 = blockIdx.x * kBF;
  const int rows = A.rows[e];
  if (rows == 0) return;  // no weight read for an expert without tokens
  const int64_t first = A.offsets[e];
  const T* W = A.w + static_cast<int64_t>(e) * A.k * A.n;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const uint32_t base = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  auto ws = [&](int s) { return base + s * kStageBytes; };
  auto xs = [&](int s) { return base + s * kStageBytes + kWStage; };
  const int k_tiles = (A.k + kBK - 1) / kBK;

  for (int p0 = 0; p0 < rows; p0 += kTok) {  // passes of 32 tokens
    const int toks = min(kTok, rows - p0);
    const int frags = (toks + 7) / 8;  // n8 fragments with a token

    // Stage t: W rows [64 t, 64 t + 64) x 128 features (8 chunks a
    // thread), X tokens x 64 K (2 chunks a thread where tokens fill them).
    auto load = [&](int t, int s) {
      const int k0 = t * kBK;
#pragma unroll
      for (int i = 0; i < kBK * kBF / 8 / kThreads; ++i) {
        const int q = tid + i * kThreads, r = q >> 4, c = q & 15;
        const int kk = k0 + r, ff = f0 + c * 8;
        const bool ok = kk < A.k && ff < A.n;
        CpAsync16(ws(s) + Swz(r, c, kBF * 2),
                  ok ? W + static_cast<int64_t>(kk) * A.n + ff : W, ok);
      }
#pragma unroll
      for (int i = 0; i < kTok * kBK / 8 / kThreads; ++i) {
        const int q = tid + i * kThreads, r = q >> 3, c = q & 7;
        if (r >= frags * 8) continue;  // a fragment no token reaches
        const int kk = k0 + c * 8;
        const bool ok = r < toks && kk < A.k;
        CpAsync16(xs(s) + Swz(r, c, kBK * 2),
                  ok ? A.x + (first + p0 + r) * A.k + kk : A.x, ok);
      }
    };

    float acc[2][4][4] = {};
#pragma unroll
    for (int i = 0; i < kStages - 1; ++i) {
      if (i < k_tiles) load(i, i);
      CpAsyncCommit();
    }
    for (int t = 0; t < k_tiles; ++t) {
      CpAsyncWait<kStages - 2>();
      __syncthreads();  // stage t landed; all are done with stage t - 1
      if (t + kStages - 1 < k_tiles)
        load(t + kStages - 1, (t + kStages - 1) % kStages);
      CpAsyncCommit();
      const int s = t % kStages;
      const int q = lane >> 3, j = lane & 7;
#pragma unroll
      for (int kk = 0; kk < kBK / 16; ++kk) {
        // A = W^T (features x K): the stage holds (K rows, features);
        // ldmatrix.trans of matrix q: K rows kk 16 + (q / 2) 8 + j,
        // features + (q % 2) 8.
        uint32_t af[2][4];
#pragma unroll
        for (int mf = 0; mf < 2; ++mf) {
          const int fw = warp * 32 + mf * 16;
          Ldsm4T(ws(s) + Swz(kk * 16 + (q >> 1) * 8 + j, (fw >> 3) + (q & 1),
                             kBF * 2),
                 af[mf]);
        }
        // B = X^T (K x tokens): the stage holds (tokens, K); plain
        // ldmatrix of matrix q: tokens (q / 2) 8 + j, K chunk kk 2 + q % 2:
        // b0, b1 of two n8 fragments.
#pragma unroll
        for (int np = 0; np < 2; ++np) {
          if (2 * np >= frags) break;  // warp-uniform
          uint32_t bf[4];
          Ldsm4(xs(s) + Swz(np * 16 + (q >> 1) * 8 + j, kk * 2 + (q & 1),
                            kBK * 2),
                bf);
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

    // acc[mf][nf]: c0, c1 at (feature fw + lane / 4, tokens nf 8 +
    // (lane % 4) 2 + 0, 1); c2, c3 at feature + 8.  Staged as (token,
    // feature), then 16-byte rows of out.
    T* tile = reinterpret_cast<T*>(smem);
#pragma unroll
    for (int mf = 0; mf < 2; ++mf)
#pragma unroll
      for (int nf = 0; nf < 4; ++nf) {
        const int f = warp * 32 + mf * 16 + (lane >> 2);
        const int tk = nf * 8 + (lane & 3) * 2;
        tile[tk * kOutLd + f] = __float2bfloat16_rn(acc[mf][nf][0]);
        tile[(tk + 1) * kOutLd + f] = __float2bfloat16_rn(acc[mf][nf][1]);
        tile[tk * kOutLd + f + 8] = __float2bfloat16_rn(acc[mf][nf][2]);
        tile[(tk + 1) * kOutLd + f + 8] = __float2bfloat16_rn(acc[mf][nf][3]);
      }
    __syncthreads();
    for (int i = tid; i < toks * (kBF / 8); i += kThreads) {
      const int r = i / (kBF / 8), c = (i % (kBF / 8)) * 8;
      if (f0 + c < A.n)  // n a multiple of 8 (Run)
        *reinterpret_cast<uint4*>(A.out + (first + p0 + r) * A.n + f0 + c) =
            *reinterpret_cast<const uint4*>(&tile[r * kOutLd + c]);
    }
    __syncthreads();  // the tile's memory is the next pass's pipeline
  }
}

// K and N multiples of 8: every 16-byte chunk of a row lies inside it
// (the library's grouped path proves the same of its operands).
cudaError_t Run(const Args& a, int experts, cudaStream_t stream) {
  if (a.k % 8 != 0 || a.n % 8 != 0) return cudaErrorInvalidValue;
  static bool once = false;
  if (!once) {
    cudaError_t e = cudaFuncSetAttribute(
        SmallGroupsFwd, cudaFuncAttributeMaxDynamicSharedMemorySize,
        kSmemBytes);
    if (e != cudaSuccess) return e;
    once = true;
  }
  const dim3 grid((a.n + kBF - 1) / kBF, experts);
  SmallGroupsFwd<<<grid, kThreads, kSmemBytes, stream>>>(a);
  return cudaGetLastError();
}

}  // namespace small_fwd

__global__ void Fill(T* p, size_t n, uint32_t seed) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x) {
    uint32_t h = uint32_t(i) * 2654435761u ^ seed;
    h ^= h >> 13; h *= 0x5bd1e995u; h ^= h >> 15;
    p[i] = __float2bfloat16((int(h % 2001) - 1000) / 1000.f);
  }
}

// out's element (row, nn) of the groups in float32, one thread each; rows
// outside every group get NaN (not compared).
__global__ void Ref(const T* x, const T* w, const int* row_expert, int m,
                    int k, int n, float* ref) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
       i < int64_t(m) * n; i += int64_t(gridDim.x) * blockDim.x) {
    const int row = int(i / n), nn = int(i % n), e = row_expert[row];
    if (e < 0) { ref[i] = nanf(""); continue; }
    const T* we = w + int64_t(e) * k * n;
    float s = 0.f;
    for (int kk = 0; kk < k; ++kk)
      s += __bfloat162float(x[int64_t(row) * k + kk]) *
           __bfloat162float(we[int64_t(kk) * n + nn]);
    ref[i] = s;
  }
}

// The floor: the used experts' weights read with 16-byte loads.
__global__ void ReadOnly(const uint4* w, const int* rows, int64_t per_expert,
                         int experts, uint32_t* sink) {
  uint32_t acc = 0;
  for (int e = 0; e < experts; ++e) {
    if (rows[e] == 0) continue;
    const uint4* p = w + e * per_expert;
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
         i < per_expert; i += int64_t(gridDim.x) * blockDim.x) {
      const uint4 v = __ldcg(p + i);
      acc ^= v.x ^ v.w;
    }
  }
  if (acc == 0x12345678u) sink[blockIdx.x] = acc;
}

std::vector<int> Sizes(const char* kind, int experts, int m, uint32_t seed) {
  std::vector<int> s(experts);
  if (std::strcmp(kind, "uniform") == 0) {
    for (int e = 0; e < experts; ++e) s[e] = m / experts + (e < m % experts);
    return s;
  }
  // Dirichlet(0.3), floored, the remainder to the largest (moe_peers.py).
  std::mt19937 rng(seed);
  std::gamma_distribution<double> gamma(0.3, 1.0);
  std::vector<double> p(experts);
  double sum = 0;
  for (double& v : p) sum += (v = gamma(rng));
  int total = 0, big = 0;
  for (int e = 0; e < experts; ++e) {
    s[e] = int(std::floor(p[e] / sum * m));
    total += s[e];
    if (s[e] > s[big]) big = e;
  }
  s[big] += m - total;
  return s;
}

// Checks (check) or times one case: `m_pad` rows of out past the groups
// stay poisoned.
bool Case(const char* name, const char* kind, int experts, int m, int k, int n,
          bool check) {
  const std::vector<int> sizes = Sizes(kind, experts, m, 7);
  std::vector<int> offsets(experts);
  int64_t rows_computed = 0, used = 0, empty = 0, most = 0;
  for (int e = 0, o = 0; e < experts; ++e) {
    offsets[e] = o;
    o += sizes[e];
    rows_computed += (sizes[e] + 7) / 8 * 8;
    used += sizes[e] > 0;
    empty += sizes[e] == 0;
    most = std::max<int64_t>(most, sizes[e]);
  }
  const int m_pad = m + 5;  // rows past the groups
  T *x, *w, *out;
  int *d_off, *d_rows, *d_row_expert;
  CK(cudaMalloc(&x, size_t(m_pad) * k * 2));
  CK(cudaMalloc(&w, size_t(experts) * k * n * 2));
  CK(cudaMalloc(&out, size_t(m_pad) * n * 2));
  CK(cudaMalloc(&d_off, experts * 4));
  CK(cudaMalloc(&d_rows, experts * 4));
  CK(cudaMemcpy(d_off, offsets.data(), experts * 4, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(d_rows, sizes.data(), experts * 4, cudaMemcpyHostToDevice));
  Fill<<<1024, 256>>>(x, size_t(m_pad) * k, 11);
  Fill<<<1024, 256>>>(w, size_t(experts) * k * n, 12);
  CK(cudaMemset(out, 0x7f, size_t(m_pad) * n * 2));  // poison
  small_fwd::Args a{x, w, out, d_off, d_rows, k, n};
  bool ok = true;
  if (check) {
    std::vector<int> row_expert(m_pad, -1);
    for (int e = 0; e < experts; ++e)
      for (int r = 0; r < sizes[e]; ++r) row_expert[offsets[e] + r] = e;
    CK(cudaMalloc(&d_row_expert, m_pad * 4));
    CK(cudaMemcpy(d_row_expert, row_expert.data(), m_pad * 4,
                  cudaMemcpyHostToDevice));
    float* ref;
    CK(cudaMalloc(&ref, size_t(m_pad) * n * 4));
    CK(small_fwd::Run(a, experts, 0));
    Ref<<<2048, 256>>>(x, w, d_row_expert, m_pad, k, n, ref);
    CK(cudaDeviceSynchronize());
    std::vector<uint16_t> h(size_t(m_pad) * n);
    std::vector<float> hr(size_t(m_pad) * n);
    CK(cudaMemcpy(h.data(), out, h.size() * 2, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(hr.data(), ref, hr.size() * 4, cudaMemcpyDeviceToHost));
    double err = 0, scale = 0;
    int64_t touched = 0;
    for (size_t i = 0; i < h.size(); ++i) {
      if (row_expert[i / n] < 0) {
        touched += h[i] != 0x7f7f;
        continue;
      }
      uint32_t bits = uint32_t(h[i]) << 16;
      float f;
      std::memcpy(&f, &bits, 4);
      err = std::max(err, double(std::fabs(f - hr[i])));
      scale = std::max(scale, double(std::fabs(hr[i])));
    }
    ok = touched == 0 && err <= 1e-2 * scale + 1e-2;
    std::printf("CHECK %-12s %-7s E %d m %d K %d N %d: max err %.3g (max "
                "|ref| %.3g), %lld changed outside the groups: %s\n",
                name, kind, experts, m, k, n, err, scale,
                static_cast<long long>(touched), ok ? "ok" : "FAIL");
    cudaFree(ref);
    cudaFree(d_row_expert);
  } else {
    cudaStream_t st;
    CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    uint32_t* sink;
    CK(cudaMalloc(&sink, 4096 * 4));
    auto time_ms = [&](auto launch) {
      for (int i = 0; i < 3; ++i) launch();
      cudaEvent_t e0, e1;
      CK(cudaEventCreate(&e0));
      CK(cudaEventCreate(&e1));
      const int reps = 20;
      CK(cudaEventRecord(e0, st));
      for (int i = 0; i < reps; ++i) launch();
      CK(cudaEventRecord(e1, st));
      CK(cudaEventSynchronize(e1));
      float ms = 0;
      CK(cudaEventElapsedTime(&ms, e0, e1));
      cudaEventDestroy(e0);
      cudaEventDestroy(e1);
      return ms / reps;
    };
    const double ms = time_ms([&] { CK(small_fwd::Run(a, experts, st)); });
    const double floor_ms = time_ms([&] {
      ReadOnly<<<528, 256, 0, st>>>(reinterpret_cast<const uint4*>(w), d_rows,
                                    int64_t(k) * n / 8, experts, sink);
    });
    const double bytes = double(used) * k * n * 2;
    std::printf("TIME  %-12s %-7s E %d m %d K %d N %d (empty %lld, most rows "
                "%lld, padding %.1f%%): %.3f ms (%.2f TB/s of weights), "
                "read-only %.3f ms (%.2f TB/s): %.2f of the floor\n",
                name, kind, experts, m, k, n, static_cast<long long>(empty),
                static_cast<long long>(most),
                100.0 * (rows_computed - m) / rows_computed, ms,
                bytes / ms / 1e9, floor_ms, bytes / floor_ms / 1e9,
                floor_ms / ms);
    cudaFree(sink);
    cudaStreamDestroy(st);
  }
  cudaFree(x); cudaFree(w); cudaFree(out); cudaFree(d_off); cudaFree(d_rows);
  return ok;
}

int main() {
  bool ok = true;
  for (const char* kind : {"uniform", "skewed"}) {
    ok &= Case("edges", kind, 5, 300, 200, 136, true);     // K, N tails
    ok &= Case("one_row", kind, 7, 7, 264, 264, true);
    ok &= Case("tall", kind, 3, 200, 136, 72, true);       // several passes
    ok &= Case("decode_e64", kind, 64, 512, 512, 1024, true);
  }
  if (!ok) {
    std::printf("SOME CHECKS FAILED\n");
    return 1;
  }
  // The decode layers of benchmarks/moe_peers.py.
  for (const char* kind : {"uniform", "skewed"}) {
    Case("decode_e64", kind, 64, 512, 4096, 4096, false);
    Case("decode_e128", kind, 128, 1024, 2048, 1536, false);
    Case("decode_e256", kind, 256, 256, 7168, 2048, false);
  }
  std::printf("ALL_OK\n");
  return 0;
}
