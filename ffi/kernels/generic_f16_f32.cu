// Generic path (CUTLASS 2.x SIMT, kArray, alignment 1, any layout): float16 in, float32 out.
// f16 inputs accumulated into an f32 buffer (no SM90 kernel for this pair).
#include "kernels/generic_gemm.h"

JAX_DYNOFF_GENERIC_KERNEL(kGenericF16F32, cutlass::half_t, float)
