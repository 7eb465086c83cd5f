// The kernel registry (see registry.h).
#include "cuda/registry.h"

#include <cuda_runtime_api.h>

#include "kernels/catalogue.h"
#include "kernels/catalogue_build_info.h"
#include "kernels/catalogue_entries.h"

#define JAX_DYNOFF_STR2(x) #x
#define JAX_DYNOFF_STRINGIFY(x) JAX_DYNOFF_STR2(x)

namespace jax_dynoff {
namespace cuda {

const kernels::BuiltKernel& BuiltLine(int line) {
  static constexpr kernels::BuiltKernel kNone;
  return line < 0 || line >= kernels::kCatalogueSize
             ? kNone : kernels::kBuiltKernels[line];
}

bool Sm90Built() {
#ifdef JAX_DYNOFF_WITH_SM90
  return true;
#else
  return false;
#endif
}

#ifndef JAX_DYNOFF_CUDA_ARCHS_STR
#define JAX_DYNOFF_CUDA_ARCHS_STR "unknown"
#endif

const char* BuildInfo() {
  return "jax_dynoff CUDA build; archs=" JAX_DYNOFF_CUDA_ARCHS_STR
         "; cuda=" JAX_DYNOFF_STRINGIFY(CUDART_VERSION)
#ifdef JAX_DYNOFF_WITH_SM90
         "; sm90=yes"
#else
         "; sm90=no"
#endif
         "; kernels: " JAX_DYNOFF_CATALOGUE_EVERY_ARCH
#ifdef JAX_DYNOFF_WITH_SM90
         "; " JAX_DYNOFF_CATALOGUE_SM90A
#endif
         "; rule: ffi/launch_choice.h (an sm90 path falls back to generic "
         "unless the device is sm_90, the kernel exists, alignment holds and "
         "the options allow SM90 kernels)";
}

}  // namespace cuda
}  // namespace jax_dynoff
