// Formulas the planner (planner.h) and the CUDA handler share, in plain
// C++ (no CUDA) so that the nanobind module hands Python the very same
// numbers: the workspace (result 1) layout, which Python sizes the
// workspace result with at trace time, the skinny kernel's split of K and
// the cluster-K tile's width.  Each formula lives here only.
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
// portable cluster of 8) that keeps the CTAs within one wave of
// kSkinnyCtasPerSm CTAs an SM and gives each rank two or more K stages.
// n = k = 4096 on 132 SMs: 64 tiles x 4 = 256 CTAs, faster there than 2
// or 8, hot or cold.  64 columns a CTA (2 warps), where 128 (4 warps, one
// CTA an SM) was the tile before: at the same cluster size, the 64-column
// tile was 2-7% faster (geometric mean 4%) in all 40 cases timed where
// the wide tile is planned: 10 shapes with m = 1-16, n = 1024-4096, K =
// 2048-4096, NN and NT, B hot in L2 and streamed (on an H100,
// benchmarks/skinny/variants.cu --wide,
// benchmarks/results/2026-12-06-h100-e5738be/).
inline constexpr int kSkinnyTileN = 64, kSkinnyTileK = 64;
inline constexpr int kSkinnyMaxSplit = 8;
inline constexpr int kSkinnyCtasPerSm = 2;
inline constexpr int SkinnySplit(int64_t n, int64_t k, int sms) {
  const int64_t tiles = (n + kSkinnyTileN - 1) / kSkinnyTileN;
  const int64_t k_tiles = (k + kSkinnyTileK - 1) / kSkinnyTileK;
  int s = 1;
  while (s < kSkinnyMaxSplit &&
         tiles * s * 2 <= int64_t{kSkinnyCtasPerSm} * sms &&
         k_tiles >= 4 * s)
    s *= 2;
  return s;
}

// The skinny path's narrow tile (kernels/sm90_skinny_narrow.h): 16
// columns a CTA over all of K, no cluster.  SkinnyTileChoice: the narrow
// tile where its CTAs fit one wave and, B not transposed (NN), K <=
// kSkinnyNarrowMaxK, or K <= kSkinnyNarrowLongMaxK where n <=
// kSkinnyNarrowLongMaxN; B transposed (NT), K <= kSkinnyNarrowNtMaxK
// (below); else the wide one.  Where K is short the wide tile's cluster
// reduction is most of its call; where K is long, 16 columns a CTA stream
// B too slowly.  The NN thresholds are the measured crossover of the
// shipped configuration (512-deep stages, 3 of them): the sweep's table loop with
// body graphs, m = 8 and 16, both tiles forced side by side
// (benchmarks/skinny_tiles.py; H100 figures in
// benchmarks/results/2026-12-06-h100-2be2540/): narrow faster in all 12
// cells with K = 1024 or 1536 (n = 512-4096, by 4-16%) and in the 4 with
// K = 2048 and n <= 2048 (5-16%); wide faster with K = 2048 and n = 4096
// (1-2%) and in 4 of 6 with K = 3072.  K <= 512: the narrow tile 8-19%
// faster in every cell of 2026-12-06-h100-ff27639's 256-deep stages, and
// the 512-deep ones within 0.2 us of those (probe.cu --slope).  Those
// narrow launches carried a cluster attribute of one, which cost one
// 256-CTA shape 4.8 us; re-taken without it (2026-12-06-h100-75c486a):
// wide faster in all 6 cells with n = 4096 and K = 2048-4096 (2-11%; at
// K = 2048 2-4%, inside the spread between runs), the two within 6% at
// n = 2048, K >= 3072.
//
// Retaken with the 64-column wide tile around those bounds
// (benchmarks/skinny/variants.cu --rule, both tiles as the handler
// launches them, m = 1, 8, 16, n = 1536-8192, K = 1024-3072, NN and NT, B
// hot and streamed; H100, benchmarks/results/2026-12-06-h100-1249f15/):
// - NN: the bounds above stand (the cells they misplace are within 4%).
// - NT (x @ W^T, the narrow tile's rows 1 KiB of K): the narrow tile is
//   as fast or faster wherever n <= 4096 up to K = 3072 (5-15% at n =
//   4096, K = 2048 and 3072, where the wide one was planned), so NT's
//   bound is kSkinnyNarrowNtMaxK.  K = 4096 NT was not retaken.
// - Both: the narrow tile's n / 16 CTAs must fit one wave at
//   kSkinnyNarrowCtasPerSm an SM (96 KiB of stages a CTA).  At n = 8192
//   (512 CTAs, two waves on 132 SMs) the wide tile was faster in all 24
//   cases with K <= 1536, where the narrow one was planned: 7-55%.
// Retaken after each thread's chunks were located once a kernel (the
// wide tile 17% faster with B hot, the narrow one 5%; H100,
// benchmarks/results/2026-12-07-h100-b408ce1/variants_rule.txt):
// - NN: at K = 1536 with n = 3072 and 4096 the wide tile is now faster,
//   by 10-18% with B hot (within 4% either way streamed), so the NN bound
//   is K <= 1024 (kSkinnyNarrowMaxK), or K <= 2048 where n <= 2048.  The
//   worst case the rule misplaces: 16x3072x1024, 7% (B hot).
// - NT and the wave: the bounds stand.
// tests/test_planner.py holds the rule to the newest committed --rule
// data (the planned tile at most 10% slower than the faster one, 1% by
// geometric mean): new rule data is committed with the rule it asks for.
inline constexpr int kSkinnyNarrowTileN = 16;
inline constexpr int kSkinnyNarrowCtasPerSm = 2;
inline constexpr int64_t kSkinnyNarrowMaxK = 1024;
inline constexpr int64_t kSkinnyNarrowLongMaxK = 2048;
inline constexpr int64_t kSkinnyNarrowLongMaxN = 2048;
inline constexpr int64_t kSkinnyNarrowNtMaxK = 3072;
inline constexpr SkinnyTile SkinnyTileChoice(int64_t n, int64_t k,
                                             bool trans_b, int sms) {
  const bool one_wave =
      (n + kSkinnyNarrowTileN - 1) / kSkinnyNarrowTileN <=
      int64_t{kSkinnyNarrowCtasPerSm} * sms;
  const bool short_k =
      trans_b ? k <= kSkinnyNarrowNtMaxK
              : k <= kSkinnyNarrowMaxK ||
                    (k <= kSkinnyNarrowLongMaxK && n <= kSkinnyNarrowLongMaxN);
  return one_wave && short_k ? SkinnyTile::kNarrow : SkinnyTile::kWide;
}

