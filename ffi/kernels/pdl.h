// Programmatic dependent launch (PDL), the device side: a kernel launched
// with PreparedLaunch::programmatic (kernels/launch.h) may start before
// the kernel ahead of it on the stream has finished, so it waits for that
// grid's completion and memory before its first global access; a kernel
// whose successors may start early says when (at its start: they then
// launch once all its blocks are running, and wait as above).  Both are
// no-ops where the launch was a plain one.  sm_90 instructions.
#ifndef JAX_DYNOFF_KERNELS_PDL_H_
#define JAX_DYNOFF_KERNELS_PDL_H_

namespace jax_dynoff {
namespace kernels {

// Blocks until the grid this one depends on has completed and its writes
// are visible.
__device__ __forceinline__ void WaitForPriorGrid() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}

// Lets the grid launched after this one as a programmatic dependent start
// (its blocks then wait in WaitForPriorGrid for this grid to finish).
__device__ __forceinline__ void LetDependentsLaunch() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}

}  // namespace kernels
}  // namespace jax_dynoff

#endif  // JAX_DYNOFF_KERNELS_PDL_H_
