// Planted bugs for tests/test_gpu_kernels.py::test_sanitizer_filter_sees_planted_bugs:
// the same shared-memory race (`race`) or divergent barrier (`sync`) under
// three kernel names, one in namespace jax_dynoff, one in namespace
// cutlass (as CUTLASS's device_kernel), one in neither.  The sanitizers'
// kernel filter of the suite must report the first two and leave the
// third alone: proof that it instruments the kernels it claims to.
#include <cstdio>
#include <cstring>

#include <cuda_runtime.h>

__device__ __forceinline__ void Race(int* out) {
  // Each thread writes its slot and reads the slot of a thread in the
  // other warp, with no barrier in between: a read-after-write hazard
  // across warps.  volatile keeps the compiler from forwarding the value.
  __shared__ volatile int s[64];
  s[threadIdx.x] = threadIdx.x;
  out[threadIdx.x] = s[(threadIdx.x + 32) % 64];
}

__device__ __forceinline__ void Diverge(int* out) {
  __shared__ int s;
  if (threadIdx.x < 48) {     // a barrier half of the second warp skips
    s = 1;                    // (the case synccheck's guide shows)
    __syncthreads();
  }
  out[threadIdx.x] = s;
}

namespace jax_dynoff {
__global__ void PlantedRace(int* out) { Race(out); }
__global__ void PlantedDivergence(int* out) { Diverge(out); }
}  // namespace jax_dynoff

namespace cutlass {
template <int kBug>
__global__ void device_kernel(int* out) {
  if (kBug == 0) Race(out); else Diverge(out);
}
}  // namespace cutlass

namespace elsewhere {
__global__ void UnwatchedRace(int* out) { Race(out); }
__global__ void UnwatchedDivergence(int* out) { Diverge(out); }
}  // namespace elsewhere

// control race|sync jax_dynoff|cutlass|elsewhere: one kernel a process (a
// divergent barrier reported by synccheck ends the context's later
// launches).
int main(int argc, char** argv) {
  if (argc != 3) return 2;
  const bool race = std::strcmp(argv[1], "race") == 0;
  const char* where = argv[2];
  int* out = nullptr;
  if (cudaMalloc(&out, 64 * sizeof(int)) != cudaSuccess) return 2;
  if (std::strcmp(where, "jax_dynoff") == 0) {
    if (race) jax_dynoff::PlantedRace<<<1, 64>>>(out);
    else jax_dynoff::PlantedDivergence<<<1, 64>>>(out);
  } else if (std::strcmp(where, "cutlass") == 0) {
    if (race) cutlass::device_kernel<0><<<1, 64>>>(out);
    else cutlass::device_kernel<1><<<1, 64>>>(out);
  } else {
    if (race) elsewhere::UnwatchedRace<<<1, 64>>>(out);
    else elsewhere::UnwatchedDivergence<<<1, 64>>>(out);
  }
  cudaDeviceSynchronize();  // a divergent barrier may fault: not checked
  std::printf("LAUNCHED\n");
  return 0;
}
