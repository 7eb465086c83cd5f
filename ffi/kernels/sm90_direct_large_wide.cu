// Direct SM90 kernels (kernels/sm90_direct.h), the large path's two tiles.
//
// One translation unit for the family: nvcc spends most of a unit's time
// parsing the CUTLASS headers, not on one kernel, so the kernels of one
// header compile together.  Each instantiation keeps its line of why.
#include "kernels/sm90_direct.h"

// Direct SM90 path (no pointer kernel), sm_90a only: bf16 x @ W, large
// tiles, for one-item calls whose windows suit it (kernels/sm90_direct.h).
JAX_DYNOFF_SM90_DIRECT_KERNEL(kSm90DirectLargeBf16NN, Sm90DirectLargeConfig,
                              cutlass::bfloat16_t)

// Direct SM90 path (no pointer kernel), sm_90a only: f16 x @ W, large
// tiles, for one-item calls whose windows suit it (kernels/sm90_direct.h).
JAX_DYNOFF_SM90_DIRECT_KERNEL(kSm90DirectLargeF16NN, Sm90DirectLargeConfig,
                              cutlass::half_t)

// Direct SM90 path (no pointer kernel), sm_90a only: bf16 x @ W, the wide
// tile (128x256), for one-item calls whose windows suit it (kernels/sm90_direct.h).
JAX_DYNOFF_SM90_DIRECT_KERNEL(kSm90DirectWideBf16NN, Sm90DirectWideConfig,
                              cutlass::bfloat16_t)

// Direct SM90 path (no pointer kernel), sm_90a only: f16 x @ W, the wide
// tile (128x256), for one-item calls whose windows suit it (kernels/sm90_direct.h).
JAX_DYNOFF_SM90_DIRECT_KERNEL(kSm90DirectWideF16NN, Sm90DirectWideConfig,
                              cutlass::half_t)
