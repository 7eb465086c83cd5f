// SM90 skinny kernels (kernels/sm90_skinny.h): m <= 16.
//
// One translation unit for the family: nvcc spends most of a unit's time
// parsing the CUTLASS headers, not on one kernel, so the kernels of one
// header compile together.  Each instantiation keeps its line of why.
#include "kernels/sm90_skinny.h"

// Skinny SM90 path, sm_90a only: bf16 x @ W for m <= 16 (stacked-weight
// layers, decode steps), one launch streaming B (kernels/sm90_skinny.h).
JAX_DYNOFF_SM90_SKINNY_KERNEL(kSm90Skinny16Bf16NN, __nv_bfloat16, 1, false)

// Skinny SM90 path, sm_90a only: f16 x @ W for m <= 16 (stacked-weight
// layers, decode steps), one launch streaming B (kernels/sm90_skinny.h).
JAX_DYNOFF_SM90_SKINNY_KERNEL(kSm90Skinny16F16NN, __half, 1, false)

// Skinny SM90 path, sm_90a only: bf16 x @ W^T for m <= 16 (the gradient
// wrt x of a skinny layer, dX = dY W^T), B's rows K-contiguous.
JAX_DYNOFF_SM90_SKINNY_KERNEL(kSm90Skinny16Bf16NT, __nv_bfloat16, 1, true)
