// The cluster-K kernel (ffi/kernels/sm90_cluster_k.h) at fixed widths and
// splits, beside the library's choice (plan.h ClusterKTileN, split 2).
#include "candidates.h"
#include "kernels/sm90_cluster_k.h"

namespace probe {
template <int kTileN, int kSplit, int kStages>
std::string ClusterK(const jax_dynoff::kernels::DirectLaunch& l,
                     jax_dynoff::kernels::PreparedLaunch* out) {
  return jax_dynoff::kernels::Sm90ClusterKGemm<
      cutlass::bfloat16_t, kTileN, kSplit, kStages>::Prepare(l, out);
}
template std::string ClusterK<32, 1, 6>(const jax_dynoff::kernels::DirectLaunch&, jax_dynoff::kernels::PreparedLaunch*);
template std::string ClusterK<32, 2, 6>(const jax_dynoff::kernels::DirectLaunch&, jax_dynoff::kernels::PreparedLaunch*);
template std::string ClusterK<32, 4, 4>(const jax_dynoff::kernels::DirectLaunch&, jax_dynoff::kernels::PreparedLaunch*);
template std::string ClusterK<64, 2, 6>(const jax_dynoff::kernels::DirectLaunch&, jax_dynoff::kernels::PreparedLaunch*);
template std::string ClusterK<64, 4, 4>(const jax_dynoff::kernels::DirectLaunch&, jax_dynoff::kernels::PreparedLaunch*);
}  // namespace probe
