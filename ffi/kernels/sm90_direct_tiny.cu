// Direct SM90 kernels (kernels/sm90_direct.h), the tiny tile.
//
// One translation unit for the family: nvcc spends most of a unit's time
// parsing the CUTLASS headers, not on one kernel, so the kernels of one
// header compile together.  Each instantiation keeps its line of why.
#include "kernels/sm90_direct.h"

// Direct SM90 path (no pointer kernel), sm_90a only: bf16 x @ W, the tiny
// tile (64x64, ping-pong), for one-item calls planned for the tiny
// ptr-array tile whose windows suit it (kernels/sm90_direct.h).
JAX_DYNOFF_SM90_DIRECT_KERNEL(kSm90DirectTinyBf16NN, Sm90DirectTinyConfig,
                              cutlass::bfloat16_t)

// Direct SM90 path (no pointer kernel), sm_90a only: bf16, B transposed (x @
// W^T: B stored n x k), the tiny tile, for one-item calls whose windows suit
// it (kernels/sm90_direct.h).
JAX_DYNOFF_SM90_DIRECT_KERNEL_T(kSm90DirectTinyBf16NT, Sm90DirectTinyConfig,
                                cutlass::bfloat16_t, false, true)

// Direct SM90 path (no pointer kernel), sm_90a only: bf16, A transposed (X^T @
// dY: A stored k x m), the tiny tile, for one-item calls whose windows suit it
// (kernels/sm90_direct.h).
JAX_DYNOFF_SM90_DIRECT_KERNEL_T(kSm90DirectTinyBf16TN, Sm90DirectTinyConfig,
                                cutlass::bfloat16_t, true, false)

// Direct SM90 path (no pointer kernel), sm_90a only: f16 x @ W, the tiny
// tile (64x64, ping-pong), for one-item calls planned for the tiny
// ptr-array tile whose windows suit it (kernels/sm90_direct.h).
JAX_DYNOFF_SM90_DIRECT_KERNEL(kSm90DirectTinyF16NN, Sm90DirectTinyConfig,
                              cutlass::half_t)
