// The sequence every CUTLASS 2.x device adapter of ffi/kernels/ (the
// generic and TF32 kernels) runs for one call: can_implement, initialize,
// launch on the caller's stream (the SM90 kernels: run_sm90_gemm.h).
#ifndef JAX_DYNOFF_KERNELS_RUN_GEMM_H_
#define JAX_DYNOFF_KERNELS_RUN_GEMM_H_

#include <cuda_runtime_api.h>

#include <string>

#include "cutlass/cutlass.h"

namespace jax_dynoff {
namespace kernels {

// Returns "" or "<what>: <step>: <CUTLASS status>[: <CUDA error>]".
template <typename Gemm>
std::string RunGemm(const char* what, const typename Gemm::Arguments& args,
                    void* workspace, cudaStream_t stream) {
  Gemm gemm;
  cutlass::Status s = gemm.can_implement(args);
  if (s != cutlass::Status::kSuccess)
    return std::string(what) + ": can_implement: " +
           cutlass::cutlassGetStatusString(s);
  s = gemm.initialize(args, workspace, stream);
  if (s != cutlass::Status::kSuccess)
    return std::string(what) + ": initialize: " +
           cutlass::cutlassGetStatusString(s);
  s = gemm.run(stream);
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
