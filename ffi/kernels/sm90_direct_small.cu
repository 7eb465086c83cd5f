// Direct SM90 kernels (kernels/sm90_direct.h), the small_m tile.
//
// One translation unit for the family: nvcc spends most of a unit's time
// parsing the CUTLASS headers, not on one kernel, so the kernels of one
// header compile together.  Each instantiation keeps its line of why.
#include "kernels/sm90_direct.h"

// Direct SM90 path (no pointer kernel), sm_90a only: bf16 x @ W, the small
// tile (64x128, ping-pong), for one-item calls planned for the small
// ptr-array tile whose windows suit it (kernels/sm90_direct.h).
JAX_DYNOFF_SM90_DIRECT_KERNEL(kSm90DirectSmallBf16NN, Sm90DirectSmallConfig,
                              cutlass::bfloat16_t)

// Direct SM90 path (no pointer kernel), sm_90a only: bf16, B transposed (x @
// W^T: B stored n x k), the small tile, for one-item calls whose windows suit
// it (kernels/sm90_direct.h).
JAX_DYNOFF_SM90_DIRECT_KERNEL_T(kSm90DirectSmallBf16NT, Sm90DirectSmallConfig,
                                cutlass::bfloat16_t, false, true)

// Direct SM90 path (no pointer kernel), sm_90a only: bf16, A transposed (X^T @
// dY: A stored k x m), the small tile, for one-item calls whose windows suit
// it (kernels/sm90_direct.h).
JAX_DYNOFF_SM90_DIRECT_KERNEL_T(kSm90DirectSmallBf16TN, Sm90DirectSmallConfig,
                                cutlass::bfloat16_t, true, false)

// Direct SM90 path (no pointer kernel), sm_90a only: f16 x @ W, the small
// tile (64x128, ping-pong), for one-item calls planned for the small
// ptr-array tile whose windows suit it (kernels/sm90_direct.h).
JAX_DYNOFF_SM90_DIRECT_KERNEL(kSm90DirectSmallF16NN, Sm90DirectSmallConfig,
                              cutlass::half_t)
