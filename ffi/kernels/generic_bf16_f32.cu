// Generic path (CUTLASS 2.x SIMT, kArray, alignment 1, any layout): bfloat16 in, float32 out.
// bf16 inputs accumulated into an f32 buffer (no SM90 kernel for this pair).
#include "kernels/generic_gemm.h"

JAX_DYNOFF_GENERIC_KERNEL(kGenericBf16F32, cutlass::bfloat16_t, float)
