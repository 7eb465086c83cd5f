// Direct SM90 path (no pointer kernel), sm_90a only: f16 x @ W, the tiny
// tile (64x64, ping-pong), for one-item calls planned for the tiny
// ptr-array tile whose windows suit it (kernels/sm90_direct.h).
#include "kernels/sm90_direct.h"

JAX_DYNOFF_SM90_DIRECT_KERNEL(kSm90DirectTinyF16NN, Sm90DirectTinyConfig,
                              cutlass::half_t)
