// A candidate kernel for ragged_dot's weight gradient where the groups are
// small (decode-sized MoE): dW[e] = X_e^T @ G_e for every expert e, X_e and
// G_e the rows [offset_e, offset_e + rows_e) of X (m x K) and G (m x N),
// dW (E x K x N), bfloat16 in and out, float32 accumulation.
//
// Why: with a few rows per expert the gradient is K x N per expert of
// output for r x (K + N) of input, so its time is the writes (decode E256,
// 7168 x 2048: 7.5 GB, 1.75 ms at 4.3 TB/s).  The grouped CUTLASS kernel
// runs one 64-deep k-block and a 32 KB epilogue per 128 x 128 tile there
// (about 229,000 tiles at E256), and an expert without rows was a separate
// zero fill.  This kernel: one CTA per 128 x 128 output tile, the expert's
// rows 16 at a time through a two-stage cp.async pipeline into mma.sync
// m16n8k16 (X^T and G read with ldmatrix.trans), the tile staged through
// shared memory and written with 16-byte stores; an expert without rows
// writes its zeros in the same launch.
//
// The probe checks it against a naive float32 kernel (uniform and skewed
// sizes with empty experts, edge tiles, dW poisoned first) and times it
// beside a kernel that only writes the same bytes (the floor).  Build and
// run (offline, sm_90a; no JAX, no CUTLASS; the PTX helpers are the skinny
// kernel's, kernels/sm90_skinny.h):
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I ffi \
//     benchmarks/small_k_grad/probe.cu -o /tmp/small_k_grad && /tmp/small_k_grad
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
#include "../sm90_tiles/fill.h"
#include "kernels/sm90_skinny.h"  // the cp.async, ldmatrix and mma helpers

using T = __nv_bfloat16;

