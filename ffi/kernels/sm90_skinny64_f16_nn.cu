// Skinny SM90 path, sm_90a only: f16 x @ W in row blocks of 64 (small
// GEMMs of more rows), one launch streaming B (kernels/sm90_skinny.h).
#include "kernels/sm90_skinny.h"

JAX_DYNOFF_SM90_SKINNY_KERNEL(kSm90Skinny64F16NN, __half, 4)
