// The grouped GEMM with its gated activation fused (the swiglu epilogue of
// ffi/kernels/sm90_grouped.h) against the library's grouped kernel (the
// wide tile) followed by a separate activation kernel, on MoE up
// projections of real layers (W: E x K x 2I, gate and up columns
// interleaved), uniform and skewed group sizes (some groups empty).
//
// Checks: sampled rows of every group against a naive float32 kernel
// (silu(x w_gate) * (x w_up) from the same bfloat16 operands), both paths;
// out poisoned first, its rows past the groups left bit for bit, every row
// inside written.  Times: CUDA events over back-to-back launches (prepared
// once), median of 5.  Build and run (sm_90a; the nvidia-cutlass wheel's
// headers):
//   CU=$(python3 -c "import cutlass_library, os; print(os.path.dirname(cutlass_library.__file__))")/source
//   nvcc -O3 -DNDEBUG -std=c++17 --expt-relaxed-constexpr \
//     -gencode=arch=compute_90a,code=sm_90a -I ffi -I $CU/include \
//     -I $CU/tools/util/include benchmarks/grouped_glu/probe.cu \
//     -o /tmp/glu_probe && /tmp/glu_probe
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "../cuda_check.h"
#include "../sm90_tiles/fill.h"
#include "kernels/sm90_grouped.h"

using namespace jax_dynoff::kernels;
using T = __nv_bfloat16;
using CT = cutlass::bfloat16_t;
using Fused = Sm90GroupedGemm<Sm90GroupedWideConfig, CT, CT,
                              cutlass::layout::RowMajor,
                              cutlass::layout::RowMajor,
                              jax_dynoff::Epilogue::kSwiglu>;
using Plain = Sm90GroupedGemm<Sm90GroupedWideConfig, CT, CT,
                              cutlass::layout::RowMajor,
                              cutlass::layout::RowMajor>;

// out = silu(h[:, 0::2]) * h[:, 1::2], h row-major (rows x 2i).
__global__ void Glu(const T* h, T* out, int64_t rows, int i) {
  const int64_t n = rows * i;
  for (int64_t q = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; q < n;
       q += int64_t{gridDim.x} * blockDim.x) {
    const __nv_bfloat162 p = reinterpret_cast<const __nv_bfloat162*>(h)[q];
    const float g = __bfloat162float(p.x), u = __bfloat162float(p.y);
    out[q] = __float2bfloat16_rn(g / (1.f + __expf(-g)) * u);
  }
}

// ref[r, j] for the sampled rows: float32 sums of the bfloat16 products.
__global__ void RefGlu(const T* x, const T* w, const int* rows,
                       const int* groups, int nrows, int k, int n,
                       float* ref) {
  const int i = n / 2;
  for (int64_t q = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
       q < int64_t{nrows} * i; q += int64_t{gridDim.x} * blockDim.x) {
    const int r = static_cast<int>(q / i), j = static_cast<int>(q % i);
    const T* xr = x + int64_t{rows[r]} * k;
    const T* wg = w + int64_t{groups[r]} * k * n + 2 * j;
    float g = 0.f, u = 0.f;
    for (int kk = 0; kk < k; ++kk) {
      const float xv = __bfloat162float(xr[kk]);
      g += xv * __bfloat162float(wg[int64_t{kk} * n]);
      u += xv * __bfloat162float(wg[int64_t{kk} * n + 1]);
    }
    ref[q] = g / (1.f + expf(-g)) * u;
  }
}

static std::vector<int> Sizes(bool skewed, int e, int t) {
  std::vector<int> s(e, t / e);
  if (!skewed) {
    for (int g = 0; g < t % e; ++g) ++s[g];
    return s;
  }
  std::mt19937 rng(7);
  std::gamma_distribution<double> gam(0.3, 1.0);  // Dirichlet(0.3)
  std::vector<double> p(e);
  double sum = 0;
  for (double& v : p) sum += (v = gam(rng));
  int used = 0, big = 0;
  for (int g = 0; g < e; ++g) {
    s[g] = static_cast<int>(std::floor(p[g] / sum * t));
    used += s[g];
    if (s[g] > s[big]) big = g;
  }
  s[big] += t - used;
  return s;
}

