// Direct SM90 path (no pointer kernel), sm_90a only: f16 x @ W, the tiny
// tile in clusters of two along M (B multicast), for one-item calls with two
// rows of output tiles whose windows suit the direct kernels
// (kernels/sm90_direct.h).
#include "kernels/sm90_direct.h"

JAX_DYNOFF_SM90_DIRECT_KERNEL(kSm90DirectTinyPairF16NN,
                              Sm90DirectTinyPairConfig, cutlass::half_t)
