// SM90 grouped kernels (kernels/sm90_grouped.h): ragged windows.
//
// One translation unit for the family: nvcc spends most of a unit's time
// parsing the CUTLASS headers, not on one kernel, so the kernels of one
// header compile together.  Each instantiation keeps its line of why.
#include "kernels/sm90_grouped.h"

// The grouped SM90 kernel (ragged windows, path kSm90Grouped), sm_90a only.
JAX_DYNOFF_SM90_GROUPED_KERNEL(kSm90GroupedBf16NN, cutlass::bfloat16_t,
                               cutlass::layout::RowMajor, cutlass::layout::RowMajor)

// The grouped SM90 kernel (ragged windows, path kSm90Grouped), sm_90a only.
JAX_DYNOFF_SM90_GROUPED_KERNEL(kSm90GroupedBf16NT, cutlass::bfloat16_t,
                               cutlass::layout::RowMajor, cutlass::layout::ColumnMajor)

// The grouped SM90 kernel (ragged windows, path kSm90Grouped), sm_90a only.
JAX_DYNOFF_SM90_GROUPED_KERNEL(kSm90GroupedBf16TN, cutlass::bfloat16_t,
                               cutlass::layout::ColumnMajor, cutlass::layout::RowMajor)

// The grouped SM90 kernel (ragged windows, path kSm90Grouped), sm_90a only.
JAX_DYNOFF_SM90_GROUPED_KERNEL(kSm90GroupedF16NN, cutlass::half_t,
                               cutlass::layout::RowMajor, cutlass::layout::RowMajor)

// The grouped SM90 kernel's wide tile (128x256 cooperative, no cluster:
// ragged windows, path kSm90Grouped, bf16 NN), sm_90a.
JAX_DYNOFF_SM90_GROUPED_KERNEL_TILE(kSm90GroupedWideBf16NN, Sm90GroupedWideConfig,
                                    cutlass::bfloat16_t,
                                    cutlass::layout::RowMajor,
                                    cutlass::layout::RowMajor)
