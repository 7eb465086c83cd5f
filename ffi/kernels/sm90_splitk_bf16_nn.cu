// SM90 split-K path (CUTLASS 3.x ptr-array TMA warp-specialized), sm_90a only.
// bf16 x @ W with skinny m (m <= 64, e.g. stacked-weights layers at m = 16):
// one K slice per ptr-array item, float32 partials (reduced by ffi/cuda/prep_kernels.cu).
#include "kernels/sm90_gemm.h"

JAX_DYNOFF_SM90_SPLITK_KERNEL(kSm90SplitKBf16NN, cutlass::bfloat16_t,
                              cutlass::layout::RowMajor, cutlass::layout::RowMajor)
