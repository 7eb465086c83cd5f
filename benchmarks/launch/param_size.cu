// What a small kernel costs inside a CUDA graph, by parameter-block size
// (not part of the library build).  The pointer kernel of ffi/cuda/prep_kernels.cu
// takes a ~2.5 KB parameter block and shows 3.5 us per call in a profiler
// trace where XLA's one-thread fusions show ~1 us; this separates the
// parameter block from the work.  Each variant: a graph of 200 launches,
// replayed 20 times, CUDA events; us per launch.
//
//   nvcc -O3 -gencode=arch=compute_90,code=sm_90 param_size.cu -o param_size
#include <cuda_runtime.h>

#include <cstdio>

template <int kBytes>
struct Block {
  long long v[kBytes / 8];
};

template <int kBytes>
__global__ void Touch(const __grid_constant__ Block<kBytes> p, long long* out) {
  if (threadIdx.x == 0 && blockIdx.x == 0) out[0] = p.v[0] + p.v[kBytes / 8 - 1];
}

// Every thread reads one word of the block, as the pointer kernel's copy
// to shared memory does.
template <int kBytes>
__global__ void ReadAll(const __grid_constant__ Block<kBytes> p,
                        long long* out) {
  __shared__ long long s[kBytes / 8];
  for (int j = threadIdx.x; j < kBytes / 8; j += blockDim.x) s[j] = p.v[j];
  __syncthreads();
  if (threadIdx.x == 0) out[0] = s[0] + s[kBytes / 8 - 1];
}

template <typename F>
float PerLaunch(cudaStream_t s, F launch) {
  cudaGraph_t g;
  cudaGraphExec_t ge;
  cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal);
  for (int i = 0; i < 200; ++i) launch();
  cudaStreamEndCapture(s, &g);
  cudaGraphInstantiate(&ge, g, 0);
  cudaGraphLaunch(ge, s);
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  cudaEventRecord(e0, s);
  for (int r = 0; r < 20; ++r) cudaGraphLaunch(ge, s);
  cudaEventRecord(e1, s);
  cudaEventSynchronize(e1);
  float ms;
  cudaEventElapsedTime(&ms, e0, e1);
  cudaGraphExecDestroy(ge);
  cudaGraphDestroy(g);
  return ms * 1e3f / (20 * 200);
}

template <int kBytes>
void Row(cudaStream_t s, long long* out) {
  Block<kBytes> b{};
  b.v[0] = 1;
  const float t1 = PerLaunch(s, [&] { Touch<kBytes><<<1, 1, 0, s>>>(b, out); });
  const float t256 =
      PerLaunch(s, [&] { Touch<kBytes><<<1, 256, 0, s>>>(b, out); });
  const float tr =
      PerLaunch(s, [&] { ReadAll<kBytes><<<1, 256, 0, s>>>(b, out); });
  std::printf("params %5d B: 1 thread %6.2f us  256 threads %6.2f us  "
              "256 threads reading all %6.2f us\n", kBytes, t1, t256, tr);
}

int main() {
  cudaStream_t s;
  cudaStreamCreate(&s);
  long long* out;
  cudaMalloc(&out, 8);
  Row<8>(s, out);
  Row<256>(s, out);
  Row<1024>(s, out);
  Row<2568>(s, out);
  Row<4096>(s, out);
  cudaError_t e = cudaDeviceSynchronize();
  std::printf("done: %s\n", cudaGetErrorString(e));
  return e != cudaSuccess;
}
