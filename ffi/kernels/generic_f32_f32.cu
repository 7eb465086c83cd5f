// Generic path (CUTLASS 2.x SIMT, kArray, alignment 1, any layout): float32 in, float32 out.
// Serves f32 at every precision: SIMT products are full fp32 (no tf32).
#include "kernels/generic_gemm.h"

JAX_DYNOFF_GENERIC_KERNEL(kGenericF32F32, float, float)
