// Direct SM90 split-K kernels (kernels/sm90_direct.h).
//
// One translation unit for the family: nvcc spends most of a unit's time
// parsing the CUTLASS headers, not on one kernel, so the kernels of one
// header compile together.  Each instantiation keeps its line of why.
#include "kernels/sm90_direct.h"

// Direct SM90 path (no pointer kernel), sm_90a only: bf16 x @ W, the split-K
// tile (128x128 cooperative on the stream-K scheduler, K shared by the
// handler's split_k CTAs per output tile), for calls planned for split-K
// whose windows suit it (kernels/sm90_direct.h).
JAX_DYNOFF_SM90_DIRECT_KERNEL(kSm90DirectSplitKBf16NN, Sm90DirectSplitKConfig,
                              cutlass::bfloat16_t)

// Direct SM90 path (no pointer kernel), sm_90a only: f16 x @ W, the split-K
// tile (128x128 cooperative on the stream-K scheduler, K shared by the
// handler's split_k CTAs per output tile), for calls planned for split-K
// whose windows suit it (kernels/sm90_direct.h).
JAX_DYNOFF_SM90_DIRECT_KERNEL(kSm90DirectSplitKF16NN, Sm90DirectSplitKConfig,
                              cutlass::half_t)
