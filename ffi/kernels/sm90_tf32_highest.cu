// SM90 3xTF32 path (precision=HIGHEST on staged TF32 parts; CUTLASS 3.x
// ptr-array TMA warp-specialized), sm_90a only: 128x128x32 cooperative with
// its accumulators promoted to CUDA-core float32 every k-tile.
#include "kernels/sm90_tf32_gemm.h"

JAX_DYNOFF_SM90_TF32_PROMOTED_KERNEL(kSm90Tf32HighestNT, Sm90Tf32HighestConfig)
