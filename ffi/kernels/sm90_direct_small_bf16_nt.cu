// Direct SM90 path (no pointer kernel), sm_90a only: bf16, B transposed (x @
// W^T: B stored n x k), the small tile, for one-item calls whose windows suit
// it (kernels/sm90_direct.h).
#include "kernels/sm90_direct.h"

JAX_DYNOFF_SM90_DIRECT_KERNEL_T(kSm90DirectSmallBf16NT, Sm90DirectSmallConfig,
                                cutlass::bfloat16_t, false, true)
