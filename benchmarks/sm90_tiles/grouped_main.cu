// Grouped sweep driver: for each case of the cases file (grouped_cases.py),
// every candidate of grouped_registry.h (build_grouped.sh) in the library's
// tile order and with raster along N, beside cuBLAS's dense GEMM of the same
// FLOPs ((T, d) @ (d, f)) and cuBLAS's grouped GEMM of the same items
// (cublasGemmGroupedBatchedEx, sizes on the host) where built with it, in `kRounds` interleaved
// rounds; then per case the medians, fastest first, as dense/this.
//   grouped_sweep CASES_FILE
// A case line: name E T d f size_0 ... size_{E-1} (rows per expert, in the
// tokens' order).
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>
#include <cuda_bf16.h>

#include "cublas_dense.h"
#include "fill.h"
#include "grouped_registry.h"

namespace {
constexpr int kRounds = 3;
using sweep::Median;

struct Case {
  std::string name;
  int64_t E, T, d, f;
  std::vector<int64_t> sizes;
};

std::vector<Case> ReadCases(const char* path) {
  std::vector<Case> cases;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream s(line);
    Case c;
    if (!(s >> c.name >> c.E >> c.T >> c.d >> c.f)) continue;
    c.sizes.resize(c.E);
    for (auto& x : c.sizes) s >> x;
    cases.push_back(c);
  }
  return cases;
}
}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IONBF, 0);  // partial output survives a kill
  if (argc != 2) {
    std::fprintf(stderr, "usage: grouped_sweep CASES_FILE\n");
    return 2;
  }
  int sms = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  cudaStream_t stream;
  cudaStreamCreate(&stream);
  size_t ws_bytes = size_t(16) << 20;
  void* ws;
  cudaMalloc(&ws, ws_bytes);
#ifdef WITH_CUBLAS
  const CublasDense cublas(stream);
