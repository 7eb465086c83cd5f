// Formulas the planner (planner.h) and the CUDA handler share, in plain
// C++ (no CUDA) so that the nanobind module hands Python the very same
// numbers: the workspace (result 1) layout, which Python sizes the
// workspace result with at trace time, and the skinny kernel's split of K.
// Each formula lives here only.
#ifndef JAX_DYNOFF_PLAN_H_
#define JAX_DYNOFF_PLAN_H_

#include <cstddef>
#include <cstdint>

#include "gemm_problem.h"

namespace jax_dynoff {
namespace kernels {

// Upper bound on the SMs an SM90 persistent kernel is launched on; the
// workspace reserved for the SM90 paths covers the TMA descriptors of this
// many SMs (the handler checks CUTLASS's own figure against it).
inline constexpr int kSm90MaxSms = 256;
inline constexpr size_t kSm90KernelWorkspace = size_t{1} << 19;  // 512 KiB

// The direct split-K kernel's output tile (Sm90DirectSplitKConfig) and its
// workspace, which the split-K path reserves on top of kSm90KernelWorkspace:
// CUTLASS's stream-K scheduler in split-K mode keeps one float32 accumulator
// tile per output tile, then one 32-bit barrier per output tile and consumer
// warp group, each part rounded to a 128-byte L2 line.  The handler checks
// CUTLASS's own figure against it before every launch.
inline constexpr int64_t kDirectSplitKTileM = 128, kDirectSplitKTileN = 128;
inline constexpr int64_t DirectSplitKWorkspace(int64_t m, int64_t n) {
  const int64_t tiles = (m + kDirectSplitKTileM - 1) / kDirectSplitKTileM *
                        ((n + kDirectSplitKTileN - 1) / kDirectSplitKTileN);
  const int64_t reduction = tiles * kDirectSplitKTileM * kDirectSplitKTileN * 4;
  const int64_t barriers = tiles * 2 * 4;
  return (reduction + 127) / 128 * 128 + (barriers + 127) / 128 * 128;
}

// The skinny kernel's column tile and K stage (kernels/sm90_skinny.h), and
// its split of K: the most CTAs per column tile (a power of two, at most a
// portable cluster of 8) that keeps the CTAs within one wave of SMs and
// gives each rank two or more K stages.  n = k = 4096 on 132 SMs: 32 tiles
// x 4 (12.5 us on an H200; 2: 15.7, 8: 14.3, benchmarks/skinny/probe.cu).
inline constexpr int kSkinnyTileN = 128, kSkinnyTileK = 64;
inline constexpr int kSkinnyMaxSplit = 8;
inline constexpr int SkinnySplit(int64_t n, int64_t k, int sms) {
  const int64_t tiles = (n + kSkinnyTileN - 1) / kSkinnyTileN;
  const int64_t k_tiles = (k + kSkinnyTileK - 1) / kSkinnyTileK;
  int s = 1;
  while (s < kSkinnyMaxSplit && tiles * s * 2 <= sms && k_tiles >= 4 * s)
    s *= 2;
  return s;
}

}  // namespace kernels

inline constexpr int64_t kWorkspaceAlign = 256;

JAX_DYNOFF_HD int64_t RoundUp(int64_t x, int64_t a) {
  return (x + a - 1) / a * a;
}

inline bool IsSm90Path(Path p) {
  return p != Path::kGeneric && p != Path::kTf32;
}

// ---------------------------------------------------------------------------
// Workspace (ret 1) layout: the one formula.  jax_dynoff/plan.py asks for
// it (the module's workspace_layout) to size the workspace result at trace
// time; the handler reads it from its state.
//   [0, kernel)           CUTLASS's own scratch: kSm90KernelWorkspace for
//                         an SM90 path (TMA descriptors; the skinny path
//                         needs none but keeps it for its fallback, the
//                         tiny tile), else nothing;
//                         kSm90SplitK adds DirectSplitKWorkspace(m, n)
//                         (the direct split-K kernel's partial tiles and
//                         barriers), rounded up to 256 bytes
//   [ptrs, +8*count)      pointer arrays.  Unsplit: A[batch], B[batch],
//                         C[batch], D[batch] (count = 4 * batch).  Path
//                         kSm90SplitK (items = batch * split_k, item
//                         l = t * split_k + s): A[items], B[items],
//                         C[items], D[items] of the slice GEMMs (C and D
//                         both point at the item's partial), then the real
//                         C[batch] and D[batch] for the reduction
//                         (count = 4 * items + 2 * batch)
//   [scratch, +batch*item) copies of C windows (c_mode kFromD, beta != 0):
//                         one (m-1)*ld + n element region per item, 256-byte
//                         aligned, same leading dimension as D's array
//   [partials, +items*pitem) kSm90SplitK only: one float32 m x n row-major
//                         (ld = n) partial per item, each at a 256-byte
//                         aligned stride pitem = RoundUp(m*n*4, 256)
// A split-K plan that falls back to the generic kernel uses the unsplit
// pointer layout inside the same (larger) workspace.
struct WorkspaceLayout {
  int64_t kernel_bytes = 0;
  int64_t ptrs = 0;
  int64_t ptr_count = 0;
  int64_t scratch = 0;
  int64_t scratch_item = 0;
  int64_t partials = 0;
  int64_t partial_item = 0;
  int64_t total = 0;
};

inline WorkspaceLayout Layout(const GemmProblem& p) {
  WorkspaceLayout w;
  const bool split = p.path == Path::kSm90SplitK;
  const int64_t items = split ? p.batch * p.split_k : p.batch;
  w.kernel_bytes =
      IsSm90Path(p.path) ? int64_t{kernels::kSm90KernelWorkspace} : 0;
  if (split)  // the direct split-K kernel's scheduler workspace
    w.kernel_bytes += RoundUp(kernels::DirectSplitKWorkspace(p.m, p.n),
                              kWorkspaceAlign);
  w.ptrs = w.kernel_bytes;
  w.ptr_count = 4 * items + (split ? 2 * p.batch : 0);
  w.scratch = RoundUp(w.ptrs + 8 * w.ptr_count, kWorkspaceAlign);
  if (p.c_mode == CMode::kFromD && p.beta != 0.0 && p.m > 0 && p.n > 0) {
    const OperandDesc& C = p.op[kC];
    w.scratch_item = RoundUp(((p.m - 1) * C.ld() + p.n) *
                                 ElementBytes(p.out_dtype), kWorkspaceAlign);
  }
  w.partials = w.scratch + p.batch * w.scratch_item;  // 256-byte aligned
  if (split && p.m > 0 && p.n > 0)
    w.partial_item = RoundUp(p.m * p.n * 4, kWorkspaceAlign);
  w.total = w.partials + items * w.partial_item;
  return w;
}

}  // namespace jax_dynoff

#endif  // JAX_DYNOFF_PLAN_H_
