// The probe's candidates: name, split, and how to make one launch.
#pragma once
#include <string>
#include <vector>

#include "kernels/launch.h"

namespace probe {
using Prepare = std::string (*)(const jax_dynoff::kernels::DirectLaunch&,
                                jax_dynoff::kernels::PreparedLaunch*);
struct Candidate {
  const char* name;
  int split;
  Prepare prepare;
};
const std::vector<Candidate>& Candidates();
}  // namespace probe
