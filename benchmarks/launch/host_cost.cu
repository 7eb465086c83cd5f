// What each host-side step of an SM90 GEMM call costs the CPU (not part of
// the library build).  A loop of small GEMMs is bound by the host (the
// handler took 18.9 us per call in an early profiler trace: git history of
// docs/notes.md; the decisions taken: docs/design.md); CUTLASS's adapter
// does, per call: four TMA descriptor encodes, each looking the driver's entry point up first
// (cudaGetDriverEntryPointByVersion), two cudaFuncSetAttribute calls, and a
// cluster launch.  Each line: mean host microseconds per step, over many
// repetitions (launches: an empty kernel with the GEMM's grid, block,
// shared memory and cluster; the stream is drained every 256 launches, so
// the launch queue never fills).
//
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a host_cost.cu \
//        -o host_cost
#include <cuda.h>
#include <cuda_runtime.h>
#include <cudaTypedefs.h>

#include <chrono>
#include <cstdio>
#include <functional>

__global__ void Empty(const __grid_constant__ CUtensorMap m, int* out) {
  if (out != nullptr && threadIdx.x == 0) out[blockIdx.x] = 0;
}

static double PerCallUs(int n, const std::function<void()>& f,
                        cudaStream_t drain = nullptr) {
  for (int i = 0; i < 16; ++i) f();  // warm-up (first-use costs)
  if (drain) cudaStreamSynchronize(drain);
  double total = 0;
  for (int done = 0; done < n;) {
    const int chunk = drain ? 256 : n;
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < chunk; ++i) f();
    total += std::chrono::duration<double, std::micro>(
                 std::chrono::steady_clock::now() - t0).count();
    if (drain) cudaStreamSynchronize(drain);
    done += chunk;
  }
  return total / n;
}

int main() {
  cudaFree(nullptr);
  cudaStream_t s;
  cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  void* buf;
  cudaMalloc(&buf, 64 << 20);
  const int smem = 200 * 1024;
  const void* fn = reinterpret_cast<const void*>(&Empty);
  cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);

  void* pfn = nullptr;
  cudaDriverEntryPointQueryResult q;
  cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &pfn, 12000,
                                   cudaEnableDefault, &q);
  auto encode = reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(pfn);
  CUtensorMap map;
  cuuint64_t dims[3] = {4096, 4096, 1}, strides[2] = {8192, 8192 * 4096};
  cuuint32_t box[3] = {64, 128, 1}, estr[3] = {1, 1, 1};
  auto encode_once = [&] {
    encode(&map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 3, buf, dims, strides, box,
           estr, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
           CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
           CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  };
  encode_once();

  const int n = 20000;
  std::printf("host microseconds per step (mean of %d)\n", n);
  std::printf("%-58s %7.3f\n", "cudaGetDriverEntryPointByVersion(cuTensorMapEncodeTiled)",
              PerCallUs(n, [&] {
                void* p;
                cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p,
                                                 12000, cudaEnableDefault, &q);
              }));
  std::printf("%-58s %7.3f\n", "cuTensorMapEncodeTiled (entry point cached)",
              PerCallUs(n, encode_once));
  std::printf("%-58s %7.3f\n", "cudaFuncSetAttribute(MaxDynamicSharedMemorySize)",
              PerCallUs(n, [&] {
                cudaFuncSetAttribute(
                    fn, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
              }));
  std::printf("%-58s %7.3f\n", "cudaFuncSetAttribute(NonPortableClusterSizeAllowed)",
              PerCallUs(n, [&] {
                cudaFuncSetAttribute(
                    fn, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
              }));
  std::printf("%-58s %7.3f\n", "cudaGetDevice + cudaGetLastError", PerCallUs(n, [&] {
                int d;
                cudaGetDevice(&d);
                cudaGetLastError();
              }));

  const int launches = 4096;
  int* out = static_cast<int*>(buf);
  auto launch_ex = [&](unsigned cluster) {
    cudaLaunchAttribute attr;
    attr.id = cudaLaunchAttributeClusterDimension;
    attr.val.clusterDim.x = cluster;
    attr.val.clusterDim.y = attr.val.clusterDim.z = 1;
    cudaLaunchConfig_t c = {};
    c.gridDim = dim3(132);
    c.blockDim = dim3(384);
    c.dynamicSmemBytes = smem;
    c.stream = s;
    c.attrs = &attr;
    c.numAttrs = 1;
    void* args[] = {&map, &out};
    cudaLaunchKernelExC(&c, fn, args);
  };
  std::printf("%-58s %7.3f\n", "launch <<<132, 384, 200 KiB>>> (no cluster)",
              PerCallUs(launches, [&] {
                Empty<<<132, 384, smem, s>>>(map, out);
              }, s));
  std::printf("%-58s %7.3f\n", "cudaLaunchKernelExC, cluster 2 (the GEMM's launch)",
              PerCallUs(launches, [&] { launch_ex(2); }, s));
  // The same launch through the driver API, the function handle looked up
  // once (cudaGetFuncBySymbol) and cuLaunchKernelEx's entry point cached:
  // what the runtime layer adds to a launch.
  cudaFunction_t cfn;
  cudaGetFuncBySymbol(&cfn, fn);
  void* plaunch = nullptr;
  cudaGetDriverEntryPointByVersion("cuLaunchKernelEx", &plaunch, 12000,
                                   cudaEnableDefault, &q);
  auto cu_launch_ex = reinterpret_cast<PFN_cuLaunchKernelEx_v11060>(plaunch);
  auto launch_drv = [&](unsigned cluster) {
    CUlaunchAttribute attr;
    attr.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    attr.value.clusterDim.x = cluster;
    attr.value.clusterDim.y = attr.value.clusterDim.z = 1;
    CUlaunchConfig c = {};
    c.gridDimX = 132;
    c.gridDimY = c.gridDimZ = 1;
    c.blockDimX = 384;
    c.blockDimY = c.blockDimZ = 1;
    c.sharedMemBytes = smem;
    c.hStream = s;
    c.attrs = &attr;
    c.numAttrs = 1;
    void* args[] = {&map, &out};
    cu_launch_ex(&c, reinterpret_cast<CUfunction>(cfn), args, nullptr);
  };
  std::printf("%-58s %7.3f\n", "cuLaunchKernelEx (driver entry point), cluster 1",
              PerCallUs(launches, [&] { launch_drv(1); }, s));
  std::printf("%-58s %7.3f\n", "cudaLaunchKernelExC, cluster 1",
              PerCallUs(launches, [&] { launch_ex(1); }, s));
  // A GEMM's four TMA descriptors, as CUTLASS encodes them.
  auto encode_four = [&] {
    for (int i = 0; i < 4; ++i) {
      void* p;
      cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000,
                                       cudaEnableDefault, &q);
      encode_once();
    }
  };
  std::printf("%-58s %7.3f\n", "CUTLASS's per-call sequence: 4 x (lookup + encode), "
              "2 x attribute, cluster launch",
              PerCallUs(launches, [&] {
                encode_four();
                cudaFuncSetAttribute(
                    fn, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
                cudaFuncSetAttribute(
                    fn, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
                launch_ex(2);
              }, s));
  std::printf("%-58s %7.3f\n", "4 x (lookup + encode), cluster launch (the library's)",
              PerCallUs(launches, [&] {
                encode_four();
                launch_ex(2);
              }, s));
  cudaError_t e = cudaDeviceSynchronize();
  std::printf("status: %s\n", cudaGetErrorString(e));
  return e == cudaSuccess ? 0 : 1;
}