#endif
  printf("sms %d\n", sms);
  for (const Case& c : ReadCases(argv[1])) {
    const int64_t E = c.E, T = c.T, d = c.d, f = c.f;
    __nv_bfloat16 *x, *w, *y;
    cudaMalloc(&x, T * d * 2);
    cudaMalloc(&w, E * d * f * 2);
    cudaMalloc(&y, T * f * 2);
    Fill<<<1024, 256>>>(x, T * d, 1);
    Fill<<<1024, 256>>>(w, E * d * f, 2);
    // The items as the library's pointer kernel writes them: an empty
    // expert's shape is (0, 0, 0).
    std::vector<int32_t> shapes(3 * E);
    std::vector<const void*> pa(E), pb(E);
    std::vector<void*> pd(E);
    std::vector<int64_t> strides(4 * E);
    int64_t off = 0;
    for (int64_t g = 0; g < E; ++g) {
      const int64_t m = c.sizes[g];
      shapes[3 * g] = static_cast<int32_t>(m);
      shapes[3 * g + 1] = m ? static_cast<int32_t>(f) : 0;
      shapes[3 * g + 2] = m ? static_cast<int32_t>(d) : 0;
      pa[g] = x + off * d;
      pb[g] = w + g * d * f;
      pd[g] = y + off * f;
      strides[g] = d;
      strides[E + g] = strides[2 * E + g] = strides[3 * E + g] = f;
      off += m;
    }
    if (off != T) {
      printf("%s: sizes sum to %lld, not T = %lld: skipped\n", c.name.c_str(),
             (long long)off, (long long)T);
      continue;
    }
    void *dshapes, *dptrs, *dstrides;
    cudaMalloc(&dshapes, shapes.size() * 4);
    cudaMalloc(&dptrs, 3 * E * sizeof(void*));
    cudaMalloc(&dstrides, strides.size() * 8);
    cudaMemcpy(dshapes, shapes.data(), shapes.size() * 4,
               cudaMemcpyHostToDevice);
    cudaMemcpy(dptrs, pa.data(), E * sizeof(void*), cudaMemcpyHostToDevice);
    cudaMemcpy(static_cast<void**>(dptrs) + E, pb.data(), E * sizeof(void*),
               cudaMemcpyHostToDevice);
    cudaMemcpy(static_cast<void**>(dptrs) + 2 * E, pd.data(),
               E * sizeof(void*), cudaMemcpyHostToDevice);
    cudaMemcpy(dstrides, strides.data(), strides.size() * 8,
               cudaMemcpyHostToDevice);
    sweep::GroupedProblem gp{static_cast<int>(E), T, d, f, dshapes,
                             static_cast<const void* const*>(dptrs),
                             static_cast<const void* const*>(dptrs) + E,
                             static_cast<void* const*>(dptrs) + 2 * E,
                             static_cast<const int64_t*>(dstrides), ws,
                             ws_bytes, sms, stream};
#ifdef WITH_CUBLAS
    sweep::Problem p{};  // TimeGemm's sizes (its iteration count)
    p.m = static_cast<int>(T); p.n = static_cast<int>(f);
    p.k = static_cast<int>(d);
    p.stream = stream;
    // The non-empty items, packed for cuBLAS's grouped GEMM: A, B, D pointers.
    std::vector<int> cublas_m;
    std::vector<const void*> packed(3 * E);
    for (int64_t g = 0, j = 0; g < E; ++g) {
      if (c.sizes[g] == 0) continue;
      cublas_m.push_back(static_cast<int>(c.sizes[g]));
      packed[j] = pa[g];
      packed[E + j] = pb[g];
      packed[2 * E + j] = pd[g];
      ++j;
    }
    const void** cublas_ptrs;
    cudaMalloc(&cublas_ptrs, 3 * E * sizeof(void*));
    cudaMemcpy(cublas_ptrs, packed.data(), 3 * E * sizeof(void*),
               cudaMemcpyHostToDevice);
#endif
    const double flops = 2.0 * T * d * f;
    std::map<std::string, std::vector<float>> all;
    for (int round = 0; round < kRounds; ++round) {
#ifdef WITH_CUBLAS
      {
        // The dense GEMM of the same FLOPs: (T, d) @ expert 0's (d, f).
        CublasDense::Run run{cublas, p.m, p.n, p.k, x, w, y};
        const float ms = sweep::TimeGemm(run, 0, p, false);
        all["dense cublas"].push_back(ms);
        printf("%s round %d %-32s %8.4f ms\n", c.name.c_str(), round,
               "dense cublas", ms);
      }
      {
        // cuBLAS's own grouped GEMM on the same items (their sizes on the
        // host; the empty ones left out).
        CublasDense::GroupedRun run{cublas, cublas_m, p.n, p.k,
                                    cublas_ptrs, cublas_ptrs + E,
                                    const_cast<void* const*>(cublas_ptrs + 2 * E)};
        const float ms = sweep::TimeGemm(run, 0, p, false);
        all["grouped cublas (host sizes)"].push_back(ms);
        printf("%s round %d %-32s %8.4f ms\n", c.name.c_str(), round,
               "grouped cublas (host sizes)", ms);
      }
#endif
      for (int i = 0; i < sweep::kNumGrouped; ++i)
        for (int raster : {-1, 1}) {
          const float ms = sweep::kGrouped[i]->fn(gp, raster);
          const std::string name = std::string(sweep::kGrouped[i]->name) +
                                   (raster < 0 ? " own order" : " raster N");
          all[name].push_back(ms);
          printf("%s round %d %-32s %8.4f ms\n", c.name.c_str(), round,
                 name.c_str(), ms);
        }
    }
    const float dense = all.count("dense cublas")
                            ? Median(all["dense cublas"]) : 0.f;
    std::vector<std::pair<float, std::string>> med;
    for (auto& [name, v] : all)  // failed launches (< 0) are left out
      if (Median(v) > 0) med.emplace_back(Median(v), name);
    std::sort(med.begin(), med.end());
    printf("== %s (E %lld, T %lld, %lld -> %lld), median of %d rounds, "
           "fastest first\n", c.name.c_str(), (long long)E, (long long)T,
           (long long)d, (long long)f, kRounds);
    for (auto& [ms, name] : med)
      printf("%s median %-32s %8.4f ms  %6.1f TFLOP/s  dense/this %.2f\n",
             c.name.c_str(), name.c_str(), ms, flops / ms / 1e9,
             dense > 0 ? dense / ms : 0.0);
    cudaFree(x); cudaFree(w); cudaFree(y);
    cudaFree(dshapes); cudaFree(dptrs); cudaFree(dstrides);
#ifdef WITH_CUBLAS
    cudaFree(cublas_ptrs);
#endif
  }
  cudaError_t e = cudaDeviceSynchronize();
  printf("done: %s\n", cudaGetErrorString(e));
  return e != cudaSuccess;
}