// The cluster-K direct tile (kernels/sm90_cluster_k.h): 64 x tile_n output
// tiles (tile_n 32 or 64), each one's K split across the kClusterKSplit
// CTAs of one cluster, and the width it runs at.  ClusterKTileN: of the two
// widths, the one whose CTAs (tiles x split) fill the most SMs at one CTA
// per SM, ties to 64 (each CTA streams less of A per output); 0 where
// neither fits one wave or a rank would get fewer than four K tiles (the
// tiny tile is as fast there).  The rule picked the fastest candidate of
// benchmarks/small_gemm/probe.cu (B streamed from HBM, calls in a CUDA
// graph), or one within noise of it, at every shape the probe timed (the
// cluster-K rebuild's run, benchmarks/results/README.md).  Splits of 4 and 8 were
// slower at every one of these shapes, and a second CTA per SM too: one
// split, one CTA per SM.
inline constexpr int kClusterKTileM = 64, kClusterKTileK = 64;
inline constexpr int kClusterKSplit = 2;
inline constexpr int kClusterKTileNs[] = {64, 32};  // 64 first: it keeps ties
inline constexpr int ClusterKTileN(int64_t m, int64_t n, int64_t k,
                                   int sms) {
  const int64_t k_tiles = (k + kClusterKTileK - 1) / kClusterKTileK;
  if (k_tiles < 4 * kClusterKSplit) return 0;
  int best = 0;
  int64_t best_ctas = 0;
  for (const int tn : kClusterKTileNs) {
    const int64_t ctas = (m + kClusterKTileM - 1) / kClusterKTileM *
                         ((n + tn - 1) / tn) * kClusterKSplit;
    if (ctas <= sms && ctas > best_ctas) {
      best = tn;
      best_ctas = ctas;
    }
  }
  return best;
}
// The width where KernelOptions(direct_tile="cluster_k") forces the tile:
// ClusterKTileN's, else (no wave or short K) 64, the fewer CTAs.
inline constexpr int ClusterKForcedTileN(int64_t m, int64_t n, int64_t k,
                                         int sms) {
  const int tn = ClusterKTileN(m, n, k, sms);
  return tn != 0 ? tn : 64;
}

