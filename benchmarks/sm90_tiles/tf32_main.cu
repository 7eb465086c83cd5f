// Float32 sweep driver: for each square size, cuBLAS at TF32 (where built
// with it) and every candidate of tf32_registry.h (build_tf32.sh) in the
// library's tile order and under every swizzle / raster order, in `kRounds`
// interleaved rounds (each round visits every candidate once, so all share
// the H200's clock drift); then per size the medians, fastest first, with
// cublas/this.  In the first round each candidate's D is compared with
// cuBLAS's (max |diff| / max |D|): a fast but wrong configuration would
// otherwise look like a win.
//   tf32_sweep [--own-order] [M ...]   m = n = k = M (default 2048 4096 8192)
// --own-order: the library's tile order only (no swizzle / raster sweep).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "cublas_dense.h"
#include "tf32_registry.h"

namespace {
constexpr int kRounds = 3;
// Relative error above which a candidate is marked WRONG: two TF32 GEMMs
// differ by ~1e-4 of max |D| at these sizes; a wrong one by ~1.
constexpr float kWrong = 1e-2f;
using sweep::Median;

// Deterministic float32 data in [-1, 1) (fill.h's hash, float32 out).
__global__ void FillF32(float* x, size_t n, unsigned seed) {
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += gridDim.x * blockDim.x) {
    unsigned h = (unsigned)i * 2654435761u ^ seed;
    h ^= h >> 13; h *= 0x5bd1e995; h ^= h >> 15;
    x[i] = ((h & 0xffff) / 32768.0f) - 1.0f;
  }
}

// *out = max |x - y| (y null: max |x|); NaN counts as infinite.  Non-negative
// floats order as their bits, so an unsigned atomicMax takes the maximum.
__global__ void MaxAbsDiff(const float* x, const float* y, size_t n,
                           unsigned* out) {
  float e = 0.f;
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += gridDim.x * blockDim.x) {
    float v = fabsf(y ? x[i] - y[i] : x[i]);
    e = v == v ? fmaxf(e, v) : INFINITY;
  }
  atomicMax(out, __float_as_uint(e));
}

float MaxAbs(const float* x, const float* y, size_t n, unsigned* scratch,
             cudaStream_t s) {
  cudaMemsetAsync(scratch, 0, sizeof(unsigned), s);
  MaxAbsDiff<<<1024, 256, 0, s>>>(x, y, n, scratch);
  unsigned bits = 0;
  cudaMemcpyAsync(&bits, scratch, sizeof(bits), cudaMemcpyDeviceToHost, s);
  cudaStreamSynchronize(s);
  float v;
  std::memcpy(&v, &bits, sizeof(v));
  return v;
}

// The orders timed: the library's (swizzle 0), then CUTLASS's swizzles with
// raster along M' (= n of D: the transposed problem's M) or N' (= m).
struct Order { int swizzle, raster; };
std::vector<Order> Orders() {
  std::vector<Order> o{{0, 0}};
  for (int sw : {1, 2, 4, 8})
    for (int r : {0, 1}) o.push_back({sw, r});
  return o;
}
std::string OrderName(Order o) {
  if (o.swizzle == 0) return " own order";
  return " swz " + std::to_string(o.swizzle) + (o.raster ? " along m" : " along n");
}
}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IONBF, 0);  // partial output survives a kill
  std::vector<int> sizes;
  bool own_order_only = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--own-order") == 0) {
      own_order_only = true;
      continue;
    }
    const int m = std::atoi(argv[i]);
    if (m <= 0 || m % 4) {  // TMA: 16-byte rows
      std::fprintf(stderr, "tf32_sweep: size %s: not a positive multiple of 4\n",
                   argv[i]);
      return 2;
    }
    sizes.push_back(m);
  }
  if (sizes.empty()) sizes = {2048, 4096, 8192};

  // The candidates are built for sm_90a only: say so rather than time
  // launch errors.
  int devices = 0;
  cudaError_t e = cudaGetDeviceCount(&devices);
  if (e != cudaSuccess || devices == 0) {
    std::fprintf(stderr, "tf32_sweep: no CUDA device (%s)\n",
                 e != cudaSuccess ? cudaGetErrorString(e) : "none found");
    return 1;
  }
  cudaDeviceProp prop;
  cudaGetDeviceProperties(&prop, 0);
  if (prop.major != 9 || prop.minor != 0) {
    std::fprintf(stderr, "tf32_sweep: device 0 is %s (sm_%d%d), not sm_90\n",
                 prop.name, prop.major, prop.minor);
    return 1;
  }
  const int sms = prop.multiProcessorCount;
  cudaStream_t s;
  cudaStreamCreate(&s);

  size_t maxe = 0;
  for (int m : sizes) maxe = std::max(maxe, size_t(m) * m);
  float *a, *b, *d, *ref;
  unsigned* scratch;
  cudaMalloc(&a, maxe * 4); cudaMalloc(&b, maxe * 4);
  cudaMalloc(&d, maxe * 4); cudaMalloc(&ref, maxe * 4);
  cudaMalloc(&scratch, sizeof(unsigned));
  size_t ws_bytes = size_t(16) << 20;
  void* ws;
  cudaMalloc(&ws, ws_bytes);
  if ((e = cudaGetLastError()) != cudaSuccess) {
    std::fprintf(stderr, "tf32_sweep: allocation: %s\n", cudaGetErrorString(e));
    return 1;
  }
