// SM90 ptr-array split-K slice kernels (kernels/sm90_gemm.h).
//
// One translation unit for the family: nvcc spends most of a unit's time
// parsing the CUTLASS headers, not on one kernel, so the kernels of one
// header compile together.  Each instantiation keeps its line of why.
#include "kernels/sm90_gemm.h"

// SM90 split-K path (CUTLASS 3.x ptr-array TMA warp-specialized), sm_90a only.
// bf16 x @ W with skinny m (m <= 64, e.g. stacked-weights layers at m = 16):
// one K slice per ptr-array item, float32 partials (reduced by ffi/cuda/prep_kernels.cu).
JAX_DYNOFF_SM90_SPLITK_KERNEL(kSm90SplitKBf16NN, cutlass::bfloat16_t,
                              cutlass::layout::RowMajor, cutlass::layout::RowMajor)

// SM90 split-K path (CUTLASS 3.x ptr-array TMA warp-specialized), sm_90a only.
// f16 x @ W with skinny m (m <= 64): one K slice per ptr-array item, float32
// partials (reduced by ffi/cuda/prep_kernels.cu).
JAX_DYNOFF_SM90_SPLITK_KERNEL(kSm90SplitKF16NN, cutlass::half_t,
                              cutlass::layout::RowMajor, cutlass::layout::RowMajor)