// The small-group weight-gradient kernel (kernels/small_group_grad.h):
// its output tile, and where the planner gives it a grouped call with A
// transposed (ragged_dot's dW[e] = X_e^T G_e, K the expert's rows): where
// the static mean of the rows per item, K's capacity / items, is at most
// kSmallGroupMaxMeanRows.  The probe (benchmarks/small_k_grad/probe.cu, on
// an H100) ran it at 0.85-0.97 of a write-only kernel on decode layers of
// 1 to 8 rows per expert (E64 512 x 4096 -> 4096, E128 1024 x 2048 ->
// 1536, E256 256 x 7168 -> 2048; uniform and skewed sizes) and at
// 0.24-0.41 of it on groups of hundreds of rows, where the CUTLASS grouped
// kernel stays.  64 lies between the two and is to be tuned from GPU
// timings of the library's own calls on both sides of it.
inline constexpr int kSmallGroupTileM = 128, kSmallGroupTileN = 128;
inline constexpr int64_t kSmallGroupMaxMeanRows = 64;
inline constexpr bool SmallGroupRows(int64_t k, int64_t items) {
  return items > 0 && k <= kSmallGroupMaxMeanRows * items;
}

// The small-group forward kernel (kernels/small_group_fwd.h): 128 features
// (D's columns) a CTA, work items of 64 rows of an item, and where the
// planner gives it a grouped call with A not transposed (ragged_dot's
// forward x @ W[e], NN, and its input gradient dY @ W[e]^T, NT): where the
// static mean of the rows per item, m's capacity / items, is at most
// kSmallGroupFwdMaxMeanRows.  16: there the CUTLASS grouped kernel's
// 128-row tile multiplies at least 8x the rows an expert has (its MMAs
// mostly zeros), while this kernel pads each expert to a multiple of 8
// rows; the time is streaming the used experts' weights either way, which
// the smaller kernel does with no 128-row tiles to fill.  To be confirmed
// (or moved) by the probe's GPU figures (benchmarks/small_groups_fwd/
// probe.cu, against its read-only floor) and the library's own calls on
// both sides of it.  The kernel needs k and n multiples of 8 elements
// (16-byte chunks wholly inside or outside a row): the grouped path's own
// rule (planner_rules.cc GroupedExtentReasons), so a call that breaks it
// runs neither grouped kernel but is composed.
inline constexpr int kSmallGroupFwdTileN = 128, kSmallGroupFwdChunk = 64;
inline constexpr int64_t kSmallGroupFwdMaxMeanRows = 16;
inline constexpr bool SmallGroupFwdRows(int64_t m, int64_t items) {
  return items > 0 && m <= kSmallGroupFwdMaxMeanRows * items;
}

}  // namespace kernels

inline constexpr int64_t kWorkspaceAlign = 256;

JAX_DYNOFF_HD int64_t RoundUp(int64_t x, int64_t a) {
  return (x + a - 1) / a * a;
}

// The grouped kernel's per-item problem shape (cute::Shape<int, int, int>:
// m, n, k) and per-operand stride (the one run-time stride of a CUTLASS
// 3.x stride, int64), as the pointer kernel writes them
// (kernels/sm90_grouped.h checks both sizes against the kernel's types).
inline constexpr int64_t kGroupedShapeBytes = 12;
inline constexpr int64_t kGroupedStrideBytes = 8;

// One item of a grouped call (path kSm90Grouped), from its valid extents:
// the product the kernel runs, (m, n, k) = (min(op(A)'s valid rows, D's
// valid rows), min(op(B)'s valid columns, h's columns D's valid columns
// hold), min of op(A)'s and op(B)'s valid K), none at all (0, 0, 0) where
// any of them is 0, so that the kernel schedules no tile for it; D's
// valid part (dvr x dvc); and `covered`, D's columns the kernel writes in
// rows [0, m): n, or n / 2 rounded up where the swiglu epilogue writes a
// column per pair of h's (an odd n's last gate pairs with a zero up).
// The small-group kernels (planned grouped tile kSmallGroups) write the
// zeros of an item without K themselves: there k = 0 keeps m and n (none
// at all only where m or n is 0).
// The rest of D's valid part is zeros (the operands' zeros past their
// valid parts, no C), which the grouped pointer kernel writes: columns
// [covered, dvc) of rows [0, m), then every column of rows [m, dvr).
struct GroupedItem {
  int64_t m, n, k, dvr, dvc, covered;
};
JAX_DYNOFF_HD GroupedItem GroupedItemOf(const GemmProblem& p, int64_t t,
                                        const SlotRef* slots) {
  const auto valid = [&](int o, int j) {
    return ValidExtent(p.op[o], j, t, slots);
  };
  const auto lesser = [](int64_t x, int64_t y) { return x < y ? x : y; };
  const int64_t ar = valid(kA, 0), ac = valid(kA, 1);
  const int64_t br = valid(kB, 0), bc = valid(kB, 1);
  const bool pairs = p.epilogue == Epilogue::kSwiglu;
  GroupedItem g;
  g.dvr = valid(kD, 0);
  g.dvc = valid(kD, 1);
  const int64_t am = p.trans_a ? ac : ar, ak = p.trans_a ? ar : ac;
  const int64_t bk = p.trans_b ? bc : br, bn = p.trans_b ? br : bc;
  g.m = lesser(am, g.dvr);
  g.n = lesser(bn, pairs ? 2 * g.dvc : g.dvc);
  g.k = lesser(ak, bk);
  const bool writes_empty =
      p.planned.grouped_tile == GroupedTile::kSmallGroups;
  if (g.m == 0 || g.n == 0 || (g.k == 0 && !writes_empty))
    g.m = g.n = g.k = 0;
  g.covered = pairs ? (g.n + 1) / 2 : g.n;
  return g;
}

