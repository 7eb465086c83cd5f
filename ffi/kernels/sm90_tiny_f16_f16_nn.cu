// SM90 path (CUTLASS 3.x ptr-array TMA warp-specialized), sm_90a only.
// f16 x @ W, very few tiles (64x64 tiles).
#include "kernels/sm90_gemm.h"

JAX_DYNOFF_SM90_KERNEL(kSm90TinyF16F16NN, Sm90TinyConfig, cutlass::half_t, cutlass::half_t,
                       cutlass::layout::RowMajor, cutlass::layout::RowMajor)
