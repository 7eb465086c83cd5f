// TF32 path (CUTLASS 2.x tensor-op, kArray, alignment 1): float32 x @ W at
// default precision, sm_80 and newer.
#include "kernels/tf32_gemm.h"

JAX_DYNOFF_TF32_KERNEL(kTf32NN, cutlass::layout::RowMajor, cutlass::layout::RowMajor)
