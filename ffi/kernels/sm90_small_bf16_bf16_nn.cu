// SM90 path (CUTLASS 3.x ptr-array TMA warp-specialized), sm_90a only.
// bf16 x @ W, m <= 256 or too few large tiles to fill the GPU (stacked layers).
#include "kernels/sm90_gemm.h"

JAX_DYNOFF_SM90_KERNEL(kSm90SmallBf16Bf16NN, Sm90SmallConfig, cutlass::bfloat16_t, cutlass::bfloat16_t,
                       cutlass::layout::RowMajor, cutlass::layout::RowMajor)
