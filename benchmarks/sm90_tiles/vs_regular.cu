// Where the 4096^3 gap to cuBLAS comes from (not part of the library build):
// the same shapes, in one process, CUDA events, median of 5,
//   ptrarray: the library's SM90 ptr-array kernel (ffi/kernels/sm90_gemm.h,
//             addresses read from device pointer arrays, TMA descriptors
//             rewritten on the device),
//   regular:  CUTLASS's plain (non-array) SM90 TMA kernel with the same tile,
//             cluster and schedule (descriptors built on the host),
//   stream-K: the same with CUTLASS's stream-K tile scheduler (cooperative
//             configurations only; the ptr-array kernels do not accept it),
//   direct:   the library's direct kernel (ffi/kernels/sm90_direct.h, large
//             tile only), windows = the whole buffers, its own tile order,
//   cublas:   cublasGemmEx, bf16 in and out, float32 accumulation.
// If `regular` matches cuBLAS where `ptrarray` does not, the price is the
// ptr-array machinery; if not, it is the tile configuration itself.
//
//   benchmarks/sm90_tiles/build_vs_regular.sh && benchmarks/sm90_tiles/vs_regular
// (cuBLAS from the nvidia-cublas wheel that jax's CUDA plugin installs).
#include <cuda_bf16.h>

#include <algorithm>
#include <cstdlib>
#include <cstdio>
#include <functional>
#include <vector>

#include "cublas_dense.h"
#include "cutlass/util/packed_stride.hpp"
#include "fill.h"
#include "kernels/sm90_direct.h"
#include "kernels/sm90_gemm.h"

namespace {
using namespace jax_dynoff::kernels;
using BF = cutlass::bfloat16_t;
using RM = cutlass::layout::RowMajor;

// ms per call of `launch` (median of 5 runs of `iters` calls).
float TimeIt(cudaStream_t s, int iters, const std::function<void()>& launch) {
  for (int i = 0; i < 3; ++i) launch();
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  std::vector<float> ts;
  for (int r = 0; r < 5; ++r) {
    cudaEventRecord(e0, s);
    for (int i = 0; i < iters; ++i) launch();
    cudaEventRecord(e1, s);
    cudaEventSynchronize(e1);
    float ms;
    cudaEventElapsedTime(&ms, e0, e1);
    ts.push_back(ms / iters);
  }
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  std::sort(ts.begin(), ts.end());
  return cudaGetLastError() == cudaSuccess ? ts[2] : -1.f;
}

// CUTLASS's non-array SM90 kernel for a library configuration; Scheduler
// void: the persistent data-parallel scheduler, else e.g. StreamKScheduler.
template <typename Config, typename Scheduler = void>
struct Regular {
  using Epi = typename cutlass::epilogue::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp,
      typename Config::TileShape, typename Config::ClusterShape,
      cutlass::epilogue::collective::EpilogueTileAuto, float, float, BF, RM, 8,
      BF, RM, 8,
      std::conditional_t<
          std::is_same_v<typename Config::EpilogueSchedule,
                         cutlass::epilogue::PtrArrayTmaWarpSpecializedCooperative>,
          cutlass::epilogue::TmaWarpSpecializedCooperative,
          cutlass::epilogue::TmaWarpSpecialized>>::CollectiveOp;
  using Main = typename cutlass::gemm::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, BF, RM, 8, BF, RM,
      8, float, typename Config::TileShape, typename Config::ClusterShape,
      cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(
          sizeof(typename Epi::SharedStorage))>,
      std::conditional_t<
          std::is_same_v<typename Config::KernelSchedule,
                         cutlass::gemm::KernelPtrArrayTmaWarpSpecializedCooperative>,
          cutlass::gemm::KernelTmaWarpSpecializedCooperative,
          cutlass::gemm::KernelTmaWarpSpecializedPingpong>>::CollectiveOp;
  using Kernel = cutlass::gemm::kernel::GemmUniversal<
      cute::Shape<int, int, int, int>, Main, Epi, Scheduler>;
  using Gemm = cutlass::gemm::device::GemmUniversalAdapter<Kernel>;

