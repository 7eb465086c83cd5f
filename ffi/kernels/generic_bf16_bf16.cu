// Generic path (CUTLASS 2.x SIMT, kArray, alignment 1, any layout): bfloat16 in, bfloat16 out.
// Unaligned or transposed-both bf16 windows, and bf16 on GPUs other than sm_90.
#include "kernels/generic_gemm.h"

JAX_DYNOFF_GENERIC_KERNEL(kGenericBf16Bf16, cutlass::bfloat16_t, cutlass::bfloat16_t)
