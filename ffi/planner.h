// The planner: which CUDA kernel runs a call, decided once from static facts
// (the decoded problem, the planning options, the device's SM count and
// compute capability), with the reasons for every option it rejects.
// Plain C++17, no CUDA: jax_dynoff/plan.py asks it through the module
// (module.cc) at lowering time and writes the answer into the call's `plan`
// attribute (path, split_k and the PlannedKernel); the CUDA handler checks
// that answer (CheckPlanned) and itself decides only what depends on the
// run: the device, the buffer addresses and the options' switches.
#ifndef JAX_DYNOFF_PLANNER_H_
#define JAX_DYNOFF_PLANNER_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gemm_problem.h"
#include "plan.h"

namespace jax_dynoff {

// The GPU a call is planned for (132 SMs, 9.0: an H100 / H200, what Python
// assumes where no CUDA device is visible).
struct DeviceFacts {
  int sms = 132;
  int cc_major = 9, cc_minor = 0;
};

// (tile m, tile n, TFLOP/s of one full wave of that tile on an H200, bf16,
// measured by benchmarks/sm90_tiles at 2048^3 .. 8192^3 and 128/512 x 4096
// x 4096: the rate at which each SM works through its tile), by Sm90Tile.
struct Sm90TileShape {
  int64_t m, n;
  double tflops;
};
inline constexpr Sm90TileShape kSm90TileShapes[kNumSm90Tiles] = {
    {256, 128, 650.0}, {128, 128, 630.0}, {64, 128, 550.0}, {64, 64, 420.0}};

inline constexpr DirectTile kAllDirectTiles[] = {
    DirectTile::kLarge, DirectTile::kWide,  DirectTile::kMedium,
    DirectTile::kSmall, DirectTile::kTiny,  DirectTile::kSplitK,
    DirectTile::kClusterK};
static_assert(sizeof(kAllDirectTiles) / sizeof(kAllDirectTiles[0]) ==
                  kNumDirectTiles,
              "kNumDirectTiles (gemm_problem.h) counts the direct tiles");
// (tile m, tile n): the Sm90Direct*Config of each, by DirectTile code.
struct TileMN {
  int64_t m, n;
};
inline constexpr TileMN kDirectTileShapes[] = {
    {0, 0},    {256, 128}, {128, 256}, {128, 128},
    {64, 128}, {64, 64},   {kernels::kDirectSplitKTileM,
                            kernels::kDirectSplitKTileN},
    // cluster_k: its wider tile (the store rule holds for both widths).
    {kernels::kClusterKTileM, 64}};

// The grouped kernel's tiles (GroupedTile, gemm_problem.h): medium for
// every HasGroupedKernel combination, wide for 16-bit NN (the one tile of
// the fused swiglu kernel), small_groups (the small-group kernels: the
// weight-gradient one for 16-bit TN, its 128x128 output tile listed here;
// the forward one for 16-bit NN and NT, 128 features x 64 rows of an item
// a CTA, its rows padded to 8, plan.h kSmallGroupFwdTileN; with the swiglu
// epilogue only where forced), planned where built (GroupedTileChoice); KernelOptions(grouped_tile=...) forces one
// where it is built.  (tile m, tile n) by GroupedTile: m is the granule a ragged item's rows
// are padded to.
inline constexpr TileMN kGroupedTileShapes[kNumGroupedTiles] = {
    {128, 128}, {128, 256},
    {kernels::kSmallGroupTileM, kernels::kSmallGroupTileN}};

using Reasons = std::vector<std::string>;

// Checks a call's planned path, split and kernel against the static rules
// that chose them, so that no attribute set can send the handler to a
// kernel its windows do not suit.  Returns "" or why not.
std::string CheckPlanned(const GemmProblem& p);

// The whole plan of one call.
struct KernelPlan {
  std::string error;  // non-empty: no plan (forced slices do not split K)
  Path path = Path::kGeneric;
  int64_t split_k = 1;
  PlannedKernel kernel;  // grouped_tile: sm90_grouped's tile
  DirectTile direct = DirectTile::kNone;  // the planned path's direct tile
  WorkspaceLayout layout;                 // for path and split_k
  std::string explain;                    // one line: path and why
  // Why not each option (empty: it can run), whether or not chosen.
  Reasons sm90_reasons, skinny_reasons, direct_reasons, split_k_reasons;
  std::string split_k_slices_error;  // the forced slice count is invalid
  Reasons split_k_direct_reasons;    // the split-K path's direct kernel
  // Why a call with ragged windows cannot run as one grouped launch
  // (kSm90Grouped; empty: it can, and does).  A plain call: "no ragged
  // window".
  Reasons grouped_reasons;
  // Why the call keeps its `out` operand rather than getting D as a fresh
  // buffer zeroed outside its windows (planner_rules.h FreshOutReasons;
  // empty: kernel.fresh_out).
  Reasons fresh_out_reasons;
  std::vector<std::pair<std::string, Reasons>> alignment;  // per operand
  // Inputs of the choices, for tests and tuning.
  double tile_times[kNumSm90Tiles] = {};  // predicted us per Sm90Tile
  std::vector<int64_t> split_k_candidates;
  int64_t split_k_choice = 0;  // choose_split_k (0: split-K cannot run)
  int64_t split_k_tiles = 0;   // 64x128 output tiles, batch included
  int skinny_split = 0;        // SkinnySplit on the device (any path)
  // SkinnyTileChoice (any path), where built for the call, else kWide.
  SkinnyTile skinny_tile = SkinnyTile::kWide;
  int cluster_k_tile_n = 0;    // ClusterKTileN on the device (any path)
};

// The plan of `p` (its planned fields ignored: they are the answer), with
// the options p.opts carries.
KernelPlan PlanGemm(const GemmProblem& p, const DeviceFacts& dev);

// Names, as the call's attributes and jax_dynoff spell them (numpy's dtype
// names; options.py's tile names); FromName reads one back.
const char* DTypeName(DType t);
const char* CModeName(CMode c);
const char* PrecisionName(Precision p);
const char* EpilogueName(Epilogue e);
const char* PathName(Path p);
const char* Sm90TileName(Sm90Tile t);
const char* DirectTileName(DirectTile t);
const char* GroupedTileName(GroupedTile t);
const char* SkinnyTileName(SkinnyTile t);
template <typename E, int N>
bool FromName(const char* (*name)(E), std::string_view s, E* out) {
  for (int i = 0; i < N; ++i)
    if (s == name(static_cast<E>(i))) {
      *out = static_cast<E>(i);
      return true;
    }
  return false;
}
Path Sm90TilePath(Sm90Tile t);
// The planned path a direct tile stands in for.
Path DirectTilePath(DirectTile t);
// Which kernels exist: searches of the kernel catalogue (the table in
// ffi/kernels/catalogue.py, searched through kernels/catalogue.h), the
// same answers in every build, CPU-only included.
// Whether an SM90 ptr-array kernel serves the dtypes and transposes
// (float32: every transpose, the runner staging MN-major operands), and
// whether tile `t` is built for them (the tiles differ by dtype pair and
// transposes: float32 has the large and medium tiles only).
bool HasSm90Kernel(DType in, DType out, bool ta, bool tb);
bool HasSm90Tile(DType in, DType out, bool ta, bool tb, Sm90Tile t);
// Whether direct tile `t` is built for the dtypes and transposes.  The
// cluster-K tile stands in for the tiny tile where ClusterKTileN (plan.h)
// gives it a width (DirectChoice) or KernelOptions(direct_tile="cluster_k")
// forces it.
bool HasDirectKernel(DType in, DType out, bool ta, bool tb, DirectTile t);
// Whether a skinny kernel (of any tile, or of tile `t`) is built for the
// dtypes and transposes.
bool HasSkinnyKernel(DType in, DType out, bool ta, bool tb);
bool HasSkinnyTile(DType in, DType out, bool ta, bool tb, SkinnyTile t);
// Whether a grouped kernel (of any tile, or of tile `t`) with epilogue `e`
// is built for the dtypes and transposes.
bool HasGroupedKernel(DType in, DType out, bool ta, bool tb, Epilogue e);
bool HasGroupedTile(DType in, DType out, bool ta, bool tb, Epilogue e,
                    GroupedTile t);
// The grouped tile the planner picks for a ragged call (GroupedReasons
// empty) where no option forces one.
GroupedTile GroupedTileChoice(const GemmProblem& p);
// Whether any window of the call is ragged (has valid extents).
bool HasRaggedWindow(const GemmProblem& p);

}  // namespace jax_dynoff

#endif  // JAX_DYNOFF_PLANNER_H_
