// Float32 sweep (not part of the library build): candidate configurations
// of the library's direct TF32 kernel template (Sm90DirectTf32NN,
// ffi/kernels/sm90_direct_tf32.h: D^T = B^T A^T on CUTLASS's
// register-sourced mainloop), A row-major (m x k), B row-major (k x n),
// the windows the whole buffers.  A candidate's tile and cluster are
// written as in that header's Configs: (n, m, k) of the transposed
// problem, so a name can be pasted back into a Config as it stands.
#pragma once
#include "kernels/sm90_direct_tf32.h"
#include "tiles.h"

namespace sweep {

// ms per GEMM (TimeGemm's: median of 5 runs of back-to-back calls), or < 0
// where the candidate could not run (Launch's codes).
template <typename Cfg>
float TimeTf32(const Problem& p, int swizzle, int raster, bool with_init) {
  return TimeDirectGemm<Sm90DirectTf32NN<Cfg>>(p, swizzle, raster,
                                               with_init);
}
}  // namespace sweep

// The epilogue tile (n, m) of a candidate: CUTLASS's choice where both are
// 0, else EN x EM (it sets the epilogue's shared memory, hence what is
// left for the mainloop's stages).
template <int EN, int EM>
struct EpiTile {
  using type = cute::Shape<cute::Int<EN>, cute::Int<EM>>;
};
template <>
struct EpiTile<0, 0> {
  using type = cutlass::epilogue::collective::EpilogueTileAuto;
};

// A candidate: schedule, epilogue schedule, tile (n, m, k), cluster (n, m)
// and epilogue tile (n, m; 0 x 0: CUTLASS's) of the transposed problem.
#define SWEEP_TF32_CFG(NAME, SCHED, EPI, TN, TM, TK, CN, CM, EN, EM)         \
  namespace sweep {                                                          \
  struct NAME##_cfg {                                                        \
    using KernelSchedule = cutlass::gemm::SCHED;                             \
    using EpilogueSchedule = cutlass::epilogue::EPI;                         \
    using TileShape =                                                        \
        cute::Shape<cute::Int<TN>, cute::Int<TM>, cute::Int<TK>>;            \
    using ClusterShape = cute::Shape<cute::Int<CN>, cute::Int<CM>, cute::_1>;\
    using EpilogueTile = typename EpiTile<EN, EM>::type;                     \
  };                                                                         \
  extern const Entry NAME = {#NAME, &TimeTf32<NAME##_cfg>,                   \
                             Sm90DirectTf32NN<NAME##_cfg>::kStages};         \
  }

// One of the library's own Configs (sm90_direct_tf32.h), by its name.
#define SWEEP_TF32_LIB(NAME, CONFIG)                                         \
  namespace sweep {                                                          \
  extern const Entry NAME = {#NAME, &TimeTf32<CONFIG>,                       \
                             Sm90DirectTf32NN<CONFIG>::kStages};             \
  }
