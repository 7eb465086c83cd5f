// Direct SM90 path (no pointer kernel), sm_90a only: bf16 x @ W, large
// tiles, for one-item calls whose windows suit it (kernels/sm90_direct.h).
#include "kernels/sm90_direct.h"

JAX_DYNOFF_SM90_DIRECT_KERNEL(kSm90DirectLargeBf16NN, Sm90DirectLargeConfig,
                              cutlass::bfloat16_t)
