#include "candidates.h"
#include "kernels/sm90_direct.h"
namespace probe {
std::string TinyPrepare(const jax_dynoff::kernels::DirectLaunch& l,
                        jax_dynoff::kernels::PreparedLaunch* out) {
  using G = jax_dynoff::kernels::Sm90DirectGemm<
      jax_dynoff::kernels::Sm90DirectTinyConfig, cutlass::bfloat16_t,
      cutlass::bfloat16_t>;
  return G::Prepare(l, out);
}
}  // namespace probe
