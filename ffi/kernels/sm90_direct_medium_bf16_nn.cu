// Direct SM90 path (no pointer kernel), sm_90a only: bf16 x @ W, the medium
// tile (128x128, ping-pong), for one-item calls planned for the medium
// ptr-array tile whose windows suit it (kernels/sm90_direct.h).
#include "kernels/sm90_direct.h"

JAX_DYNOFF_SM90_DIRECT_KERNEL(kSm90DirectMediumBf16NN, Sm90DirectMediumConfig,
                              cutlass::bfloat16_t)