#ifdef WITH_CUBLAS
  const CublasDense cublas(s);
#endif
  std::vector<Order> orders = Orders();
  if (own_order_only) orders.resize(1);
  printf("%s, %d SMs; %d candidates; tiles and clusters as in "
         "sm90_direct_tf32.h's Configs: (n, m, k) of D^T = B^T A^T\n",
         prop.name, sms, sweep::kNumTf32);
  for (int c = 0; c < sweep::kNumTf32; ++c)
    printf("  %-28s %d mainloop stages\n", sweep::kTf32[c]->name,
           sweep::kTf32[c]->stages);

  for (int m : sizes) {
    const int n = m, k = m;
    const size_t mk = size_t(m) * k, kn = size_t(k) * n, mn = size_t(m) * n;
    FillF32<<<1024, 256, 0, s>>>(a, mk, 1);
    FillF32<<<1024, 256, 0, s>>>(b, kn, 2);
    const double flops = 2.0 * m * n * k;
    sweep::Problem p{};
    p.m = m; p.n = n; p.k = k;
    p.a = a; p.b = b; p.d = d;
    p.ws = ws; p.ws_bytes = ws_bytes; p.sms = sms; p.stream = s;

    float ref_max = 0.f;  // 0: no reference (built without cuBLAS)
#ifdef WITH_CUBLAS
    cublas(m, n, k, a, b, ref, CUDA_R_32F);
    ref_max = MaxAbs(ref, nullptr, mn, scratch, s);
#endif
    std::map<std::string, std::vector<float>> all;
    std::map<std::string, float> err;  // relative to max |D|
    for (int round = 0; round < kRounds; ++round) {
#ifdef WITH_CUBLAS
      {
        CublasDense::Run run{cublas, m, n, k, a, b, d, CUDA_R_32F};
        const float ms = sweep::TimeGemm(run, 0, p, false);
        all["cublas"].push_back(ms);
        printf("%d^3 round %d %-36s %8.4f ms  %6.1f TFLOP/s\n", m, round,
               "cublas", ms, ms > 0 ? flops / ms / 1e9 : 0.0);
      }
#endif
      for (int c = 0; c < sweep::kNumTf32; ++c)
        for (Order o : orders) {
          const std::string name = sweep::kTf32[c]->name + OrderName(o);
          const bool check = round == 0 && ref_max > 0;
          // NaN in D: a candidate that writes nothing fails the check.
          if (check) cudaMemsetAsync(d, 0xff, mn * 4, s);
          const float ms = sweep::kTf32[c]->fn(p, o.swizzle, o.raster, false);
          all[name].push_back(ms);
          if (check && ms > 0)
            err[name] = MaxAbs(d, ref, mn, scratch, s) / ref_max;
          printf("%d^3 round %d %-36s %8.4f ms  %6.1f TFLOP/s%s\n", m, round,
                 name.c_str(), ms, ms > 0 ? flops / ms / 1e9 : 0.0,
                 err.count(name) && round == 0 && err[name] > kWrong
                     ? "  WRONG" : "");
        }
    }

    const float ref_ms = all.count("cublas") ? Median(all["cublas"]) : 0.f;
    std::vector<std::pair<float, std::string>> med;
    for (auto& [name, v] : all)  // failed launches (< 0) are left out
      if (Median(v) > 0) med.emplace_back(Median(v), name);
    std::sort(med.begin(), med.end());
    printf("== %d^3 float32 (TF32), median of %d rounds, fastest first\n", m,
           kRounds);
    for (auto& [ms, name] : med) {
      printf("%d^3 median %-36s %8.4f ms  %6.1f TFLOP/s  cublas/this %.3f", m,
             name.c_str(), ms, flops / ms / 1e9,
             ref_ms > 0 ? ref_ms / ms : 0.0);
      if (err.count(name))
        printf("  err %.1e%s", err[name], err[name] > kWrong ? " WRONG" : "");
      printf("\n");
    }
  }
  e = cudaDeviceSynchronize();
  printf("done: %s\n", cudaGetErrorString(e));
  return e != cudaSuccess;
}