  static float Time(int m, int n, int k, const BF* a, const BF* b, BF* d,
                    void* ws, size_t ws_bytes, int sms, int swizzle,
                    cudaStream_t s, int iters) {
    using SA = typename Kernel::StrideA;
    using SB = typename Kernel::StrideB;
    using SC = typename Kernel::StrideC;
    cutlass::KernelHardwareInfo hw;
    hw.sm_count = sms;
    typename Gemm::Arguments args{
        cutlass::gemm::GemmUniversalMode::kGemm,
        {m, n, k, 1},
        {a, cutlass::make_cute_packed_stride(SA{}, {m, k, 1}), b,
         cutlass::make_cute_packed_stride(SB{}, {n, k, 1})},
        {{1.f, 0.f}, d, cutlass::make_cute_packed_stride(SC{}, {m, n, 1}), d,
         cutlass::make_cute_packed_stride(SC{}, {m, n, 1})},
        hw};
    args.scheduler.max_swizzle_size = swizzle;
    Gemm gemm;
    if (gemm.can_implement(args) != cutlass::Status::kSuccess) return -2;
    if (Gemm::get_workspace_size(args) > ws_bytes) return -3;
    if (gemm.initialize(args, ws, s) != cutlass::Status::kSuccess) return -4;
    return TimeIt(s, iters, [&] { gemm.run(s); });
  }
};

template <typename Config>
float TimePtrArray(int m, int n, int k, const void* const* ptrs, void* ws,
                   size_t ws_bytes, int sms, int swizzle, cudaStream_t s,
                   int iters) {
  using G = Sm90Gemm<Config, BF, BF, RM, RM>;
  GemmLaunch l;
  l.m = m; l.n = n; l.k = k; l.batch = 1;
  l.ptr_a = ptrs; l.ptr_b = ptrs + 1; l.ptr_c = ptrs + 2;
  l.ptr_d = const_cast<void* const*>(ptrs + 3);
  l.a_row = k; l.a_col = 1; l.b_row = n; l.b_col = 1;
  l.ldc = l.ldd = n; l.alpha = 1.f; l.beta = 0.f;
  l.workspace = ws; l.workspace_bytes = ws_bytes;
  l.sm_count = sms; l.stream = s;
  auto args = G::Args(l);
  args.scheduler.max_swizzle_size = swizzle;
  typename G::Gemm gemm;
  if (gemm.can_implement(args) != cutlass::Status::kSuccess) return -2;
  if (G::Gemm::get_workspace_size(args) > ws_bytes) return -3;
  if (gemm.initialize(args, ws, s) != cutlass::Status::kSuccess) return -4;
  return TimeIt(s, iters, [&] { gemm.run(s); });
}


// The direct kernel on whole-buffer windows (no dynamic start), its own
// tile order (SetTileOrder), as the handler launches it.
float TimeDirect(int m, int n, int k, const BF* a, const BF* b, BF* d,
                 void* ws, size_t ws_bytes, int sms, cudaStream_t s,
                 int iters) {
  using G = Sm90DirectGemm<Sm90DirectLargeConfig, BF, BF>;
  auto whole = [](int rows, int cols) {
    DirectWindow w;
    w.rows = rows;
    w.cols = cols;
    w.layers = 1;
    return w;
  };
  DirectLaunch l;
  l.m = m; l.n = n; l.k = k;
  l.base_a = a; l.base_b = b; l.base_c = d; l.base_d = d;
  l.lda = k; l.ldb = n; l.ldc = n; l.ldd = n;
  l.a = whole(m, k); l.b = whole(k, n); l.c = whole(m, n); l.d = whole(m, n);
  l.alpha = 1.f; l.beta = 0.f;
  l.workspace = ws; l.workspace_bytes = ws_bytes;
  l.sm_count = sms; l.stream = s;
  auto args = G::Args(l);
  typename G::Gemm gemm;
  if (gemm.can_implement(args) != cutlass::Status::kSuccess) return -2;
  if (G::Gemm::get_workspace_size(args) > ws_bytes) return -3;
  if (gemm.initialize(args, ws, s) != cutlass::Status::kSuccess) return -4;
  return TimeIt(s, iters, [&] { gemm.run(s); });
}

template <typename Config>
void Compare(const char* name, int m, int n, int k, BF* a, BF* b, BF* d,
             const void* const* ptrs, void* ws, size_t ws_bytes, int sms,
             cudaStream_t s, int iters) {
  const double flops = 2.0 * m * n * k;
  for (int sw : {1, 2, 4, 8}) {
    float p = TimePtrArray<Config>(m, n, k, ptrs, ws, ws_bytes, sms, sw, s,
                                   iters);
    float r = Regular<Config>::Time(m, n, k, a, b, d, ws, ws_bytes, sms, sw,
                                    s, iters);
    float sk = -1.f;
    if constexpr (std::is_same_v<typename Config::KernelSchedule,
                                 cutlass::gemm::KernelPtrArrayTmaWarpSpecializedCooperative>) {
      sk = Regular<Config, cutlass::gemm::StreamKScheduler>::Time(
          m, n, k, a, b, d, ws, ws_bytes, sms, sw, s, iters);
    }
    std::printf("%dx%dx%d %-16s swz %d  ptrarray %8.4f ms (%5.1f TFLOP/s)  "
                "regular %8.4f ms (%5.1f TFLOP/s)  stream-K %8.4f ms "
                "(%5.1f TFLOP/s)\n",
                m, n, k, name, sw, p, p > 0 ? flops / p / 1e9 : 0.0, r,
                r > 0 ? flops / r / 1e9 : 0.0, sk,
                sk > 0 ? flops / sk / 1e9 : 0.0);
  }
}
}  // namespace

