// Direct SM90 path (no pointer kernel), sm_90a only: f16 x @ W, the small
// tile (64x128, ping-pong), for one-item calls planned for the small
// ptr-array tile whose windows suit it (kernels/sm90_direct.h).
#include "kernels/sm90_direct.h"

JAX_DYNOFF_SM90_DIRECT_KERNEL(kSm90DirectSmallF16NN, Sm90DirectSmallConfig,
                              cutlass::half_t)
