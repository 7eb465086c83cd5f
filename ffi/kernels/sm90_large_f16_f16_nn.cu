// SM90 path (CUTLASS 3.x ptr-array TMA warp-specialized), sm_90a only.
// f16 x @ W, large m.
#include "kernels/sm90_gemm.h"

JAX_DYNOFF_SM90_KERNEL(kSm90LargeF16F16NN, Sm90LargeConfig, cutlass::half_t, cutlass::half_t,
                       cutlass::layout::RowMajor, cutlass::layout::RowMajor)
