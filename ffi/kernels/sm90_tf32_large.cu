// SM90 TF32 path (CUTLASS 3.x ptr-array TMA warp-specialized), sm_90a only:
// float32 at default precision and, on staged TF32 parts, at HIGHEST; the
// large tile.  A row-major (m x k), B stored n x k: both K-major.
#include "kernels/sm90_tf32_gemm.h"

JAX_DYNOFF_SM90_KERNEL(kSm90Tf32LargeNT, Sm90Tf32LargeConfig, float, float,
                       cutlass::layout::RowMajor, cutlass::layout::ColumnMajor)
