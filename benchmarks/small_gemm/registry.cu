// The probe's candidates, in the order it runs them.
#include "candidates.h"

namespace probe {
std::string TinyPrepare(const jax_dynoff::kernels::DirectLaunch&,
                        jax_dynoff::kernels::PreparedLaunch*);
template <int kTileN, int kSplit, int kStages>
std::string ClusterK(const jax_dynoff::kernels::DirectLaunch&,
                     jax_dynoff::kernels::PreparedLaunch*);

const std::vector<Candidate>& Candidates() {
  static const std::vector<Candidate> c = {
      {"tiny 64x64", 1, &TinyPrepare},
      {"ck 64x32 s1", 1, &ClusterK<32, 1, 6>},
      {"ck 64x32 s2", 2, &ClusterK<32, 2, 6>},
      {"ck 64x32 s4", 4, &ClusterK<32, 4, 4>},
      {"ck 64x64 s2", 2, &ClusterK<64, 2, 6>},
      {"ck 64x64 s4", 4, &ClusterK<64, 4, 4>},
  };
  return c;
}
}  // namespace probe
