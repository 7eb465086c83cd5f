// How the SM90 (CUTLASS 3.x) kernels of ffi/kernels/ are launched: what
// GemmUniversalAdapter's initialize() and run() do, minus the two function
// attributes they set on every call.  The handler has already checked the
// workspace size against what the plan reserved (RunKernel in
// ffi/cuda/runners.h).
#ifndef JAX_DYNOFF_KERNELS_RUN_SM90_GEMM_H_
#define JAX_DYNOFF_KERNELS_RUN_SM90_GEMM_H_

#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>

#include "cute/layout.hpp"
#include "cutlass/cutlass.h"
#include "cutlass/device_kernel.h"
#include "kernels/launch.h"

namespace jax_dynoff {
namespace kernels {

// The function attributes an SM90 kernel needs before its first launch on a
// device: its dynamic shared memory (above the 48 KiB default) and cluster
// launches.  CUTLASS's adapter sets both again on every call (initialize()
// and ClusterLauncher::launch), two driver calls per GEMM on the host's
// critical path when a loop of small GEMMs is bound by the host; once per
// device is enough (attributes live in the function's per-device state).
template <typename Kernel>
cudaError_t PrepareSm90KernelOnce(int device) {
  return OncePerDevice(device, [] {
    const void* fn = reinterpret_cast<const void*>(
        &cutlass::device_kernel<Kernel>);
    cudaError_t e = cudaFuncSetAttribute(
        fn, cudaFuncAttributeMaxDynamicSharedMemorySize,
        static_cast<int>(Kernel::SharedStorageSize));
    if (e == cudaSuccess)
      e = cudaFuncSetAttribute(
          fn, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
    return e;
  });
}

// One SM90 GEMM made ready: can_implement, the kernel's workspace set-up
// (initialize_workspace: nothing for the data-parallel schedulers, the
// stream-K scheduler's memset otherwise, enqueued on `stream`), its
// parameters (the TMA descriptors) and launch shape, into *out.
template <typename Gemm>
std::string PrepareSm90Gemm(const char* what,
                            const typename Gemm::Arguments& args,
                            void* workspace, cudaStream_t stream, int device,
                            PreparedLaunch* out) {
  using Kernel = typename Gemm::GemmKernel;
  using Cluster = typename Kernel::DispatchPolicy::ClusterShape;
  using Params = typename Kernel::Params;
  static_assert(sizeof(Params) <= kMaxParamBytes,
                "kernel parameters larger than PreparedLaunch holds");
  // Kernel parameters reach the device as a byte copy in any case, so a
  // copy of their bytes is the same launch.
  cutlass::Status s = Gemm::can_implement(args);
  if (s != cutlass::Status::kSuccess)
    return std::string(what) + ": can_implement: " +
           cutlass::cutlassGetStatusString(s);
  s = Kernel::initialize_workspace(args, workspace, stream, nullptr);
  if (s != cutlass::Status::kSuccess)
    return std::string(what) + ": initialize_workspace: " +
           cutlass::cutlassGetStatusString(s);
  const Params params = Kernel::to_underlying_arguments(args, workspace);
  if (cudaError_t e = PrepareSm90KernelOnce<Kernel>(device); e != cudaSuccess)
    return std::string(what) + ": cudaFuncSetAttribute: " +
           cudaGetErrorString(e);
  out->fn = reinterpret_cast<const void*>(&cutlass::device_kernel<Kernel>);
  out->grid = Kernel::get_grid_shape(params);
  out->block = Kernel::get_block_shape();
  out->cluster = dim3(cute::size<0>(Cluster{}), cute::size<1>(Cluster{}),
                      cute::size<2>(Cluster{}));
  out->smem = Kernel::SharedStorageSize;
  out->param_bytes = sizeof(Params);
  std::memcpy(out->params, &params, sizeof(Params));
  return "";
}

// One SM90 GEMM: PrepareSm90Gemm, then its launch.
template <typename Gemm>
std::string RunSm90Gemm(const char* what, const typename Gemm::Arguments& args,
                        void* workspace, cudaStream_t stream, int device) {
  PreparedLaunch l;
  std::string r = PrepareSm90Gemm<Gemm>(what, args, workspace, stream, device,
                                        &l);
  if (r.empty()) r = LaunchPrepared(l, stream);
  return r.empty() ? r : std::string(what) + ": " + r;
}

}  // namespace kernels
}  // namespace jax_dynoff

#endif  // JAX_DYNOFF_KERNELS_RUN_SM90_GEMM_H_
