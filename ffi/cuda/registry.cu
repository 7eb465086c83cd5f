// The kernel registry (see registry.h).
#include "cuda/registry.h"

#include <cuda_runtime_api.h>

#include "kernels/sm90_tf32.h"

#define JAX_DYNOFF_STR2(x) #x
#define JAX_DYNOFF_STRINGIFY(x) JAX_DYNOFF_STR2(x)

namespace jax_dynoff {
namespace cuda {

const KernelEntry* GenericKernel(DType in, DType out) {
  using namespace kernels;
  if (in == DType::kF32 && out == DType::kF32) return &kGenericF32F32;
  if (in == DType::kBF16 && out == DType::kBF16) return &kGenericBf16Bf16;
  if (in == DType::kBF16 && out == DType::kF32) return &kGenericBf16F32;
  if (in == DType::kF16 && out == DType::kF16) return &kGenericF16F16;
  if (in == DType::kF16 && out == DType::kF32) return &kGenericF16F32;
  return nullptr;
}

// The SM90 kernel for an unsplit SM90 path (one tile configuration each),
// or nullptr when none is built for the dtypes and transposes.
const KernelEntry* Sm90Kernel(Path path, DType in, DType out, bool ta,
                              bool tb) {
#ifdef JAX_DYNOFF_WITH_SM90
  using namespace kernels;
  // Per tile: bf16 NN, NT, TN, f16 NN (the planner's HasSm90Kernel).
  struct Set { const KernelEntry *bf16_nn, *bf16_nt, *bf16_tn, *f16_nn; };
  static const Set kLarge{&kSm90LargeBf16Bf16NN, &kSm90LargeBf16Bf16NT,
                          &kSm90LargeBf16Bf16TN, &kSm90LargeF16F16NN};
  static const Set kMedium{&kSm90MediumBf16Bf16NN, &kSm90MediumBf16Bf16NT,
                           &kSm90MediumBf16Bf16TN, &kSm90MediumF16F16NN};
  static const Set kSmall{&kSm90SmallBf16Bf16NN, &kSm90SmallBf16Bf16NT,
                          &kSm90SmallBf16Bf16TN, &kSm90SmallF16F16NN};
  static const Set kTiny{&kSm90TinyBf16Bf16NN, &kSm90TinyBf16Bf16NT,
                         &kSm90TinyBf16Bf16TN, &kSm90TinyF16F16NN};
  const Set* set = nullptr;
  switch (path) {
    case Path::kSm90Large: set = &kLarge; break;
    case Path::kSm90Medium: set = &kMedium; break;
    case Path::kSm90SmallM: set = &kSmall; break;
    case Path::kSm90Tiny: set = &kTiny; break;
    default: return nullptr;
  }
  if (in == DType::kBF16 && out == DType::kBF16) {
    if (!ta && !tb) return set->bf16_nn;
    if (!ta && tb) return set->bf16_nt;
    if (ta && !tb) return set->bf16_tn;
  }
  if (in == DType::kF16 && out == DType::kF16 && !ta && !tb)
    return set->f16_nn;
  // float32: one K-major kernel per tile serves every transpose (the
  // runner stages MN-major operands; kernels/sm90_tf32.h).
  if (in == DType::kF32 && out == DType::kF32) {
    if (path == Path::kSm90Large) return &kSm90Tf32LargeNT;
    if (path == Path::kSm90Medium) return &kSm90Tf32MediumNT;
  }
#endif
  (void)path; (void)in; (void)out; (void)ta; (void)tb;
  return nullptr;
}

const KernelEntry* Sm90Tf32HighestKernel(Path path) {
#ifdef JAX_DYNOFF_WITH_SM90
  using namespace kernels;
  // One promoted tile serves both float32 tile paths (sm90_tf32_gemm.h).
  if (path == Path::kSm90Large || path == Path::kSm90Medium)
    return &kSm90Tf32HighestNT;
#endif
  (void)path;
  return nullptr;
}

// The direct kernel of `tile`, or nullptr when none is built for the dtypes
// and transposes.
const DirectKernelEntry* Sm90DirectKernel(DType in, DType out, bool ta,
                                          bool tb, DirectTile tile) {
#ifdef JAX_DYNOFF_WITH_SM90
  using namespace kernels;
  if (!HasDirectKernel(in, out, ta, tb, tile)) return nullptr;
  if (in == DType::kF32)  // NN, TF32 (planner.cc HasDirectKernel)
    return tile == DirectTile::kLarge ? &kSm90DirectLargeF32NN
                                      : &kSm90DirectMediumF32NN;
  const bool bf16 = in == DType::kBF16;
  if (ta || tb) {  // bfloat16 NT / TN (planner.cc HasDirectKernel)
    switch (tile) {
      case DirectTile::kMedium:
        return ta ? &kSm90DirectMediumBf16TN : &kSm90DirectMediumBf16NT;
      case DirectTile::kSmall:
        return ta ? &kSm90DirectSmallBf16TN : &kSm90DirectSmallBf16NT;
      case DirectTile::kTiny:
        return ta ? &kSm90DirectTinyBf16TN : &kSm90DirectTinyBf16NT;
      default:
        return nullptr;
    }
  }
  switch (tile) {
    case DirectTile::kLarge:
      return bf16 ? &kSm90DirectLargeBf16NN : &kSm90DirectLargeF16NN;
    case DirectTile::kWide:
      return bf16 ? &kSm90DirectWideBf16NN : &kSm90DirectWideF16NN;
    case DirectTile::kMedium:
      return bf16 ? &kSm90DirectMediumBf16NN : &kSm90DirectMediumF16NN;
    case DirectTile::kSmall:
      return bf16 ? &kSm90DirectSmallBf16NN : &kSm90DirectSmallF16NN;
    case DirectTile::kTiny:
      return bf16 ? &kSm90DirectTinyBf16NN : &kSm90DirectTinyF16NN;
    case DirectTile::kSplitK:
      return bf16 ? &kSm90DirectSplitKBf16NN : &kSm90DirectSplitKF16NN;
    case DirectTile::kClusterK:
      return bf16 ? &kSm90DirectClusterKBf16NN : &kSm90DirectClusterKF16NN;
    case DirectTile::kNone:
      return nullptr;
  }
#endif
  (void)in; (void)out; (void)ta; (void)tb; (void)tile;
  return nullptr;
}

// The grouped kernel of a tile for the dtypes and transposes, or nullptr
// where it is not built (planner.cc HasGroupedTile says the same).
const GroupedKernelEntry* Sm90GroupedKernel(DType in, DType out, bool ta,
                                            bool tb, GroupedTile tile) {
#ifdef JAX_DYNOFF_WITH_SM90
  using namespace kernels;
  const bool bf16_nn = in == DType::kBF16 && out == DType::kBF16 && !ta && !tb;
  if (tile == GroupedTile::kWide)
    return bf16_nn ? &kSm90GroupedWideBf16NN : nullptr;
  if (tile != GroupedTile::kMedium) return nullptr;
  if (in == DType::kBF16 && out == DType::kBF16) {
    if (!ta && !tb) return &kSm90GroupedBf16NN;
    if (!ta && tb) return &kSm90GroupedBf16NT;
    if (ta && !tb) return &kSm90GroupedBf16TN;
  }
  if (in == DType::kF16 && out == DType::kF16 && !ta && !tb)
    return &kSm90GroupedF16NN;
#endif
  (void)in; (void)out; (void)ta; (void)tb; (void)tile;
  return nullptr;
}

// The skinny kernel (kernels/sm90_skinny.h) for the input dtype and B's
// layout, or nullptr when none is built for them (the planner chose the
// path by its rules: HasSkinnyKernel).
const SkinnyKernelEntry* SkinnyKernel(DType in, bool trans_b) {
#ifdef JAX_DYNOFF_WITH_SM90
  using namespace kernels;
  if (in == DType::kBF16)
    return trans_b ? &kSm90Skinny16Bf16NT : &kSm90Skinny16Bf16NN;
  if (in == DType::kF16 && !trans_b) return &kSm90Skinny16F16NN;
#endif
  (void)in;
  (void)trans_b;
  return nullptr;
}

// The TF32 kernel for the transposes (float32 in and out only).
const KernelEntry* Tf32Kernel(DType in, DType out, bool ta, bool tb) {
  using namespace kernels;
  if (in != DType::kF32 || out != DType::kF32) return nullptr;
  if (!ta) return tb ? &kTf32NT : &kTf32NN;
  return tb ? &kTf32TT : &kTf32TN;
}

// The split-K slice kernel (float32 partials, any output dtype: the
// reduction casts), or nullptr when none is built for it.
const KernelEntry* Sm90SplitKKernel(DType in, bool ta, bool tb) {
#ifdef JAX_DYNOFF_WITH_SM90
  using namespace kernels;
  if (ta || tb) return nullptr;
  if (in == DType::kBF16) return &kSm90SplitKBf16NN;
  if (in == DType::kF16) return &kSm90SplitKF16NN;
#endif
  (void)in; (void)ta; (void)tb;
  return nullptr;
}

#ifndef JAX_DYNOFF_CUDA_ARCHS_STR
#define JAX_DYNOFF_CUDA_ARCHS_STR "unknown"
#endif

const char* BuildInfo() {
  return "jax_dynoff CUDA build; archs=" JAX_DYNOFF_CUDA_ARCHS_STR
         "; cuda=" JAX_DYNOFF_STRINGIFY(CUDART_VERSION)
#ifdef JAX_DYNOFF_WITH_SM90
         "; sm90=yes (ptr-array TMA: large 256x128x64 cooperative 1x2, "
         "medium 128x128x64, small_m 64x128x64, tiny 64x64x64 pingpong; "
         "bf16->bf16 NN/NT/TN, f16->f16 NN; split_k "
         "64x128x64 pingpong f32 partials + reduction, bf16/f16 NN, "
         "opt-in: planned only with KernelOptions(split_k=True); direct (non-array) "
         "twins of each tile, bf16/f16 NN: large 256x128 cooperative 1x2 "
         "and wide 128x256 cooperative 2x1 for the large path, medium, "
         "small_m and tiny ping-pong, and for split_k 128x128 "
         "cooperative on the stream-K scheduler in split-K mode, for "
         "one-item calls whose windows suit them, "
         "KernelOptions(direct=False) keeps ptr-array; cluster_k for the "
         "tiny path where KernelOptions(direct_tile='cluster_k') forces "
         "it: 64x64 tiles whose K is split across a cluster of up to 8 "
         "CTAs and reduced in distributed shared memory, bf16/f16 NN); "
         "skinny m <= 16 bf16/f16 NN and bf16 NT: mma.sync 16x128 CTAs "
         "sharing K in a cluster, one launch (KernelOptions(skinny=False) "
         "runs the tiny tile); grouped (ragged windows) 128x128x64 "
         "ping-pong, problem shapes on the device, bf16 NN/NT/TN, f16 NN; "
         "256x128x64 cooperative 1x2 bf16 NN (the default there)"
#else
         "; sm90=no"
#endif
         "; generic=CUTLASS 2.x SIMT kArray, alignment 1, any transpose "
         "(f32, bf16->bf16, bf16->f32, f16->f16, f16->f32)"
         "; tf32=CUTLASS 2.x tensor-op kArray, alignment 1, f32 NN/NT/TN/TT "
         "(default precision where the SM90 TF32 kernels cannot run; "
         "KernelOptions(tf32=False) sends it to generic)"
#ifdef JAX_DYNOFF_WITH_SM90
         "; sm90 tf32=ptr-array TMA wgmma, f32 in/out/C, A and B K-major "
         "(MN-major operands staged K-major in the workspace), large "
         "256x128x32 cooperative 1x2 and medium 128x128x32 pingpong; "
         "direct twins of both tiles for f32 NN (one launch, no staging: "
         "D^T = B^T A^T with B through registers), for one-item calls "
         "whose windows suit them; "
         "precision=HIGHEST as 3xTF32 (operands split into TF32 parts by "
         "the staging, K x 3) on 128x128x32 cooperative with "
         "promoted accumulators"
#endif
         "; rule: an sm90 path falls back to generic unless the device is "
         "sm_90, the kernel exists, alignment holds and "
         "the options allow SM90 kernels";
}

}  // namespace cuda
}  // namespace jax_dynoff
