// The small-group forward kernel for ragged_dot's forward where the groups
// are small (decode-sized MoE): out[rows of e] = X_e @ W[e] (NN, W of shape
// (E, K, N)) or X_e @ W[e]^T (NT, W of shape (E, N, K): ragged_dot's input
// gradient dX = dY W^T) for every expert e, X the (m x K) tokens with
// expert e's rows at [offset_e, offset_e + rows_e), out (m x N), bfloat16
// in and out, float32 accumulation.
//
// Why: the library's grouped CUTLASS kernel pads every expert's rows to its
// 128-row tile, so at decode sizes (1-16 rows an expert) more than 90% of
// its MMAs multiply zeros; the time is the weight stream either way, but
// the skewed decode forward streams slower (3.55 TB/s against 3.89 with
// uniform groups, benchmarks/results/2026-12-05-h200-efa90f3).  The kernel
// swaps the operands: the weights are the MMA's M (128 features a CTA, one
// expert), the tokens its N (8 a fragment), so an expert of r rows pads to
// a multiple of 8, not of 128, and an expert without rows reads nothing.
// Work items are (expert, chunk of 64 of its rows), found on the device
// from the row counts; an expert's chunks are adjacent in launch order, so
// a tall expert's weight tiles come from HBM once and from L2 after.
//
// The kernel was written here first; it is now the library's (kernels/
// small_group_fwd.h, the grouped tile small_groups), which this probe
// includes, writing the per-expert arrays the grouped pointer kernel
// writes in the library (shape (rows, N, K), none for an expert without
// rows; addresses; leading dimensions).  The probe checks it against a
// naive float32 kernel (uniform and skewed sizes with empty experts, odd N
// and K tails, tall experts of several chunks, a grid too small for the
// work items so that CTAs loop, NN and NT, and NN with ragged_dot's
// swiglu epilogue (out n / 2 wide: silu(h_2j) * h_2j+1, n / 2 not always
// a multiple of 8), out poisoned first, rows outside the groups
// untouched), reports the MMA padding (rows computed
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
#include <iterator>  // std::size
#include <random>
#include <string>
#include <vector>

#include "../cuda_check.h"
#include "../grouped_items.h"
#include "../sm90_tiles/fill.h"  // Fill: hashed bf16 in [-1, 1)
#include "kernels/small_group_fwd.h"  // the kernel

using T = __nv_bfloat16;

namespace small_fwd {

struct Args {
  const T* x;    // m x k, row-major (ld k)
  const T* w;    // NN: e x k x n (ld n); NT: e x n x k (ld k)
  T* out;        // m x n, row-major (ld n)
  const int* offsets;  // per expert: first row (host)
  const int* rows;     // per expert: rows (host)
  int k, n;
  bool trans_b;
  bool swiglu;  // NN, out n / 2 wide: silu(h_2j) * h_2j+1
};

// The device arrays of one case (../grouped_items.h); an expert without
// rows gets the shape (0, 0, 0), as plan.h GroupedItemOf gives it.
Items MakeItems(const Args& a, int experts) {
  std::vector<int32_t> shapes(3 * experts);
  std::vector<const void*> ptrs(4 * experts);
  std::vector<int64_t> strides(4 * experts);
  for (int e = 0; e < experts; ++e) {
    const bool any = a.rows[e] > 0;
    shapes[3 * e] = any ? a.rows[e] : 0;
    shapes[3 * e + 1] = any ? a.n : 0;
    shapes[3 * e + 2] = any ? a.k : 0;
    ptrs[e] = a.x + int64_t{a.offsets[e]} * a.k;
    ptrs[experts + e] = a.w + int64_t{e} * a.k * a.n;
    const int ldd = a.swiglu ? a.n / 2 : a.n;
    ptrs[2 * experts + e] = ptrs[3 * experts + e] =
        a.out + int64_t{a.offsets[e]} * ldd;
    strides[e] = a.k;
    strides[experts + e] = a.trans_b ? a.k : a.n;
    strides[2 * experts + e] = strides[3 * experts + e] = ldd;
  }
  return UploadItems(shapes, ptrs, strides);
}

namespace fwd = jax_dynoff::kernels::small_group_fwd;

template <typename Cfg>
std::string RunWith(const Args& a,
                    const jax_dynoff::kernels::GroupedLaunch& l) {
  return a.swiglu    ? fwd::Run<T, T, false, true, Cfg>(l)
         : a.trans_b ? fwd::Run<T, T, true, false, Cfg>(l)
                     : fwd::Run<T, T, false, false, Cfg>(l);
}

// The kernel's configurations (fwd::FwdConfig: features a CTA, stages),
// the shipped one first, each named from its type; g_cfg picks the one
// Run launches (--configs checks and times every one).
struct Config {
  std::string name;
  std::string (*run)(const Args&, const jax_dynoff::kernels::GroupedLaunch&);
};
template <typename Cfg>
Config ConfigOf() {
  return {"f" + std::to_string(Cfg::kTileF) + "s" +
              std::to_string(Cfg::kStages),
          &RunWith<Cfg>};
}
const Config kConfigs[] = {ConfigOf<fwd::Shipped>(),
                           ConfigOf<fwd::FwdConfig<128, 3>>(),
                           ConfigOf<fwd::FwdConfig<64, 4>>(),
                           ConfigOf<fwd::FwdConfig<64, 6>>(),
                           ConfigOf<fwd::FwdConfig<64, 3>>()};
int g_cfg = 0;

// K and N multiples of 8: every 16-byte chunk of a row lies inside it
// (the library's grouped path proves the same of its operands).  `m`: the
// bound on the rows the grid is sized by (the call's m; smaller, the grid
// has fewer CTAs than work items and they loop).
cudaError_t Run(const Args& a, const Items& it, int experts, int m,
                cudaStream_t stream) {
  if (a.k % 8 != 0 || a.n % 8 != 0) return cudaErrorInvalidValue;
  const jax_dynoff::kernels::GroupedLaunch l =
      LaunchOn(it, experts, m, a.n, stream);
  const std::string r = kConfigs[g_cfg].run(a, l);
  if (!r.empty()) {
    std::fprintf(stderr, "%s\n", r.c_str());
    return cudaErrorLaunchFailure;
  }
  return cudaGetLastError();
}

}  // namespace small_fwd