namespace small_k {

constexpr int kBM = 128, kBN = 128, kBR = 16;  // output tile, rows a step
constexpr int kThreads = 256;                  // 8 warps: 4 (M) x 2 (N)
constexpr int kStageBytes = kBR * kBM * 2 + kBR * kBN * 2;  // X and G
constexpr int kOutLd = kBN + 8;  // staged tile's row, in elements (+16 B)
constexpr int kSmemBytes = kBM * kOutLd * 2 > 2 * kStageBytes
                               ? kBM * kOutLd * 2
                               : 2 * kStageBytes;

using jax_dynoff::kernels::skinny::CpAsync16;
using jax_dynoff::kernels::skinny::CpAsyncCommit;
using jax_dynoff::kernels::skinny::CpAsyncWait;
using jax_dynoff::kernels::skinny::Ldsm4T;
using jax_dynoff::kernels::skinny::Mma;
// A stage row holds 16 chunks of 16 bytes (128 elements), swizzled as the
// skinny kernel's: the 8 rows one ldmatrix reads hit 8 bank groups.
__device__ __forceinline__ uint32_t Swz(int row, int chunk) {
  return jax_dynoff::kernels::skinny::Swz(row, chunk, 256);
}

struct Args {
  const T* x;  // m x k, row-major (ld k)
  const T* g;  // m x n, row-major (ld n)
  T* dw;       // e x k x n
  const int* offsets;  // per expert: first row
  const int* rows;     // per expert: rows (0: the tile is zeros)
  int k, n;
};

__global__ void __launch_bounds__(kThreads)
    SmallKGrad(const __grid_constant__ Args A) {
  extern __shared__ __align__(128) unsigned char smem[];
  const int e = blockIdx.z;
  const int k0 = blockIdx.y * kBM, n0 = blockIdx.x * kBN;
  const int rows = A.rows[e];
  const int64_t first = A.offsets[e];
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int wm = warp >> 1, wn = warp & 1;  // warp tile: 32 (M) x 64 (N)
  const uint32_t base = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  auto xs = [&](int s) { return base + s * kStageBytes; };
  auto gs = [&](int s) { return base + s * kStageBytes + kBR * kBM * 2; };

  // Step t: rows [16 t, 16 t + 16) of the expert: one 16-byte chunk of X
  // and one of G per thread (16 rows x 16 chunks each), zeros past the
  // expert's rows and past K and N.
  auto load = [&](int t, int s) {
    const int r = tid >> 4, c = tid & 15, row = t * kBR + r;
    const bool in = row < rows;
    const int kk = k0 + c * 8, nn = n0 + c * 8;
    const bool xv = in && kk < A.k, gv = in && nn < A.n;
    CpAsync16(xs(s) + Swz(r, c),
              xv ? A.x + (first + row) * A.k + kk : A.x, xv);
    CpAsync16(gs(s) + Swz(r, c),
              gv ? A.g + (first + row) * A.n + nn : A.g, gv);
  };

  float acc[2][8][4] = {};
  const int steps = (rows + kBR - 1) / kBR;
  if (steps > 0) load(0, 0);
  CpAsyncCommit();
  for (int t = 0; t < steps; ++t) {
    if (t + 1 < steps) load(t + 1, (t + 1) & 1);
    CpAsyncCommit();
    CpAsyncWait<1>();
    __syncthreads();
    const int s = t & 1;
    const int q = lane >> 3, j = lane & 7;
    // A = X^T (i along K-dim, r along rows): 8x8 blocks of the stage
    // (rows r, columns i), transposed by ldmatrix: matrix q holds
    // (i + (q % 2) 8, r + (q / 2) 8).
    uint32_t af[2][4];
#pragma unroll
    for (int f = 0; f < 2; ++f) {
      const int i0 = wm * 32 + f * 16;
      Ldsm4T(xs(s) + Swz((q >> 1) * 8 + j, (i0 >> 3) + (q & 1)), af[f]);
    }
    // B = G (r along rows, columns n): matrix q holds
    // (r + (q % 2) 8, n + (q / 2) 8): b0, b1 of two n8 fragments.
#pragma unroll
    for (int p = 0; p < 4; ++p) {
      const int j0 = wn * 64 + p * 16;
      uint32_t bf[4];
      Ldsm4T(gs(s) + Swz((q & 1) * 8 + j, (j0 >> 3) + (q >> 1)), bf);
#pragma unroll
      for (int f = 0; f < 2; ++f) {
        Mma<T>(acc[f][2 * p], af[f], bf[0], bf[1]);
        Mma<T>(acc[f][2 * p + 1], af[f], bf[2], bf[3]);
      }
    }
    __syncthreads();  // the stage is free for step t + 2
  }
  CpAsyncWait<0>();
  __syncthreads();

  // The tile through shared memory, then 16-byte rows of global memory.
  T* out = reinterpret_cast<T*>(smem);
#pragma unroll
  for (int f = 0; f < 2; ++f)
#pragma unroll
    for (int jj = 0; jj < 8; ++jj) {
      const int row = wm * 32 + f * 16 + (lane >> 2);
      const int col = wn * 64 + jj * 8 + (lane & 3) * 2;
      *reinterpret_cast<__nv_bfloat162*>(&out[row * kOutLd + col]) =
          __floats2bfloat162_rn(acc[f][jj][0], acc[f][jj][1]);
      *reinterpret_cast<__nv_bfloat162*>(&out[(row + 8) * kOutLd + col]) =
          __floats2bfloat162_rn(acc[f][jj][2], acc[f][jj][3]);
    }
  __syncthreads();
  T* dw = A.dw + static_cast<int64_t>(e) * A.k * A.n;
  for (int i = tid; i < kBM * (kBN / 8); i += kThreads) {
    const int row = i / (kBN / 8), c = (i % (kBN / 8)) * 8;
    if (k0 + row < A.k && n0 + c < A.n)  // n a multiple of 8 (Run)
      *reinterpret_cast<uint4*>(dw + int64_t(k0 + row) * A.n + n0 + c) =
          *reinterpret_cast<const uint4*>(&out[row * kOutLd + c]);
  }
}

// K and N multiples of 8: every 16-byte chunk of a row lies inside it
// (the library's grouped path proves the same of its operands).
cudaError_t Run(const Args& a, int experts, cudaStream_t stream) {
  if (a.k % 8 != 0 || a.n % 8 != 0) return cudaErrorInvalidValue;
  static bool once = false;
  if (!once) {
    cudaError_t e = cudaFuncSetAttribute(
        SmallKGrad, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes);
    if (e != cudaSuccess) return e;
    once = true;
  }
  const dim3 grid((a.n + kBN - 1) / kBN, (a.k + kBM - 1) / kBM, experts);
  SmallKGrad<<<grid, kThreads, kSmemBytes, stream>>>(a);
  return cudaGetLastError();
}

}  // namespace small_k

