// The grouped SM90 kernel (ragged windows, path kSm90Grouped), sm_90a only.
#include "kernels/sm90_grouped.h"

JAX_DYNOFF_SM90_GROUPED_KERNEL(kSm90GroupedBf16NT, cutlass::bfloat16_t,
                               cutlass::layout::RowMajor, cutlass::layout::ColumnMajor)
