// TF32 kernels (kernels/tf32_gemm.h): CUTLASS 2.x tensor-op, sm_80 and newer.
//
// One translation unit for the family: nvcc spends most of a unit's time
// parsing the CUTLASS headers, not on one kernel, so the kernels of one
// header compile together.  Each instantiation keeps its line of why.
#include "kernels/tf32_gemm.h"

// TF32 path (CUTLASS 2.x tensor-op, kArray, alignment 1): float32 x @ W at
// default precision, sm_80 and newer.
JAX_DYNOFF_TF32_KERNEL(kTf32NN, cutlass::layout::RowMajor, cutlass::layout::RowMajor)

// TF32 path (CUTLASS 2.x tensor-op, kArray, alignment 1): float32 x @ W.T at
// default precision, sm_80 and newer.
JAX_DYNOFF_TF32_KERNEL(kTf32NT, cutlass::layout::RowMajor, cutlass::layout::ColumnMajor)

// TF32 path (CUTLASS 2.x tensor-op, kArray, alignment 1): float32 x.T @ dy at
// default precision, sm_80 and newer.
JAX_DYNOFF_TF32_KERNEL(kTf32TN, cutlass::layout::ColumnMajor, cutlass::layout::RowMajor)

// TF32 path (CUTLASS 2.x tensor-op, kArray, alignment 1): float32 a.T @ b.T at
// default precision, sm_80 and newer.
JAX_DYNOFF_TF32_KERNEL(kTf32TT, cutlass::layout::ColumnMajor, cutlass::layout::ColumnMajor)