template <typename Launch>
static float TimeMs(Launch launch, int iters) {
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  for (int i = 0; i < 3; ++i) launch();
  std::vector<float> ts;
  for (int r = 0; r < 5; ++r) {
    CK(cudaEventRecord(e0));
    for (int i = 0; i < iters; ++i) launch();
    CK(cudaEventRecord(e1));
    CK(cudaEventSynchronize(e1));
    float ms;
    CK(cudaEventElapsedTime(&ms, e0, e1));
    ts.push_back(ms / iters);
  }
  CK(cudaGetLastError());
  std::sort(ts.begin(), ts.end());
  return ts[2];
}

struct Case { const char* name; int e, t, k, n; };

static bool RunCase(const Case& c, bool skewed, int sms) {
  const int i = c.n / 2;
  const std::vector<int> sizes = Sizes(skewed, c.e, c.t);
  std::vector<int> offs(c.e);
  int empty = 0;
  for (int g = 0, o = 0; g < c.e; o += sizes[g], ++g) {
    offs[g] = o;
    empty += sizes[g] == 0;
  }
  const int pad_rows = 8;  // rows past the groups: must stay poisoned
  T *x, *w, *h, *out;
  CK(cudaMalloc(&x, sizeof(T) * c.t * c.k));
  CK(cudaMalloc(&w, sizeof(T) * int64_t{c.e} * c.k * c.n));
  CK(cudaMalloc(&h, sizeof(T) * int64_t{c.t} * c.n));
  CK(cudaMalloc(&out, sizeof(T) * int64_t{c.t + pad_rows} * i));
  Fill<<<1024, 256>>>(x, size_t{1} * c.t * c.k, 1u);
  Fill<<<1024, 256>>>(w, size_t{1} * c.e * c.k * c.n, 2u);
  CK(cudaGetLastError());

  // Per group: shape (m, 2i, k); A, B, D addresses; leading dimensions.
  std::vector<int> shapes(3 * c.e);
  std::vector<const void*> pa(c.e), pb(c.e);
  std::vector<void*> pd_fused(c.e), pd_plain(c.e);
  std::vector<int64_t> strides(5 * c.e);  // a, b, c, d fused, d plain
  for (int g = 0; g < c.e; ++g) {
    shapes[3 * g] = sizes[g]; shapes[3 * g + 1] = c.n; shapes[3 * g + 2] = c.k;
    pa[g] = x + int64_t{offs[g]} * c.k;
    pb[g] = w + int64_t{g} * c.k * c.n;
    pd_fused[g] = out + int64_t{offs[g]} * i;
    pd_plain[g] = h + int64_t{offs[g]} * c.n;
    strides[g] = c.k; strides[c.e + g] = c.n; strides[2 * c.e + g] = i;
    strides[3 * c.e + g] = i; strides[4 * c.e + g] = c.n;
  }
  void *d_shapes, *d_pa, *d_pb, *d_pdf, *d_pdp, *d_strides;
  CK(cudaMalloc(&d_shapes, shapes.size() * 4));
  CK(cudaMalloc(&d_pa, c.e * 8)); CK(cudaMalloc(&d_pb, c.e * 8));
  CK(cudaMalloc(&d_pdf, c.e * 8)); CK(cudaMalloc(&d_pdp, c.e * 8));
  CK(cudaMalloc(&d_strides, strides.size() * 8));
  CK(cudaMemcpy(d_shapes, shapes.data(), shapes.size() * 4, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(d_pa, pa.data(), c.e * 8, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(d_pb, pb.data(), c.e * 8, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(d_pdf, pd_fused.data(), c.e * 8, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(d_pdp, pd_plain.data(), c.e * 8, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(d_strides, strides.data(), strides.size() * 8, cudaMemcpyHostToDevice));
  const int64_t* st = static_cast<const int64_t*>(d_strides);

  GroupedLaunch lf;
  lf.groups = c.e; lf.shapes = d_shapes;
  lf.ptr_a = static_cast<const void* const*>(d_pa);
  lf.ptr_b = static_cast<const void* const*>(d_pb);
  lf.ptr_d = static_cast<void* const*>(d_pdf);
  lf.stride_a = st; lf.stride_b = st + c.e; lf.stride_c = st + 2 * c.e;
  lf.stride_d = st + 3 * c.e;
  lf.sm_count = sms;
  GroupedLaunch lp = lf;
  lp.ptr_d = static_cast<void* const*>(d_pdp);
  lp.stride_d = st + 4 * c.e;
  const size_t ws = std::max(Fused::Workspace(lf), Plain::Workspace(lp));
  void* d_ws;
  CK(cudaMalloc(&d_ws, std::max<size_t>(ws, 256)));
  lf.workspace = lp.workspace = d_ws;
  lf.workspace_bytes = lp.workspace_bytes = ws;

  PreparedLaunch fused, plain;
  std::string r = PrepareSm90Gemm<Fused::Gemm>("fused", Fused::Args(lf), d_ws,
                                               nullptr, 0, &fused);
  if (r.empty())
    r = PrepareSm90Gemm<Plain::Gemm>("plain", Plain::Args(lp), d_ws, nullptr,
                                     0, &plain);
  if (!r.empty()) {
    std::printf("%s: %s\n", c.name, r.c_str());
    return false;
  }

  // Poison, run each once, check.
  CK(cudaMemset(out, 0xff, sizeof(T) * int64_t{c.t + pad_rows} * i));
  if (!(r = LaunchPrepared(fused, nullptr)).empty()) {
    std::printf("%s: fused launch: %s\n", c.name, r.c_str());
    return false;
  }
  CK(cudaDeviceSynchronize());
  std::vector<uint16_t> got(int64_t{c.t + pad_rows} * i);
  CK(cudaMemcpy(got.data(), out, got.size() * 2, cudaMemcpyDeviceToHost));
  int64_t unwritten = 0, pad_changed = 0;
  for (int64_t q = 0; q < int64_t{c.t} * i; ++q) unwritten += got[q] == 0xffff;
  for (int64_t q = int64_t{c.t} * i; q < int64_t(got.size()); ++q)
    pad_changed += got[q] != 0xffff;

  T* out2;
  CK(cudaMalloc(&out2, sizeof(T) * int64_t{c.t} * i));
  const int glu_blocks = 4 * sms;
  auto unfused = [&] {
    const std::string e = LaunchPrepared(plain, nullptr);
    if (!e.empty()) { std::printf("plain launch: %s\n", e.c_str()); std::exit(1); }
    Glu<<<glu_blocks, 256>>>(h, out2, c.t, i);
  };
  unfused();
  CK(cudaDeviceSynchronize());

  // Sampled rows: first, middle and last of every non-empty group.
  std::vector<int> rows, grp;
  for (int g = 0; g < c.e; ++g) {
    if (sizes[g] == 0) continue;
    for (int q : {0, sizes[g] / 2, sizes[g] - 1}) {
      if (!rows.empty() && rows.back() == offs[g] + q) continue;
      rows.push_back(offs[g] + q);
      grp.push_back(g);
    }
  }
  const int nr = static_cast<int>(rows.size());
  int *d_rows, *d_grp;
  float* d_ref;
  CK(cudaMalloc(&d_rows, nr * 4)); CK(cudaMalloc(&d_grp, nr * 4));
  CK(cudaMalloc(&d_ref, sizeof(float) * nr * i));
  CK(cudaMemcpy(d_rows, rows.data(), nr * 4, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(d_grp, grp.data(), nr * 4, cudaMemcpyHostToDevice));
  RefGlu<<<4 * sms, 256>>>(x, w, d_rows, d_grp, nr, c.k, c.n, d_ref);
  CK(cudaDeviceSynchronize());
  std::vector<float> ref(int64_t{nr} * i);
  CK(cudaMemcpy(ref.data(), d_ref, ref.size() * 4, cudaMemcpyDeviceToHost));
  std::vector<uint16_t> got2(int64_t{c.t} * i);
  CK(cudaMemcpy(got2.data(), out2, got2.size() * 2, cudaMemcpyDeviceToHost));
  auto bf = [](uint16_t b) {
    uint32_t u = uint32_t{b} << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  };
  double max_ref = 0, err_fused = 0, err_plain = 0;
  for (int rr = 0; rr < nr; ++rr)
    for (int j = 0; j < i; ++j) {
      const double v = ref[int64_t{rr} * i + j];
      const int64_t q = int64_t{rows[rr]} * i + j;
      max_ref = std::max(max_ref, std::fabs(v));
      err_fused = std::max(err_fused, std::fabs(bf(got[q]) - v));
      err_plain = std::max(err_plain, std::fabs(bf(got2[q]) - v));
      if (std::isnan(bf(got[q]))) err_fused = INFINITY;
    }
  const bool ok = unwritten == 0 && pad_changed == 0 &&
                  err_fused <= 1e-2 * max_ref && err_plain <= 1e-2 * max_ref;

  const double flops = 2.0 * c.t * c.k * c.n;
  const int iters = std::max(3, std::min(200, static_cast<int>(3e12 / flops)));
  const float t_fused = TimeMs([&] { LaunchPrepared(fused, nullptr); }, iters);
  const float t_gemm = TimeMs([&] { LaunchPrepared(plain, nullptr); }, iters);
  const float t_unfused = TimeMs(unfused, iters);
  std::printf(
      "%-15s %-7s E%-3d %6dx%-5d->%-5d (%3d empty) | fused %8.4f ms  "
      "gemm+act %8.4f ms (gemm %8.4f) | unfused/fused %.3f | %6.1f TFLOP/s | "
      "err fused %.1e plain %.1e (max|ref| %.3g) unwritten %lld pad %lld: %s\n",
      c.name, skewed ? "skewed" : "uniform", c.e, c.t, c.k, c.n, empty,
      t_fused, t_unfused, t_gemm, t_unfused / t_fused, flops / t_fused / 1e9,
      err_fused / max_ref, err_plain / max_ref, max_ref,
      static_cast<long long>(unwritten), static_cast<long long>(pad_changed),
      ok ? "ok" : "FAILED");
  std::fflush(stdout);
  for (void* p : {(void*)x, (void*)w, (void*)h, (void*)out, (void*)out2, d_ws,
                  d_shapes, d_pa, d_pb, d_pdf, d_pdp, d_strides,
                  (void*)d_rows, (void*)d_grp, (void*)d_ref})
    CK(cudaFree(p));
  return ok;
}

int main(int argc, char** argv) {
  int sms = 0;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  // (name, experts, rows, K, 2I): the up projections of moe_peers.py's
  // layers with gate and up together.
  const Case cases[] = {
      {"mixtral_up", 8, 8192, 4096, 2 * 14336},
      {"qwen3_30b_up", 128, 32768, 2048, 1536},
      {"deepseek_v3_up", 256, 32768, 7168, 4096},
      {"decode_e64", 64, 512, 4096, 4096},
      {"decode_e256", 256, 256, 7168, 2048},
      {"odd", 5, 1000, 200, 2 * 136},  // tails in every dimension
  };
  const char* only = argc > 1 ? argv[1] : nullptr;
  bool all_ok = true;
  for (const Case& c : cases) {
    if (only && std::strstr(only, c.name) == nullptr) continue;
    for (bool skewed : {false, true}) all_ok &= RunCase(c, skewed, sms);
  }
  std::printf("%s\n", all_ok ? "ALL OK" : "SOME FAILED");
  return all_ok ? 0 : 1;
}
