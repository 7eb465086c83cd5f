// Sweep driver: for each problem size, every configuration and scheduler
// knob; prints one line per measurement (ms, TFLOP/s).
#include <cstdlib>
#include <cstring>
#include <cuda_bf16.h>

#include "fill.h"
#include "registry.h"


int main(int argc, char** argv) {
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
  printf("sms %d\n", sms);
  for (auto& z : sizes) {
    sweep::Problem p{z[0], z[1], z[2], (const void* const*)ptrs,
                     (const void* const*)ptrs + 1, (const void* const*)ptrs + 2,
                     ptrs + 3, ws, ws_bytes, sms, s};
    for (int c = 0; c < sweep::kNum; ++c)
      for (int sw : {1, 2, 4, 8})
        for (int r : {0, 1}) {
          float ms = sweep::kAll[c]->fn(p, sw, r, false);
          float ms_init = (sw == 1 && r == 0) ? sweep::kAll[c]->fn(p, sw, r, true) : 0;
          printf("%dx%dx%d %-18s swz %d raster %s  %8.4f ms  %6.1f TFLOP/s%s",
                 z[0], z[1], z[2], sweep::kAll[c]->name, sw, r ? "N" : "M", ms,
                 ms > 0 ? 2.0 * z[0] * z[1] * z[2] / ms / 1e9 : 0.0, "");
          if (ms_init) printf("   (with initialize each call: %8.4f ms)", ms_init);
          printf("\n");
        }
  }
  cudaError_t e = cudaDeviceSynchronize();
  printf("done: %s\n", cudaGetErrorString(e));
  return e != cudaSuccess;
}
