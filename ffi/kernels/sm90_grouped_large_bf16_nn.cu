// The grouped SM90 kernel's large tile (256x128 cooperative, cluster 1x2:
// ragged windows, path kSm90Grouped, bf16 NN), sm_90a.
#include "kernels/sm90_grouped.h"

JAX_DYNOFF_SM90_GROUPED_KERNEL_TILE(kSm90GroupedLargeBf16NN, Sm90GroupedLargeConfig,
                                    cutlass::bfloat16_t,
                                    cutlass::layout::RowMajor,
                                    cutlass::layout::RowMajor)
