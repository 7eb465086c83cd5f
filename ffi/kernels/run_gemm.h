// The sequence every CUTLASS device adapter of ffi/kernels/ runs for one
// call: can_implement, initialize (on the caller's workspace), launch on the
// caller's stream.  The handler has already checked the workspace size
// against what the plan reserved (RunKernel in ffi/cuda_gemm.cu).
#ifndef JAX_DYNOFF_KERNELS_RUN_GEMM_H_
#define JAX_DYNOFF_KERNELS_RUN_GEMM_H_

#include <cuda_runtime_api.h>

#include <string>

#include "cutlass/cutlass.h"

namespace jax_dynoff {
namespace kernels {

// Returns "" or "<what>: <step>: <CUTLASS status>[: <CUDA error>]".
// `run_extra` goes to Gemm::run after the stream (CUTLASS 3.x adapters:
// the host adapter and the programmatic-dependent-launch flag).
template <typename Gemm, typename... RunExtra>
std::string RunGemm(const char* what, const typename Gemm::Arguments& args,
                    void* workspace, cudaStream_t stream,
                    RunExtra... run_extra) {
  Gemm gemm;
  cutlass::Status s = gemm.can_implement(args);
  if (s != cutlass::Status::kSuccess)
    return std::string(what) + ": can_implement: " +
           cutlass::cutlassGetStatusString(s);
  s = gemm.initialize(args, workspace, stream);
  if (s != cutlass::Status::kSuccess)
    return std::string(what) + ": initialize: " +
           cutlass::cutlassGetStatusString(s);
  s = gemm.run(stream, run_extra...);
  if (s != cutlass::Status::kSuccess) {
    cudaError_t e = cudaGetLastError();
    return std::string(what) + ": launch: " +
           cutlass::cutlassGetStatusString(s) + ": " + cudaGetErrorString(e);
  }
  return "";
}

}  // namespace kernels
}  // namespace jax_dynoff

#endif  // JAX_DYNOFF_KERNELS_RUN_GEMM_H_
