// Direct SM90 path (no pointer kernel, no staging), sm_90a only: float32
// x @ W at default precision (TF32 wgmma, B through registers), 128 x 128
// output tiles, ping-pong, for one-item calls whose windows suit it
// (kernels/sm90_direct_tf32.h).
#include "kernels/sm90_direct_tf32.h"

JAX_DYNOFF_SM90_DIRECT_TF32_KERNEL(kSm90DirectMediumF32NN,
                                   Sm90DirectTf32MediumConfig)
