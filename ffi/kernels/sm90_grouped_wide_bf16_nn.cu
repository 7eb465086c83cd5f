// The grouped SM90 kernel's wide tile (128x256 cooperative, no cluster:
// ragged windows, path kSm90Grouped, bf16 NN), sm_90a.
#include "kernels/sm90_grouped.h"

JAX_DYNOFF_SM90_GROUPED_KERNEL_TILE(kSm90GroupedWideBf16NN, Sm90GroupedWideConfig,
                                    cutlass::bfloat16_t,
                                    cutlass::layout::RowMajor,
                                    cutlass::layout::RowMajor)
