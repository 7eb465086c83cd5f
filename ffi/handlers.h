// The FFI handlers this extension exports, one per platform.  module.cc
// wraps them in capsules; the CUDA one exists only in CUDA builds.
#ifndef JAX_DYNOFF_HANDLERS_H_
#define JAX_DYNOFF_HANDLERS_H_

#include <string>

#include "xla/ffi/api/c_api.h"

namespace jax_dynoff {

// The one FFI target every jax_dynoff.gemm call lowers to.
inline constexpr const char kTargetName[] = "jax_dynoff_gemm";
// The graph pad (graph_pad.cc): a pass-through that does nothing, put
// after calls at a loop body's top level (jax_dynoff/graph_pads.py).
inline constexpr const char kGraphPadName[] = "jax_dynoff_graph_pad";
XLA_FFI_Handler* GraphPadHandler();

XLA_FFI_Handler* CpuGemmHandler();
// The CPU handler's BLAS: loads cblas_sgemm from the shared library at
// `path` (once per process; "" or why not), and names the one in use ("":
// none, the handler's own loops).
std::string SetCpuBlas(const std::string& path);
const char* CpuBlas();

#ifdef JAX_DYNOFF_WITH_CUDA
// The CUDA handler's two stages, and its state's FFI type (XLA_FFI_TypeId
// and XLA_FFI_TypeInfo, for jax.ffi.register_ffi_type).
XLA_FFI_Handler* CudaGemmInstantiate();
XLA_FFI_Handler* CudaGemmHandler();
void* CudaGemmStateTypeId();
void* CudaGemmStateTypeInfo();
// Free-form description of the CUDA build (architectures, kernels), for
// jax_dynoff.build_info().
const char* CudaBuildInfo();
// Whether this build holds its sm_90a kernels (the choice function's
// sm90_built), for plan.sm90_kernels_built.
bool CudaSm90Built();
#endif

}  // namespace jax_dynoff

#endif  // JAX_DYNOFF_HANDLERS_H_