// h's element (row, nn) in float32: W[e] is k x n (NN) or n x k (NT).
__device__ float Dot(const T* x, const T* we, int row, int nn, int k, int n,
                     bool trans_b) {
  float s = 0.f;
  for (int kk = 0; kk < k; ++kk)
    s += __bfloat162float(x[int64_t(row) * k + kk]) *
         __bfloat162float(trans_b ? we[int64_t(nn) * k + kk]
                                  : we[int64_t(kk) * n + nn]);
  return s;
}

// out's element (row, j) of the groups in float32, one thread each (out
// is n wide, or n / 2 with swiglu: silu(h_2j) * h_2j+1); rows outside
// every group get NaN (not compared).
__global__ void Ref(const T* x, const T* w, const int* row_expert, int m,
                    int k, int n, bool trans_b, bool swiglu, float* ref) {
  const int out_n = swiglu ? n / 2 : n;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
       i < int64_t(m) * out_n; i += int64_t(gridDim.x) * blockDim.x) {
    const int row = int(i / out_n), j = int(i % out_n), e = row_expert[row];
    if (e < 0) { ref[i] = nanf(""); continue; }
    const T* we = w + int64_t(e) * k * n;
    if (swiglu) {
      const float g = Dot(x, we, row, 2 * j, k, n, false);
      const float u = Dot(x, we, row, 2 * j + 1, k, n, false);
      ref[i] = g / (1.f + expf(-g)) * u;
    } else {
      ref[i] = Dot(x, we, row, j, k, n, trans_b);
    }
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

// Rows per expert: "uniform", "skewed" (Dirichlet(0.3), floored, the
// remainder to the largest, as moe_peers.py draws them: many experts
// empty, a few tall), "half" (uniform over the first m / 2 rows: the rest
// of out is outside every group) or "empty" (no expert has a row).
std::vector<int> Sizes(const char* kind, int experts, int m, uint32_t seed) {
  std::vector<int> s(experts, 0);
  if (std::strcmp(kind, "empty") == 0) return s;
  if (std::strcmp(kind, "half") == 0) m /= 2;
  if (std::strcmp(kind, "skewed") != 0) {
    for (int e = 0; e < experts; ++e) s[e] = m / experts + (e < m % experts);
    return s;
  }
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
// stay poisoned.  `tight`: the grid is sized for m = 1 (experts + 1 work
// items), fewer CTAs than work items: they loop.
enum Mode { kNN, kNT, kSwiglu };

bool Case(const char* name, const char* kind, int experts, int m, int k, int n,
          Mode mode, bool check, bool tight = false, uint32_t seed = 7) {
  const bool trans_b = mode == kNT, swiglu = mode == kSwiglu;
  const int out_n = swiglu ? n / 2 : n;
  const std::vector<int> sizes = Sizes(kind, experts, m, seed);
  std::vector<int> offsets(experts);
  int64_t rows_computed = 0, rows_wanted = 0, used = 0, empty = 0, most = 0;
  for (int e = 0, o = 0; e < experts; ++e) {
    offsets[e] = o;
    o += sizes[e];
    rows_computed += (sizes[e] + 7) / 8 * 8;
    rows_wanted += sizes[e];
    used += sizes[e] > 0;
    empty += sizes[e] == 0;
    most = std::max<int64_t>(most, sizes[e]);
  }
  const int m_pad = m + 5;  // rows past the groups
  T *x, *w, *out;
  int* d_rows;
  CK(cudaMalloc(&x, size_t(m_pad) * k * 2));
  CK(cudaMalloc(&w, size_t(experts) * k * n * 2));
  CK(cudaMalloc(&out, size_t(m_pad) * out_n * 2));
  CK(cudaMalloc(&d_rows, experts * 4));
  CK(cudaMemcpy(d_rows, sizes.data(), experts * 4, cudaMemcpyHostToDevice));
  Fill<<<1024, 256>>>(x, size_t(m_pad) * k, 11);
  Fill<<<1024, 256>>>(w, size_t(experts) * k * n, 12);
  CK(cudaMemset(out, 0x7f, size_t(m_pad) * out_n * 2));  // poison
  const small_fwd::Args a{x, w, out, offsets.data(), sizes.data(), k, n,
                          trans_b, swiglu};
  const Items items = small_fwd::MakeItems(a, experts);
  const char* layout = swiglu ? "NN swiglu" : trans_b ? "NT" : "NN";
  bool ok = true;
  if (check) {
    std::vector<int> row_expert(m_pad, -1);
    for (int e = 0; e < experts; ++e)
      for (int r = 0; r < sizes[e]; ++r) row_expert[offsets[e] + r] = e;
    int* d_row_expert;
    CK(cudaMalloc(&d_row_expert, m_pad * 4));
    CK(cudaMemcpy(d_row_expert, row_expert.data(), m_pad * 4,
                  cudaMemcpyHostToDevice));
    float* ref;
    CK(cudaMalloc(&ref, size_t(m_pad) * out_n * 4));
    CK(small_fwd::Run(a, items, experts, tight ? 1 : m, 0));
    Ref<<<2048, 256>>>(x, w, d_row_expert, m_pad, k, n, trans_b, swiglu,
                       ref);
    CK(cudaDeviceSynchronize());
    std::vector<uint16_t> h(size_t(m_pad) * out_n);
    std::vector<float> hr(size_t(m_pad) * out_n);
    CK(cudaMemcpy(h.data(), out, h.size() * 2, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(hr.data(), ref, hr.size() * 4, cudaMemcpyDeviceToHost));
    double err = 0, scale = 0;
    int64_t touched = 0, bad = 0;
    for (size_t i = 0; i < h.size(); ++i) {
      if (row_expert[i / out_n] < 0) {
        touched += h[i] != 0x7f7f;
        continue;
      }
      uint32_t bits = uint32_t(h[i]) << 16;
      float f;
      std::memcpy(&f, &bits, 4);
      bad += !std::isfinite(f) || h[i] == 0x7f7f;  // never written
      err = std::max(err, double(std::fabs(f - hr[i])));
      scale = std::max(scale, double(std::fabs(hr[i])));
    }
    ok = touched == 0 && bad == 0 && err <= 1e-2 * scale + 1e-2;
    std::printf("CHECK %s %-12s %s %-7s E %d m %d K %d N %d%s: max err %.3g "
                "(max |ref| %.3g), %lld unwritten or not finite, %lld changed "
                "outside the groups: %s\n",
                small_fwd::kConfigs[small_fwd::g_cfg].name.c_str(), name, layout, kind,
                experts, m, k, n,
                tight ? " (tight grid)" : "", err, scale,
                static_cast<long long>(bad), static_cast<long long>(touched),
                ok ? "ok" : "FAIL");
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
    const double ms =
        time_ms([&] { CK(small_fwd::Run(a, items, experts, m, st)); });
    const double floor_ms = time_ms([&] {
      ReadOnly<<<528, 256, 0, st>>>(reinterpret_cast<const uint4*>(w), d_rows,
                                    int64_t(k) * n / 8, experts, sink);
    });
    const double bytes = double(used) * k * n * 2;
    std::printf("TIME  %s %-12s %s %-7s/%u E %d m %d K %d N %d (empty %lld, "
                "most rows %lld, padding %.1f%%): %.3f ms (%.2f TB/s of "
                "weights), read-only %.3f ms (%.2f TB/s): %.2f of the floor\n",
                small_fwd::kConfigs[small_fwd::g_cfg].name.c_str(), name, layout, kind,
                seed, experts, m, k, n,
                static_cast<long long>(empty), static_cast<long long>(most),
                rows_computed > 0
                    ? 100.0 * (rows_computed - rows_wanted) / rows_computed
                    : 0.0,
                ms, bytes / ms / 1e9, floor_ms, bytes / floor_ms / 1e9,
                floor_ms / ms);
    cudaFree(sink);
    cudaStreamDestroy(st);
  }
  FreeItems(items);
  cudaFree(x); cudaFree(w); cudaFree(out); cudaFree(d_rows);
  return ok;
}

// Every check case of main, for the configuration in g_cfg.
bool CheckAll() {
  bool ok = true;
  for (const Mode mode : {kNN, kNT, kSwiglu}) {
    for (const char* kind : {"uniform", "skewed", "half"}) {
      ok &= Case("edges", kind, 5, 300, 200, 136, mode, true);  // K, N tails
      ok &= Case("one_row", kind, 7, 7, 264, 264, mode, true);
      ok &= Case("tall", kind, 3, 200, 136, 72, mode, true);  // chunks
      ok &= Case("decode_e64", kind, 64, 512, 512, 1024, mode, true);
    }
    // Experts of hundreds of rows (several 64-row chunks, one with a
    // 1-row tail), and more items than one scan window of the search.
    ok &= Case("tall_chunks", "uniform", 2, 257, 128, 200, mode, true);
    ok &= Case("many_items", "skewed", 600, 1200, 64, 136, mode, true);
    ok &= Case("no_rows", "empty", 9, 40, 72, 136, mode, true);
    // A grid of experts + 1 = 17 CTAs a feature block for at least
    // ceil(2000 / 64) = 32 work items: CTAs take several.
    ok &= Case("tight_grid", "skewed", 16, 2000, 136, 264, mode, true,
               true);
  }
  return ok;
}

// --configs: every configuration checked, then timed on the decode layers
// of benchmarks/moe_peers.py (NN forward, NT input gradient), uniform and
// skewed (three draws), each case's configurations back to back.
int Configs() {
  constexpr int kCount = std::size(small_fwd::kConfigs);
  bool ok = true;
  for (int c = 0; c < kCount; ++c) {
    small_fwd::g_cfg = c;
    ok &= CheckAll();
  }
  if (!ok) {
    std::printf("SOME CHECKS FAILED\n");
    return 1;
  }
  struct Layer { const char* name; int experts, m, k, n; };
  const Layer layers[] = {{"decode_e64", 64, 512, 4096, 4096},
                          {"decode_e128", 128, 1024, 2048, 1536},
                          {"decode_e256", 256, 256, 7168, 2048},
                          {"e64_m128", 64, 128, 4096, 4096}};
  for (const Mode mode : {kNN, kNT})
    for (const Layer& L : layers)
      for (const char* kind : {"uniform", "skewed"})
        for (uint32_t seed : {7u, 8u, 9u}) {
          if (std::strcmp(kind, "uniform") == 0 && seed != 7) continue;
          for (int c = 0; c < kCount; ++c) {
            small_fwd::g_cfg = c;
            Case(L.name, kind, L.experts, L.m, L.k, L.n, mode, false, false,
                 seed);
          }
        }
  std::printf("ALL_OK\n");
  return 0;
}

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "--configs") == 0) return Configs();
  const bool ok = CheckAll();
  if (!ok) {
    std::printf("SOME CHECKS FAILED\n");
    return 1;
  }
  // The decode layers of benchmarks/moe_peers.py, forward (NN) and input
  // gradient (NT, the same weights' shapes transposed); then E64 at 16,
  // 32 and 64 rows an expert on average: both sides of the planner's bound
  // (plan.h kSmallGroupFwdMaxMeanRows = 16), where benchmarks/
  // moe_tile_ab.py times the CUTLASS tiles beside it.
  for (const Mode mode : {kNN, kNT, kSwiglu})
    for (const char* kind : {"uniform", "skewed"}) {
      Case("decode_e64", kind, 64, 512, 4096, 4096, mode, false);
      Case("decode_e128", kind, 128, 1024, 2048, 1536, mode, false);
      Case("decode_e256", kind, 256, 256, 7168, 2048, mode, false);
      for (const int m : {1024, 2048, 4096})
        Case("bound_e64", kind, 64, m, 4096, 4096, mode, false);
    }
  std::printf("ALL_OK\n");
  return 0;
}
