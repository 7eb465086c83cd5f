// Direct SM90 cluster-K kernels (kernels/sm90_cluster_k.h).
//
// One translation unit for the family: nvcc spends most of a unit's time
// parsing the CUTLASS headers, not on one kernel, so the kernels of one
// header compile together.  Each instantiation keeps its line of why.
#include "kernels/sm90_cluster_k.h"

// Direct SM90 path (no pointer kernel), sm_90a only: bf16 x @ W, the
// cluster-K tile (64x32 and 64x64 output tiles, each one's K split across
// the two CTAs of a thread-block cluster and reduced in distributed shared
// memory; kernels/sm90_cluster_k.h), for one-item calls on the tiny path
// whose tiles would leave SMs idle (plan.h ClusterKTileN) or that force it.
JAX_DYNOFF_SM90_CLUSTER_K_KERNEL(kSm90DirectClusterKBf16NN, cutlass::bfloat16_t)

// Direct SM90 path (no pointer kernel), sm_90a only: f16 x @ W, the
// cluster-K tile (64x32 and 64x64 output tiles, each one's K split across
// the two CTAs of a thread-block cluster and reduced in distributed shared
// memory; kernels/sm90_cluster_k.h), for one-item calls on the tiny path
// whose tiles would leave SMs idle (plan.h ClusterKTileN) or that force it.
JAX_DYNOFF_SM90_CLUSTER_K_KERNEL(kSm90DirectClusterKF16NN, cutlass::half_t)
