// The small-group weight-gradient kernel for ragged_dot's weight gradient
// where the groups are small (decode-sized MoE): dW[e] = X_e^T @ G_e for every expert e, X_e and
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
// beside a kernel that only writes the same bytes (the floor).  The kernel
// was written here first; it is now the library's (kernels/
// small_group_grad.h, the grouped tile small_groups), which this probe
// includes, writing the per-expert arrays the grouped pointer kernel
// writes in the library.  Build and run (offline, sm_90a; no JAX, no
// CUTLASS):
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
#include "../grouped_items.h"
#include "../sm90_tiles/fill.h"
#include "kernels/small_group_grad.h"  // the kernel

using T = __nv_bfloat16;

namespace small_k {

// The kernel is the library's (kernels/small_group_grad.h): it reads each
// expert's shape (m = K, n = N, k = its rows), operand addresses and
// leading dimensions from device arrays, as the grouped pointer kernel
// writes them; here the host writes them once.
struct Args {
  const T* x;  // m x k, row-major (ld k)
  const T* g;  // m x n, row-major (ld n)
  T* dw;       // e x k x n
  const int* offsets;  // per expert: first row (host)
  const int* rows;     // per expert: rows (0: the tile is zeros) (host)
  int k, n;
};

// The device arrays of one case (../grouped_items.h).
Items MakeItems(const Args& a, int experts) {
  std::vector<int32_t> shapes(3 * experts);
  std::vector<const void*> ptrs(4 * experts);
  std::vector<int64_t> strides(4 * experts);
  for (int e = 0; e < experts; ++e) {
    shapes[3 * e] = a.k;
    shapes[3 * e + 1] = a.n;
    shapes[3 * e + 2] = a.rows[e];
    ptrs[e] = a.x + int64_t{a.offsets[e]} * a.k;
    ptrs[experts + e] = a.g + int64_t{a.offsets[e]} * a.n;
    ptrs[2 * experts + e] = ptrs[3 * experts + e] =
        a.dw + int64_t{e} * a.k * a.n;
    strides[e] = a.k;
    strides[experts + e] = a.n;
    strides[2 * experts + e] = strides[3 * experts + e] = a.n;
  }
  return UploadItems(shapes, ptrs, strides);
}

// K and N multiples of 8: every 16-byte chunk of a row lies inside it
// (the library's grouped path proves the same of its operands).
cudaError_t Run(const Args& a, const Items& it, int experts,
                cudaStream_t stream) {
  if (a.k % 8 != 0 || a.n % 8 != 0) return cudaErrorInvalidValue;
  const jax_dynoff::kernels::GroupedLaunch l =
      LaunchOn(it, experts, a.k, a.n, stream);
  const std::string r =
      jax_dynoff::kernels::small_group_grad::Run<T, T>(l);
  if (!r.empty()) {
    std::fprintf(stderr, "%s\n", r.c_str());
    return cudaErrorLaunchFailure;
  }
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
  small_k::Args a{x, g, dw, offs.data(), sizes.data(), c.k, c.n};
  const Items items = small_k::MakeItems(a, c.experts);
  CK(small_k::Run(a, items, c.experts, 0));
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
  for (int i = 0; i < reps; ++i) CK(small_k::Run(a, items, c.experts, 0));
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
  FreeItems(items);
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
