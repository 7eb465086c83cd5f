// Sweep driver: for each problem size, every configuration of the registry
// (gen.sh) and scheduler knob (and, in the library's tile order, with
// initialize() before every launch as the FFI handler does: "+init"), in `kRounds` interleaved rounds (the H200's
// clocks drift with its temperature by a few % within a minute: each round
// visits every candidate once, so they share the drift), plus cuBLAS where
// built with it.  Prints every measurement as it is taken, then per size the
// median over the rounds, fastest first.
//   sweep [M ...]   only the sizes whose m is listed (default all)
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <cuda_bf16.h>

#include "cublas_dense.h"
#include "fill.h"
#include "registry.h"

namespace {
constexpr int kRounds = 3;
using sweep::Median;
}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IONBF, 0);  // partial output survives a kill
  int sizes[][3] = {{2048, 2048, 2048}, {4096, 4096, 4096}, {8192, 8192, 8192},
                    {128, 4096, 4096}, {512, 4096, 4096}, {16, 4096, 4096}};
  int sms = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  cudaStream_t s; cudaStreamCreate(&s);
  size_t maxe = size_t(8192) * 8192;
  __nv_bfloat16 *a, *b, *d;
  cudaMalloc(&a, maxe * 2); cudaMalloc(&b, maxe * 2); cudaMalloc(&d, maxe * 2);
  Fill<<<1024, 256>>>(a, maxe, 1); Fill<<<1024, 256>>>(b, maxe, 2);
  void** ptrs; cudaMalloc(&ptrs, 4 * sizeof(void*));
  void* host[4] = {a, b, d, d};
  cudaMemcpy(ptrs, host, sizeof(host), cudaMemcpyHostToDevice);
  size_t ws_bytes = size_t(1) << 22; void* ws; cudaMalloc(&ws, ws_bytes);
#ifdef WITH_CUBLAS
  const CublasDense cublas(s);
#endif
  printf("sms %d\n", sms);
  for (auto& z : sizes) {
    bool wanted = argc < 2;
    for (int i = 1; i < argc; ++i) wanted |= std::atoi(argv[i]) == z[0];
    if (!wanted) continue;
    const int m = z[0], n = z[1], k = z[2];
    const double flops = 2.0 * m * n * k;
    sweep::Problem p{m, n, k, (const void* const*)ptrs,
                     (const void* const*)ptrs + 1, (const void* const*)ptrs + 2,
                     ptrs + 3, a, b, d, ws, ws_bytes, sms, s};
    std::map<std::string, std::vector<float>> all;
    for (int round = 0; round < kRounds; ++round) {
#ifdef WITH_CUBLAS
      {
        CublasDense::Run run{cublas, m, n, k, a, b, d};
        float ms = sweep::TimeGemm(run, 0, p, false);
        all["cublas"].push_back(ms);
        printf("%dx%dx%d round %d %-28s %8.4f ms  %6.1f TFLOP/s\n", m, n, k,
               round, "cublas", ms, ms > 0 ? flops / ms / 1e9 : 0.0);
      }
#endif
      for (int c = 0; c < sweep::kNum; ++c)
        for (int sw : {0, 1, 2, 4, 8})
          for (int r : {0, 1}) {
            if (sw == 0 && r == 1) continue;  // the library's own order
            float ms = sweep::kAll[c]->fn(p, sw, r, false);
            std::string name = std::string(sweep::kAll[c]->name) +
                               (sw == 0 ? " own order"
                                        : " swz " + std::to_string(sw) +
                                              (r ? " N" : " M"));
            all[name].push_back(ms);
            printf("%dx%dx%d round %d %-28s %8.4f ms  %6.1f TFLOP/s\n", m, n,
                   k, round, name.c_str(), ms,
                   ms > 0 ? flops / ms / 1e9 : 0.0);
            if (sw == 0) {  // + initialize() per call, as the FFI handler
              ms = sweep::kAll[c]->fn(p, sw, r, true);
              all[name + " +init"].push_back(ms);
            }
          }
    }
    std::vector<std::pair<float, std::string>> med;
    for (auto& [name, v] : all)  // failed launches (< 0) are left out
      if (Median(v) > 0) med.emplace_back(Median(v), name);
    std::sort(med.begin(), med.end());
    printf("== %dx%dx%d, median of %d rounds, fastest first\n", m, n, k,
           kRounds);
    for (auto& [ms, name] : med)
      printf("%dx%dx%d median %-28s %8.4f ms  %6.1f TFLOP/s\n", m, n, k,
             name.c_str(), ms, ms > 0 ? flops / ms / 1e9 : 0.0);
  }
  cudaError_t e = cudaDeviceSynchronize();
  printf("done: %s\n", cudaGetErrorString(e));
  return e != cudaSuccess;
}
