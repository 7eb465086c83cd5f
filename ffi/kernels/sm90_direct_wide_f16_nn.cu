// Direct SM90 path (no pointer kernel), sm_90a only: f16 x @ W, the wide
// tile (128x256), for one-item calls whose windows suit it (kernels/sm90_direct.h).
#include "kernels/sm90_direct.h"

JAX_DYNOFF_SM90_DIRECT_KERNEL(kSm90DirectWideF16NN, Sm90DirectWideConfig,
                              cutlass::half_t)
