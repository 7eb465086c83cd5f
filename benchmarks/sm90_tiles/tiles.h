// Tile-configuration sweep for the SM90 kernels (not part of the library
// build): times candidate (tile, cluster, schedule) configurations and
// scheduler knobs with CUDA events, on the exact kernel templates the
// library uses, bf16, A row-major, B row-major:
//   ptr-array entries: ffi/kernels/sm90_gemm.h (addresses from device
//                      pointer arrays),
//   direct entries:    ffi/kernels/sm90_direct.h (TMA descriptors over the
//                      whole buffers; here the windows are the buffers).
#pragma once
#include <algorithm>
#include <cstdio>
#include <vector>

#include "kernels/sm90_direct.h"
#include "kernels/sm90_gemm.h"

namespace sweep {
using namespace jax_dynoff::kernels;

struct Problem {
  int m, n, k;
  const void* const* pa; const void* const* pb; const void* const* pc;
  void* const* pd;
  const void* a; const void* b; void* d;  // the buffers the arrays point to
  void* ws; size_t ws_bytes; int sms; cudaStream_t stream;
};

// ms per GEMM of `gemm` (median of 5 runs of `iters` back-to-back calls: a
// sustained load, so the clocks settle where the bench's loops run them).
// with_init: initialize() before every run(), as the FFI handler does.
template <typename Gemm, typename Args>
float TimeGemm(Gemm& gemm, const Args& args, const Problem& p, bool with_init) {
  const double flops = 2.0 * p.m * p.n * p.k;
  const int iters = std::max(5, std::min(200, int(2e13 / flops)));
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0); cudaEventCreate(&e1);
  for (int i = 0; i < 3; ++i) gemm.run(p.stream);
  std::vector<float> ts;
  for (int r = 0; r < 5; ++r) {
    cudaEventRecord(e0, p.stream);
    for (int i = 0; i < iters; ++i) {
      if (with_init) gemm.initialize(args, p.ws, p.stream);
      gemm.run(p.stream);
    }
    cudaEventRecord(e1, p.stream);
    cudaEventSynchronize(e1);
    float ms; cudaEventElapsedTime(&ms, e0, e1);
    ts.push_back(ms / iters);
  }
  cudaEventDestroy(e0); cudaEventDestroy(e1);
  std::sort(ts.begin(), ts.end());
  if (cudaGetLastError() != cudaSuccess) return -4;
  return ts[2];
}

// swizzle 0: keep the library's tile order (SetTileOrder); raster 0 / 1:
// along M / N (ignored with swizzle 0).
template <typename Args>
void SetOrder(Args& args, int swizzle, int raster) {
  if (swizzle == 0) return;
  args.scheduler.max_swizzle_size = swizzle;
  using R = decltype(args.scheduler.raster_order);
  args.scheduler.raster_order = raster == 0 ? R::AlongM : R::AlongN;
}

template <typename G>
float Launch(typename G::Gemm::Arguments args, const Problem& p, int swizzle,
             int raster, bool with_init) {
  SetOrder(args, swizzle, raster);
  typename G::Gemm gemm;
  if (gemm.can_implement(args) != cutlass::Status::kSuccess) return -1;
  if (G::Gemm::get_workspace_size(args) > p.ws_bytes) return -2;
  if (gemm.initialize(args, p.ws, p.stream) != cutlass::Status::kSuccess) return -3;
  return TimeGemm(gemm, args, p, with_init);
}

template <typename Cfg>
float Time(const Problem& p, int swizzle, int raster, bool with_init) {
  using G = Sm90Gemm<Cfg, cutlass::bfloat16_t, cutlass::bfloat16_t,
                     cutlass::layout::RowMajor, cutlass::layout::RowMajor>;
  GemmLaunch l;
  l.m = p.m; l.n = p.n; l.k = p.k; l.batch = 1;
  l.ptr_a = p.pa; l.ptr_b = p.pb; l.ptr_c = p.pc; l.ptr_d = p.pd;
  l.a_row = p.k; l.a_col = 1; l.b_row = p.n; l.b_col = 1;
  l.ldc = l.ldd = p.n; l.alpha = 1.f; l.beta = 0.f;
  l.workspace = p.ws; l.workspace_bytes = p.ws_bytes;
  l.sm_count = p.sms; l.stream = p.stream;
  return Launch<G>(G::Args(l), p, swizzle, raster, with_init);
}

// A direct kernel's launch with the whole buffers as its windows.
inline DirectLaunch WholeBuffers(const Problem& p) {
  auto whole = [](int rows, int cols) {
    DirectWindow w;
    w.rows = rows; w.cols = cols; w.layers = 1;
    return w;
  };
  DirectLaunch l;
  l.m = p.m; l.n = p.n; l.k = p.k;
  l.base_a = p.a; l.base_b = p.b; l.base_c = p.d; l.base_d = p.d;
  l.lda = p.k; l.ldb = p.n; l.ldc = p.n; l.ldd = p.n;
  l.a = whole(p.m, p.k); l.b = whole(p.k, p.n);
  l.c = whole(p.m, p.n); l.d = whole(p.m, p.n);
  l.alpha = 1.f; l.beta = 0.f;
  l.workspace = p.ws; l.workspace_bytes = p.ws_bytes;
  l.sm_count = p.sms; l.stream = p.stream;
  return l;
}

// A direct kernel G (its Args apply the library's tile order; Launch
// overrides it where swizzle > 0) on the whole buffers.
template <typename G>
float TimeDirectGemm(const Problem& p, int swizzle, int raster,
                     bool with_init) {
  return Launch<G>(G::Args(WholeBuffers(p)), p, swizzle, raster, with_init);
}

template <typename Cfg>
float TimeDirect(const Problem& p, int swizzle, int raster, bool with_init) {
  return TimeDirectGemm<Sm90DirectGemm<Cfg, cutlass::bfloat16_t, cutlass::bfloat16_t>>(
      p, swizzle, raster, with_init);
}

// The median of a candidate's rounds (a copy: sorts it).
inline float Median(std::vector<float> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

using Fn = float (*)(const Problem&, int, int, bool);
// stages: the mainloop's pipeline stages where the sweep prints them (0:
// not reported).
struct Entry { const char* name; Fn fn; int stages = 0; };
}  // namespace sweep

#define SWEEP_CFG_STRUCT(NAME, SCHED, EPI, TM, TN, CM, CN)                   \
  struct NAME##_cfg {                                                        \
    using KernelSchedule = cutlass::gemm::SCHED;                             \
    using EpilogueSchedule = cutlass::epilogue::EPI;                         \
    using TileShape = cute::Shape<cute::Int<TM>, cute::Int<TN>, cute::_64>;  \
    using ClusterShape = cute::Shape<cute::Int<CM>, cute::Int<CN>, cute::_1>;\
  };

// A ptr-array configuration (the schedules' PtrArray variants).
#define SWEEP_CFG(NAME, SCHED, EPI, TM, TN, CM, CN)                          \
  namespace sweep {                                                          \
  SWEEP_CFG_STRUCT(NAME, SCHED, EPI, TM, TN, CM, CN)                         \
  extern const Entry NAME = {#NAME, &Time<NAME##_cfg>};                      \
  }

// A direct-kernel configuration (the plain schedules).
#define SWEEP_DIRECT_CFG(NAME, SCHED, EPI, TM, TN, CM, CN)                   \
  namespace sweep {                                                          \
  SWEEP_CFG_STRUCT(NAME, SCHED, EPI, TM, TN, CM, CN)                         \
  extern const Entry NAME = {#NAME, &TimeDirect<NAME##_cfg>};                \
  }
