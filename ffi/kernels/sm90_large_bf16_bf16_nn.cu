// SM90 path (CUTLASS 3.x ptr-array TMA warp-specialized), sm_90a only.
// bf16 x @ W, large m: the main workload (row slices of big buffers).
#include "kernels/sm90_gemm.h"

JAX_DYNOFF_SM90_KERNEL(kSm90LargeBf16Bf16NN, Sm90LargeConfig, cutlass::bfloat16_t, cutlass::bfloat16_t,
                       cutlass::layout::RowMajor, cutlass::layout::RowMajor)
