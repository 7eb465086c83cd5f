// The kernel registry: which compiled kernel serves a path, tile, dtype
// pair and transposes, or nullptr where this build has none.  Each lookup
// searches the kernel catalogue (the table in ffi/kernels/catalogue.py), so
// a kernel added there is found here; the planner (ffi/planner.cc) decides
// which one a call wants.
#ifndef JAX_DYNOFF_CUDA_REGISTRY_H_
#define JAX_DYNOFF_CUDA_REGISTRY_H_

#include "gemm_problem.h"
#include "kernels/launch.h"
#include "planner.h"  // DirectTile

namespace jax_dynoff {
namespace cuda {

using kernels::DirectKernelEntry;
using kernels::GroupedKernelEntry;
using kernels::KernelEntry;
using kernels::SkinnyKernelEntry;

// The generic CUTLASS 2.x SIMT kernel for the dtype pair (every GPU).
const KernelEntry* GenericKernel(DType in, DType out);
// The TF32 kernel for the transposes (float32 in and out only).
const KernelEntry* Tf32Kernel(DType in, DType out, bool ta, bool tb);
// The ptr-array SM90 kernel of an unsplit SM90 tile path.
const KernelEntry* Sm90Kernel(Path path, DType in, DType out, bool ta,
                              bool tb);
// The SM90 3xTF32 kernel (float32 at precision=HIGHEST, accumulators
// promoted; one tile for both float32 tile paths), or nullptr.
const KernelEntry* Sm90Tf32HighestKernel(Path path);
// The direct (non-array, one launch) SM90 kernel of a direct tile.
const DirectKernelEntry* Sm90DirectKernel(DType in, DType out, bool ta,
                                          bool tb, DirectTile tile);
// The grouped kernel (ragged windows) for the dtypes and transposes.
const GroupedKernelEntry* Sm90GroupedKernel(DType in, DType out, bool ta,
                                            bool tb, GroupedTile tile);
// The skinny kernel for the input dtype.
const SkinnyKernelEntry* SkinnyKernel(DType in, bool trans_b);
// The split-K slice kernel (float32 partials).
const KernelEntry* Sm90SplitKKernel(DType in, bool ta, bool tb);

// Free-form description of the build's kernels (handlers.h CudaBuildInfo).
const char* BuildInfo();

}  // namespace cuda
}  // namespace jax_dynoff

#endif  // JAX_DYNOFF_CUDA_REGISTRY_H_
