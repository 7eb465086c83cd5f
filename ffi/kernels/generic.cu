// Generic kernels (kernels/generic_gemm.h): CUTLASS 2.x SIMT, every architecture.
//
// One translation unit for the family: nvcc spends most of a unit's time
// parsing the CUTLASS headers, not on one kernel, so the kernels of one
// header compile together.  Each instantiation keeps its line of why.
#include "kernels/generic_gemm.h"

// Generic path (CUTLASS 2.x SIMT, kArray, alignment 1, any layout): float32 in, float32 out.
// Serves f32 at every precision: SIMT products are full fp32 (no tf32).
JAX_DYNOFF_GENERIC_KERNEL(kGenericF32F32, float, float)

// Generic path (CUTLASS 2.x SIMT, kArray, alignment 1, any layout): bfloat16 in, bfloat16 out.
// Unaligned or transposed-both bf16 windows, and bf16 on GPUs other than sm_90.
JAX_DYNOFF_GENERIC_KERNEL(kGenericBf16Bf16, cutlass::bfloat16_t, cutlass::bfloat16_t)

// Generic path (CUTLASS 2.x SIMT, kArray, alignment 1, any layout): bfloat16 in, float32 out.
// bf16 inputs accumulated into an f32 buffer (no SM90 kernel for this pair).
JAX_DYNOFF_GENERIC_KERNEL(kGenericBf16F32, cutlass::bfloat16_t, float)

// Generic path (CUTLASS 2.x SIMT, kArray, alignment 1, any layout): float16 in, float16 out.
// Unaligned / uncovered-layout f16 windows, and f16 on GPUs other than sm_90.
JAX_DYNOFF_GENERIC_KERNEL(kGenericF16F16, cutlass::half_t, cutlass::half_t)

// Generic path (CUTLASS 2.x SIMT, kArray, alignment 1, any layout): float16 in, float32 out.
// f16 inputs accumulated into an f32 buffer (no SM90 kernel for this pair).
JAX_DYNOFF_GENERIC_KERNEL(kGenericF16F32, cutlass::half_t, float)