inline bool IsSm90Path(Path p) {
  return p != Path::kGeneric && p != Path::kTf32;
}

// Whether a float32 call runs the direct TF32 kernel (kernels/
// sm90_direct_tf32.h: NN at default precision, B read in place through
// registers) as planned: a planned direct tile (the planner plans one
// only where the kernel's rules hold) and KernelOptions(direct=False) not
// set.  Such a call has nothing staged (StagingOf), so its workspace holds
// no copy of B.
inline bool Tf32DirectPlanned(const GemmProblem& p) {
  return p.in_dtype == DType::kF32 && p.precision == Precision::kDefault &&
         !p.trans_a && !p.trans_b && p.planned.direct != DirectTile::kNone &&
         p.opts.direct;
}

// The SM90 TF32 kernels (kernels/sm90_tf32.h) read A and B K-major only:
// which operands a float32 call planned for an SM90 tile has copied K-major
// into the workspace first, and how many copies of K each holds (3 at
// precision=HIGHEST: the TF32 split, both operands; else 1, only the
// MN-major ones: A transposed, B not transposed; none where the direct
// TF32 kernel runs, Tf32DirectPlanned).  `k` is the GEMM's K: parts * k
// rounded up to 4 elements (16-byte TMA rows; the staging zeros the
// padding), which is parts * k whenever an operand is not staged (its own
// alignment proof makes k a multiple of 4).
struct Tf32Staging {
  bool a = false, b = false;
  int64_t parts = 1;
  int64_t k = 0;
};
inline Tf32Staging StagingOf(const GemmProblem& p) {
  Tf32Staging s;
  s.k = p.k;
  if (!IsSm90Path(p.path) || p.in_dtype != DType::kF32 ||
      Tf32DirectPlanned(p))
    return s;
  const bool split = p.precision == Precision::kHighest;
  s.parts = split ? 3 : 1;
  s.a = split || p.trans_a;
  s.b = split || !p.trans_b;
  s.k = (s.parts * p.k + 3) / 4 * 4;
  return s;
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
//   [stage_ptrs, +8*2*batch) float32 on an SM90 tile (StagingOf): the
//                         GEMM's pointer arrays of the staged A[batch] and
//                         B[batch], then
//   [stage_a, +batch*stage_a_item) staged A: m x StagingOf(p).k row-major
//                         float32 per item, 256-byte aligned stride;
//   [stage_b, +batch*stage_b_item) staged B: n x StagingOf(p).k likewise
//   [shapes, +12*batch)  kSm90Grouped only: each item's problem shape
//                         (m, n, k as int32: the valid extents), then
//   [strides, +8*4*batch) the A[batch], B[batch], C[batch], D[batch]
//                         strides (kGroupedStrideBytes each)
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
  int64_t stage_ptrs = 0;
  int64_t stage_a = 0, stage_a_item = 0;
  int64_t stage_b = 0, stage_b_item = 0;
  int64_t shapes = 0, strides = 0;
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
  w.stage_ptrs = w.partials + items * w.partial_item;
  const Tf32Staging st = StagingOf(p);
  int64_t end = w.stage_ptrs;
  if (st.a || st.b) {
    w.stage_a = RoundUp(w.stage_ptrs + 8 * 2 * p.batch, kWorkspaceAlign);
    if (st.a) w.stage_a_item = RoundUp(p.m * st.k * 4, kWorkspaceAlign);
    w.stage_b = w.stage_a + p.batch * w.stage_a_item;
    if (st.b) w.stage_b_item = RoundUp(p.n * st.k * 4, kWorkspaceAlign);
    end = w.stage_b + p.batch * w.stage_b_item;
  }
  if (p.path == Path::kSm90Grouped) {
    w.shapes = RoundUp(end, kWorkspaceAlign);
    w.strides = RoundUp(w.shapes + kGroupedShapeBytes * p.batch,
                        kWorkspaceAlign);
    end = w.strides + 4 * kGroupedStrideBytes * p.batch;
  }
  w.total = end;
  return w;
}

}  // namespace jax_dynoff

#endif  // JAX_DYNOFF_PLAN_H_