// dW's element (e, kk, nn) in float32, one thread each.
__global__ void Ref(const T* x, const T* g, const int* off, const int* rows,
                    int k, int n, int64_t total, float* ref) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t e = i / (int64_t(k) * n), rem = i % (int64_t(k) * n);
    const int kk = int(rem / n), nn = int(rem % n);
    float s = 0.f;
    for (int r = 0; r < rows[e]; ++r) {
      const int64_t row = off[e] + r;
      s += __bfloat162float(x[row * k + kk]) * __bfloat162float(g[row * n + nn]);
    }
    ref[i] = s;
  }
}

// The floor: the same bytes written with 16-byte stores, nothing read.
__global__ void WriteOnly(uint4* p, int64_t chunks) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < chunks;
       i += int64_t(gridDim.x) * blockDim.x)
    p[i] = make_uint4(0, 0, 0, 0);
}

std::vector<int> Sizes(int m, int experts, bool skewed, uint32_t seed) {
  std::vector<int> s(experts, m / experts);
  for (int i = 0; i < m % experts; ++i) ++s[i];
  if (!skewed) return s;
  // Dirichlet(0.3) proportions, then m rows drawn from them: some experts
  // get many rows, many get none.
  std::mt19937 gen(seed);
  std::gamma_distribution<double> gam(0.3, 1.0);
  std::vector<double> w(experts);
  for (double& v : w) v = gam(gen);
  std::discrete_distribution<int> pick(w.begin(), w.end());
  std::fill(s.begin(), s.end(), 0);
  for (int i = 0; i < m; ++i) ++s[pick(gen)];
  return s;
}

struct Case {
  const char* name;
  int experts, m, k, n;
};

