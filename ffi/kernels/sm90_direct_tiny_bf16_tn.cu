// Direct SM90 path (no pointer kernel), sm_90a only: bf16, A transposed (X^T @
// dY: A stored k x m), the tiny tile, for one-item calls whose windows suit it
// (kernels/sm90_direct.h).
#include "kernels/sm90_direct.h"

JAX_DYNOFF_SM90_DIRECT_KERNEL_T(kSm90DirectTinyBf16TN, Sm90DirectTinyConfig,
                                cutlass::bfloat16_t, true, false)
