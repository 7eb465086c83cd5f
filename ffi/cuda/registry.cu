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
namespace {

using kernels::KernelFamily;
using kernels::KernelQuery;

// The entry this build compiled for the first line `q` finds, or nullptr
// (no such line, or one whose kernel is not built here).
const kernels::BuiltKernel* Built(const KernelQuery& q) {
  const int i = q.Find();
  return i < 0 ? nullptr : &kernels::kBuiltKernels[i];
}
const KernelEntry* Gemm(const KernelQuery& q) {
  const kernels::BuiltKernel* b = Built(q);
  return b ? b->gemm : nullptr;
}

// The ptr-array tile whose path is `path`, or -1 (no tile's).
int Sm90TileOf(Path path) {
  for (int t = 0; t < kNumSm90Tiles; ++t)
    if (Sm90TilePath(static_cast<Sm90Tile>(t)) == path) return t;
  return -1;
}

}  // namespace

const KernelEntry* GenericKernel(DType in, DType out) {
  return Gemm(KernelQuery(KernelFamily::kGeneric).Dtypes(in, out));
}

const KernelEntry* Tf32Kernel(DType in, DType out, bool ta, bool tb) {
  return Gemm(
      KernelQuery(KernelFamily::kTf32).Dtypes(in, out).Transposes(ta, tb));
}

// float32: one K-major kernel per tile serves every transpose (the runner
// stages MN-major operands; kernels/sm90_tf32.h).
const KernelEntry* Sm90Kernel(Path path, DType in, DType out, bool ta,
                              bool tb) {
  return Gemm(KernelQuery(KernelFamily::kSm90)
                  .Tile(Sm90TileOf(path))
                  .Dtypes(in, out)
                  .Transposes(ta, tb));
}

const KernelEntry* Sm90Tf32HighestKernel(Path path) {
  return Gemm(
      KernelQuery(KernelFamily::kSm90Tf32Highest).Tile(Sm90TileOf(path)));
}

const DirectKernelEntry* Sm90DirectKernel(DType in, DType out, bool ta,
                                          bool tb, DirectTile tile) {
  const kernels::BuiltKernel* b =
      Built(KernelQuery(KernelFamily::kSm90Direct)
                .Tile(tile)
                .Dtypes(in, out)
                .Transposes(ta, tb));
  return b ? b->direct : nullptr;
}

const GroupedKernelEntry* Sm90GroupedKernel(DType in, DType out, bool ta,
                                            bool tb, GroupedTile tile) {
  const kernels::BuiltKernel* b =
      Built(KernelQuery(KernelFamily::kSm90Grouped)
                .Tile(tile)
                .Dtypes(in, out)
                .Transposes(ta, tb));
  return b ? b->grouped : nullptr;
}

// By the input dtype alone: the planner chose the path by its rules
// (HasSkinnyKernel, which checks the output dtype too).
const SkinnyKernelEntry* SkinnyKernel(DType in, bool trans_b) {
  const kernels::BuiltKernel* b = Built(
      KernelQuery(KernelFamily::kSm90Skinny).In(in).Transposes(false, trans_b));
  return b ? b->skinny : nullptr;
}

// Any output dtype: the slices write float32 partials and the reduction
// casts.
const KernelEntry* Sm90SplitKKernel(DType in, bool ta, bool tb) {
  return Gemm(
      KernelQuery(KernelFamily::kSm90SplitK).In(in).Transposes(ta, tb));
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
         "; rule: an sm90 path falls back to generic unless the device is "
         "sm_90, the kernel exists, alignment holds and "
         "the options allow SM90 kernels";
}

}  // namespace cuda
}  // namespace jax_dynoff
