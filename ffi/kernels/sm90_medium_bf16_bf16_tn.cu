// SM90 path (CUTLASS 3.x ptr-array TMA warp-specialized), sm_90a only.
// bf16 x.T @ dy (transpose_a: the weight gradient), mid-size problems (128x128 tiles).
#include "kernels/sm90_gemm.h"

JAX_DYNOFF_SM90_KERNEL(kSm90MediumBf16Bf16TN, Sm90MediumConfig, cutlass::bfloat16_t, cutlass::bfloat16_t,
                       cutlass::layout::ColumnMajor, cutlass::layout::RowMajor)
