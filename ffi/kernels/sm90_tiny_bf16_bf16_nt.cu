// SM90 path (CUTLASS 3.x ptr-array TMA warp-specialized), sm_90a only.
// bf16 x @ W.T (transpose_b), very few tiles (64x64 tiles).
#include "kernels/sm90_gemm.h"

JAX_DYNOFF_SM90_KERNEL(kSm90TinyBf16Bf16NT, Sm90TinyConfig, cutlass::bfloat16_t, cutlass::bfloat16_t,
                       cutlass::layout::RowMajor, cutlass::layout::ColumnMajor)
