// Direct SM90 path (no pointer kernel), sm_90a only: f16 x @ W, the
// cluster-K tile (64x32 and 64x64 output tiles, each one's K split across
// the two CTAs of a thread-block cluster and reduced in distributed shared
// memory; kernels/sm90_cluster_k.h), for one-item calls on the tiny path
// whose tiles would leave SMs idle (plan.h ClusterKTileN) or that force it.
#include "kernels/sm90_cluster_k.h"

JAX_DYNOFF_SM90_CLUSTER_K_KERNEL(kSm90DirectClusterKF16NN, cutlass::half_t)
