// SM90 TF32 ptr-array kernels (kernels/sm90_tf32_gemm.h): float32.
//
// One translation unit for the family: nvcc spends most of a unit's time
// parsing the CUTLASS headers, not on one kernel, so the kernels of one
// header compile together.  Each instantiation keeps its line of why.
#include "kernels/sm90_tf32_gemm.h"

// SM90 TF32 path (CUTLASS 3.x ptr-array TMA warp-specialized), sm_90a only:
// float32 at default precision and, on staged TF32 parts, at HIGHEST; the
// large tile.  A row-major (m x k), B stored n x k: both K-major.
JAX_DYNOFF_SM90_KERNEL(kSm90Tf32LargeNT, Sm90Tf32LargeConfig, float, float,
                       cutlass::layout::RowMajor, cutlass::layout::ColumnMajor)

// SM90 TF32 path (CUTLASS 3.x ptr-array TMA warp-specialized), sm_90a only:
// float32 at default precision and, on staged TF32 parts, at HIGHEST; the
// medium tile.  A row-major (m x k), B stored n x k: both K-major.
JAX_DYNOFF_SM90_KERNEL(kSm90Tf32MediumNT, Sm90Tf32MediumConfig, float, float,
                       cutlass::layout::RowMajor, cutlass::layout::ColumnMajor)

// SM90 3xTF32 path (precision=HIGHEST on staged TF32 parts; CUTLASS 3.x
// ptr-array TMA warp-specialized), sm_90a only: 128x128x32 cooperative with
// its accumulators promoted to CUDA-core float32 every k-tile.
JAX_DYNOFF_SM90_TF32_PROMOTED_KERNEL(kSm90Tf32HighestNT, Sm90Tf32HighestConfig)
