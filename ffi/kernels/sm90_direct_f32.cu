// Direct SM90 TF32 kernels for float32 NN (kernels/sm90_direct_tf32.h).
//
// One translation unit for the family: nvcc spends most of a unit's time
// parsing the CUTLASS headers, not on one kernel, so the kernels of one
// header compile together.  Each instantiation keeps its line of why.
#include "kernels/sm90_direct_tf32.h"

// Direct SM90 path (no pointer kernel, no staging), sm_90a only: float32
// x @ W at default precision (TF32 wgmma, B through registers), 256 x 128
// output tiles, for one-item calls whose windows suit it
// (kernels/sm90_direct_tf32.h).
JAX_DYNOFF_SM90_DIRECT_TF32_KERNEL(kSm90DirectLargeF32NN,
                                   Sm90DirectTf32LargeConfig)

// Direct SM90 path (no pointer kernel, no staging), sm_90a only: float32
// x @ W at default precision (TF32 wgmma, B through registers), 128 x 128
// output tiles, ping-pong, for one-item calls whose windows suit it
// (kernels/sm90_direct_tf32.h).
JAX_DYNOFF_SM90_DIRECT_TF32_KERNEL(kSm90DirectMediumF32NN,
                                   Sm90DirectTf32MediumConfig)
