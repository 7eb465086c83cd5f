// Generic path (CUTLASS 2.x SIMT, kArray, alignment 1, any layout): float16 in, float16 out.
// Unaligned / uncovered-layout f16 windows, and f16 on GPUs other than sm_90.
#include "kernels/generic_gemm.h"

JAX_DYNOFF_GENERIC_KERNEL(kGenericF16F16, cutlass::half_t, cutlass::half_t)