// Usage: vs_regular [M ...]: only the sizes whose m is listed (default all).
int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IONBF, 0);  // partial output survives a kill
  const int sizes[][3] = {{2048, 2048, 2048}, {4096, 4096, 4096},
                          {8192, 8192, 8192}, {128, 4096, 4096}};
  int sms = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  cudaStream_t s;
  cudaStreamCreate(&s);
  const size_t maxe = size_t(8192) * 8192;
  BF *a, *b, *d;
  cudaMalloc(&a, maxe * 2);
  cudaMalloc(&b, maxe * 2);
  cudaMalloc(&d, maxe * 2);
  Fill<<<1024, 256>>>(reinterpret_cast<__nv_bfloat16*>(a), maxe, 1);
  Fill<<<1024, 256>>>(reinterpret_cast<__nv_bfloat16*>(b), maxe, 2);
  void** ptrs;
  cudaMalloc(&ptrs, 4 * sizeof(void*));
  void* host[4] = {a, b, d, d};
  cudaMemcpy(ptrs, host, sizeof(host), cudaMemcpyHostToDevice);
  const size_t ws_bytes = size_t(1) << 26;  // stream-K's partials too
  void* ws;
  cudaMalloc(&ws, ws_bytes);
#ifdef WITH_CUBLAS
  const CublasDense cublas(s);
#endif
  std::printf("sms %d\n", sms);
  for (auto& z : sizes) {
    const int m = z[0], n = z[1], k = z[2];
    bool wanted = argc < 2;
    for (int i = 1; i < argc; ++i) wanted |= std::atoi(argv[i]) == m;
    if (!wanted) continue;
    const double flops = 2.0 * m * n * k;
    const int iters = std::max(5, std::min(200, int(2e13 / flops)));
#ifdef WITH_CUBLAS
    float c = TimeIt(s, iters, [&] { cublas(m, n, k, a, b, d); });
    std::printf("%dx%dx%d cublas            %8.4f ms (%5.1f TFLOP/s)\n", m, n,
                k, c, c > 0 ? flops / c / 1e9 : 0.0);
#endif
    Compare<Sm90LargeConfig>("large_256x128", m, n, k, a, b, d, ptrs, ws,
                             ws_bytes, sms, s, iters);
    const float dt = TimeDirect(m, n, k, a, b, d, ws, ws_bytes, sms, s, iters);
    std::printf("%dx%dx%d direct_256x128   own tile order  %8.4f ms "
                "(%5.1f TFLOP/s)\n", m, n, k, dt,
                dt > 0 ? flops / dt / 1e9 : 0.0);
    Compare<Sm90MediumConfig>("medium_128x128", m, n, k, a, b, d, ptrs, ws,
                              ws_bytes, sms, s, iters);
  }
  cudaError_t e = cudaDeviceSynchronize();
  std::printf("done: %s\n", cudaGetErrorString(e));
  return e != cudaSuccess;
}
