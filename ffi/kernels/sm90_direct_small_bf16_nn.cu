// Direct SM90 path (no pointer kernel), sm_90a only: bf16 x @ W, the small
// tile (64x128, ping-pong), for one-item calls planned for the small
// ptr-array tile whose windows suit it (kernels/sm90_direct.h).
#include "kernels/sm90_direct.h"

JAX_DYNOFF_SM90_DIRECT_KERNEL(kSm90DirectSmallBf16NN, Sm90DirectSmallConfig,
                              cutlass::bfloat16_t)
