// Skinny SM90 path, sm_90a only: f16 x @ W for m <= 16 (stacked-weight
// layers, decode steps), one launch streaming B (kernels/sm90_skinny.h).
#include "kernels/sm90_skinny.h"

JAX_DYNOFF_SM90_SKINNY_KERNEL(kSm90Skinny16F16NN, __half, 1)
