// The kernel registry: the entry this build compiled for a line of the
// kernel catalogue (the table in ffi/kernels/catalogue.py), or none.  The
// choice function (ffi/launch_choice.h) decides which line a call runs.
#ifndef JAX_DYNOFF_CUDA_REGISTRY_H_
#define JAX_DYNOFF_CUDA_REGISTRY_H_

#include "kernels/catalogue.h"
#include "kernels/catalogue_entries.h"

namespace jax_dynoff {
namespace cuda {

// Catalogue line `line`'s compiled entries (all null for a line this build
// lacks, or for -1).
const kernels::BuiltKernel& BuiltLine(int line);
// Whether this build compiled the sm_90a kernels.
bool Sm90Built();

// Free-form description of the build's kernels (handlers.h CudaBuildInfo).
const char* BuildInfo();

}  // namespace cuda
}  // namespace jax_dynoff

#endif  // JAX_DYNOFF_CUDA_REGISTRY_H_
