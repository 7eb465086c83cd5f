// Grouped-kernel sweep (not part of the library build): candidate
// configurations of the library's grouped SM90 kernel template
// (ffi/kernels/sm90_grouped.h: ptr-array, the items' problem shapes in
// device memory only) on mixture-of-experts forwards as ragged_dot runs
// them: tokens (T, d) sorted by expert, weights (E, d, f), out (T, f),
// bfloat16, A and B row-major, each expert one item of its rows.  The
// pointer kernel that the library runs before it is left out.
#pragma once
#include "kernels/sm90_grouped.h"
#include "tiles.h"

namespace sweep {

struct GroupedProblem {
  int groups;
  int64_t rows, d, f;  // T tokens, d -> f
  const void* shapes;  // groups x (m, n, k) int32
  const void* const* ptr_a;
  const void* const* ptr_b;
  void* const* ptr_d;
  const int64_t* strides;  // 4 x groups: A, B, C, D leading dimensions
  void* ws; size_t ws_bytes; int sms; cudaStream_t stream;
};

// ms per launch; raster -1: the library's order (the group scheduler's
// default, along M), 0 / 1: along M / N set explicitly.
template <typename Cfg>
float TimeGrouped(const GroupedProblem& g, int raster) {
  using G = Sm90GroupedGemm<Cfg, cutlass::bfloat16_t, cutlass::bfloat16_t,
                            cutlass::layout::RowMajor,
                            cutlass::layout::RowMajor>;
  GroupedLaunch l;
  l.groups = g.groups;
  l.shapes = g.shapes;
  l.ptr_a = g.ptr_a; l.ptr_b = g.ptr_b; l.ptr_d = g.ptr_d;
  l.stride_a = g.strides; l.stride_b = g.strides + g.groups;
  l.stride_c = g.strides + 2 * g.groups; l.stride_d = g.strides + 3 * g.groups;
  l.alpha = 1.f;
  l.workspace = g.ws; l.workspace_bytes = g.ws_bytes;
  l.sm_count = g.sms; l.stream = g.stream;
  Problem p{};
  p.m = static_cast<int>(g.rows); p.n = static_cast<int>(g.f);
  p.k = static_cast<int>(g.d);
  p.ws = g.ws; p.ws_bytes = g.ws_bytes; p.sms = g.sms; p.stream = g.stream;
  return Launch<G>(G::Args(l), p, raster < 0 ? 0 : 1, raster < 0 ? 0 : raster,
                   false);
}

using GroupedFn = float (*)(const GroupedProblem&, int);
struct GroupedEntry { const char* name; GroupedFn fn; };
}  // namespace sweep

// A candidate: schedule, epilogue schedule, tile (m, n, k), cluster (m, n).
#define SWEEP_GROUPED_CFG(NAME, SCHED, EPI, TM, TN, TK, CM, CN)              \
  namespace sweep {                                                          \
  struct NAME##_cfg {                                                        \
    using KernelSchedule = cutlass::gemm::SCHED;                             \
    using EpilogueSchedule = cutlass::epilogue::EPI;                         \
    using TileShape =                                                        \
        cute::Shape<cute::Int<TM>, cute::Int<TN>, cute::Int<TK>>;            \
    using ClusterShape = cute::Shape<cute::Int<CM>, cute::Int<CN>, cute::_1>;\
  };                                                                         \
  extern const GroupedEntry NAME = {#NAME, &TimeGrouped<NAME##_cfg>};        \
  }

// One of the library's own grouped tiles (planner.h GroupedTile).
#define SWEEP_GROUPED_LIB(NAME, CONFIG)                                      \
  namespace sweep {                                                          \
  extern const GroupedEntry NAME = {#NAME, &TimeGrouped<CONFIG>};            \
  }
