// Direct SM90 path (no pointer kernel, no staging), sm_90a only: float32
// x @ W at default precision (TF32 wgmma, B through registers), 256 x 128
// output tiles, for one-item calls whose windows suit it
// (kernels/sm90_direct_tf32.h).
#include "kernels/sm90_direct_tf32.h"

JAX_DYNOFF_SM90_DIRECT_TF32_KERNEL(kSm90DirectLargeF32NN,
                                   Sm90DirectTf32LargeConfig)
