// SM90 ptr-array kernels (kernels/sm90_gemm.h), the medium tile.
//
// One translation unit for the family: nvcc spends most of a unit's time
// parsing the CUTLASS headers, not on one kernel, so the kernels of one
// header compile together.  Each instantiation keeps its line of why.
#include "kernels/sm90_gemm.h"

// SM90 path (CUTLASS 3.x ptr-array TMA warp-specialized), sm_90a only.
// bf16 x @ W, mid-size problems (128x128 tiles).
JAX_DYNOFF_SM90_KERNEL(kSm90MediumBf16Bf16NN, Sm90MediumConfig, cutlass::bfloat16_t, cutlass::bfloat16_t,
                       cutlass::layout::RowMajor, cutlass::layout::RowMajor)

// SM90 path (CUTLASS 3.x ptr-array TMA warp-specialized), sm_90a only.
// bf16 x @ W.T (transpose_b), mid-size problems (128x128 tiles).
JAX_DYNOFF_SM90_KERNEL(kSm90MediumBf16Bf16NT, Sm90MediumConfig, cutlass::bfloat16_t, cutlass::bfloat16_t,
                       cutlass::layout::RowMajor, cutlass::layout::ColumnMajor)

// SM90 path (CUTLASS 3.x ptr-array TMA warp-specialized), sm_90a only.
// bf16 x.T @ dy (transpose_a: the weight gradient), mid-size problems (128x128 tiles).
JAX_DYNOFF_SM90_KERNEL(kSm90MediumBf16Bf16TN, Sm90MediumConfig, cutlass::bfloat16_t, cutlass::bfloat16_t,
                       cutlass::layout::ColumnMajor, cutlass::layout::RowMajor)

// SM90 path (CUTLASS 3.x ptr-array TMA warp-specialized), sm_90a only.
// f16 x @ W, mid-size problems (128x128 tiles).
JAX_DYNOFF_SM90_KERNEL(kSm90MediumF16F16NN, Sm90MediumConfig, cutlass::half_t, cutlass::half_t,
                       cutlass::layout::RowMajor, cutlass::layout::RowMajor)
