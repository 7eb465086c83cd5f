// Distributed shared memory: the one PTX wrapper both cluster kernels
// share (kernels/sm90_skinny.h pushes its split-K partials to their owner,
// kernels/sm90_cluster_k.h its peer's partial tile).  Device code only.
#ifndef JAX_DYNOFF_KERNELS_CLUSTER_SMEM_H_
#define JAX_DYNOFF_KERNELS_CLUSTER_SMEM_H_

#include <cstdint>

namespace jax_dynoff {
namespace kernels {

#if defined(__CUDACC__)
// This CTA's shared address `a` as the same address in cluster rank
// `rank`'s window.
__device__ __forceinline__ uint32_t MapToRank(uint32_t a, int rank) {
  uint32_t out;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n"
               : "=r"(out)
               : "r"(a), "r"(rank));
  return out;
}
#endif

}  // namespace kernels
}  // namespace jax_dynoff

#endif  // JAX_DYNOFF_KERNELS_CLUSTER_SMEM_H_