// Checks and times one case; returns false on a mismatch.
bool RunCase(const Case& c, bool skewed, bool check) {
  const std::vector<int> sizes = Sizes(c.m, c.experts, skewed, 7);
  std::vector<int> offs(c.experts);
  int acc = 0, empty = 0, most = 0;
  for (int e = 0; e < c.experts; ++e) {
    offs[e] = acc;
    acc += sizes[e];
    empty += sizes[e] == 0;
    most = std::max(most, sizes[e]);
  }
  T *x, *g, *dw;
  int *d_off, *d_rows;
  const int64_t out_elems = int64_t(c.experts) * c.k * c.n;
  CK(cudaMalloc(&x, size_t(c.m) * c.k * 2));
  CK(cudaMalloc(&g, size_t(c.m) * c.n * 2));
  CK(cudaMalloc(&dw, size_t(out_elems) * 2));
  CK(cudaMalloc(&d_off, c.experts * 4));
  CK(cudaMalloc(&d_rows, c.experts * 4));
  CK(cudaMemcpy(d_off, offs.data(), c.experts * 4, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(d_rows, sizes.data(), c.experts * 4, cudaMemcpyHostToDevice));
  Fill<<<512, 256>>>(x, size_t(c.m) * c.k, 1);
  Fill<<<512, 256>>>(g, size_t(c.m) * c.n, 2);
  CK(cudaMemset(dw, 0x7f, size_t(out_elems) * 2));  // poison
  small_k::Args a{x, g, dw, d_off, d_rows, c.k, c.n};
  CK(small_k::Run(a, c.experts, 0));
  CK(cudaDeviceSynchronize());
  bool ok = true;
  if (check) {
    float* ref;
    CK(cudaMalloc(&ref, size_t(out_elems) * 4));
    Ref<<<4096, 256>>>(x, g, d_off, d_rows, c.k, c.n, out_elems, ref);
    CK(cudaDeviceSynchronize());
    std::vector<uint16_t> got(out_elems);
    std::vector<float> want(out_elems);
    CK(cudaMemcpy(got.data(), dw, got.size() * 2, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(want.data(), ref, want.size() * 4, cudaMemcpyDeviceToHost));
    double max_err = 0, max_ref = 0;
    int64_t bad_zero = 0;
    for (int64_t i = 0; i < out_elems; ++i) {
      const uint32_t bits = uint32_t(got[i]) << 16;
      float f;
      std::memcpy(&f, &bits, 4);
      max_err = std::max(max_err, double(std::fabs(f - want[i])));
      max_ref = std::max(max_ref, double(std::fabs(want[i])));
      const int64_t e = i / (int64_t(c.k) * c.n);
      bad_zero += sizes[e] == 0 && got[i] != 0;
    }
    const double rel = max_err / std::max(1.0, max_ref);
    ok = rel < 1.0 / 128 && bad_zero == 0 && std::isfinite(rel);
    std::printf("CHECK %-12s %-7s max err %.3g (rel %.3g), nonzero in empty "
                "experts %lld: %s\n", c.name, skewed ? "skewed" : "uniform",
                max_err, rel, (long long)bad_zero, ok ? "ok" : "MISMATCH");
    CK(cudaFree(ref));
  }
  // Timing: 20 calls, cold-ish (each writes all of dW: far past L2).
  cudaEvent_t t0, t1;
  CK(cudaEventCreate(&t0));
  CK(cudaEventCreate(&t1));
  const int reps = 20;
  CK(cudaEventRecord(t0));
  for (int i = 0; i < reps; ++i) CK(small_k::Run(a, c.experts, 0));
  CK(cudaEventRecord(t1));
  CK(cudaEventSynchronize(t1));
  float ms_k = 0;
  CK(cudaEventElapsedTime(&ms_k, t0, t1));
  CK(cudaEventRecord(t0));
  for (int i = 0; i < reps; ++i)
    WriteOnly<<<132 * 8, 256>>>(reinterpret_cast<uint4*>(dw), out_elems / 8);
  CK(cudaEventRecord(t1));
  CK(cudaEventSynchronize(t1));
  float ms_w = 0;
  CK(cudaEventElapsedTime(&ms_w, t0, t1));
  const double bytes = double(out_elems) * 2;
  std::printf("TIME  %-12s %-7s E %d m %d K %d N %d (empty %d, most rows %d):"
              " %.3f ms (%.2f TB/s written), write-only %.3f ms (%.2f TB/s):"
              " %.2f of the floor\n", c.name, skewed ? "skewed" : "uniform",
              c.experts, c.m, c.k, c.n, empty, most, ms_k / reps,
              bytes / (ms_k / reps * 1e-3) / 1e12, ms_w / reps,
              bytes / (ms_w / reps * 1e-3) / 1e12, ms_w / ms_k);
  CK(cudaFree(x));
  CK(cudaFree(g));
  CK(cudaFree(dw));
  CK(cudaFree(d_off));
  CK(cudaFree(d_rows));
  return ok;
}

int main() {
  // Checked: small shapes with edge tiles (K, N not multiples of 128).
  const Case checks[] = {{"edges", 5, 300, 200, 136},
                         {"one_row", 7, 7, 264, 264},
                         {"tall", 3, 700, 136, 72}};
  bool ok = true;
  for (const Case& c : checks)
    for (bool skewed : {false, true}) ok &= RunCase(c, skewed, true);
  // Timed: the moe bench's decode cases (benchmarks/moe_peers.py).
  const Case timed[] = {{"decode_e64", 64, 512, 4096, 4096},
                        {"decode_e128", 128, 1024, 2048, 1536},
                        {"decode_e256", 256, 256, 7168, 2048}};
  for (const Case& c : timed)
    for (bool skewed : {false, true}) ok &= RunCase(c, skewed, false);
  std::printf(ok ? "ALL_OK\n" : "MISMATCH\n");
  return ok ? 0 : 1;
}
