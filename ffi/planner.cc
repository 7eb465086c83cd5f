// The planner (planner.h): the path, tile, split and workspace of a call,
// from the rules in planner_rules.h; the names of paths and tiles; the
// catalogue's availability checks; the check of a call's planned kernel.
#include "planner.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "kernels/catalogue.h"
#include "planner_rules.h"

namespace jax_dynoff {

using namespace planner_rules;  // NOLINT(build/namespaces): its own rules
using kernels::KernelFamily;
using kernels::KernelQuery;

const char* DTypeName(DType t) {
  switch (t) {
    case DType::kF32: return "float32";
    case DType::kF16: return "float16";
    case DType::kBF16: return "bfloat16";
  }
  return "unknown";
}

const char* CModeName(CMode c) {
  switch (c) {
    case CMode::kNone: return "none";
    case CMode::kOwn: return "own";
    case CMode::kFromD: return "from_d";
  }
  return "unknown";
}

const char* PrecisionName(Precision p) {
  switch (p) {
    case Precision::kDefault: return "default";
    case Precision::kHighest: return "highest";
  }
  return "unknown";
}

const char* EpilogueName(Epilogue e) {
  switch (e) {
    case Epilogue::kNone: return "none";
    case Epilogue::kSwiglu: return "swiglu";
  }
  return "unknown";
}

const char* PathName(Path p) {
  switch (p) {
    case Path::kGeneric: return "generic";
    case Path::kSm90Large: return "sm90_large";
    case Path::kSm90SmallM: return "sm90_small_m";
    case Path::kSm90SplitK: return "sm90_split_k";
    case Path::kSm90Medium: return "sm90_medium";
    case Path::kSm90Tiny: return "sm90_tiny";
    case Path::kTf32: return "tf32";
    case Path::kSm90Skinny: return "sm90_skinny";
    case Path::kSm90Grouped: return "sm90_grouped";
  }
  return "unknown";
}

const char* Sm90TileName(Sm90Tile t) {
  static const char* const kNames[] = {"large", "medium", "small_m", "tiny"};
  return kNames[static_cast<int>(t)];
}

const char* DirectTileName(DirectTile t) {
  static const char* const kNames[] = {"none",    "large", "wide",
                                       "medium",  "small_m", "tiny",
                                       "split_k", "cluster_k"};
  return kNames[static_cast<int>(t)];
}

const char* GroupedTileName(GroupedTile t) {
  static const char* const kNames[] = {"medium", "wide", "small_groups"};
  return kNames[static_cast<int>(t)];
}

const char* SkinnyTileName(SkinnyTile t) {
  static const char* const kNames[] = {"wide", "narrow"};
  return kNames[static_cast<int>(t)];
}

Path Sm90TilePath(Sm90Tile t) {
  static constexpr Path kPaths[] = {Path::kSm90Large, Path::kSm90Medium,
                                    Path::kSm90SmallM, Path::kSm90Tiny};
  return kPaths[static_cast<int>(t)];
}

Path DirectTilePath(DirectTile t) {
  switch (t) {
    case DirectTile::kLarge:
    case DirectTile::kWide: return Path::kSm90Large;
    case DirectTile::kMedium: return Path::kSm90Medium;
    case DirectTile::kSmall: return Path::kSm90SmallM;
    case DirectTile::kTiny:
    case DirectTile::kClusterK: return Path::kSm90Tiny;
    case DirectTile::kSplitK: return Path::kSm90SplitK;
    case DirectTile::kNone: break;
  }
  return Path::kGeneric;
}

// The availability checks are searches of the kernel catalogue
// (kernels/catalogue.h): what the table lists, whether or not this build
// compiles it.
bool HasSm90Kernel(DType in, DType out, bool ta, bool tb) {
  return KernelQuery(KernelFamily::kSm90).Dtypes(in, out).Transposes(ta, tb)
      .Any();
}

bool HasDirectKernel(DType in, DType out, bool ta, bool tb, DirectTile t) {
  return KernelQuery(KernelFamily::kSm90Direct).Tile(t).Dtypes(in, out)
      .Transposes(ta, tb).Any();
}

bool HasSkinnyKernel(DType in, DType out, bool ta, bool tb) {
  return KernelQuery(KernelFamily::kSm90Skinny).Dtypes(in, out)
      .Transposes(ta, tb).Any();
}

bool HasSkinnyTile(DType in, DType out, bool ta, bool tb, SkinnyTile t) {
  return KernelQuery(KernelFamily::kSm90Skinny).Tile(t).Dtypes(in, out)
      .Transposes(ta, tb).Any();
}

bool HasGroupedKernel(DType in, DType out, bool ta, bool tb, Epilogue e) {
  return KernelQuery(kernels::GroupedFamily(e)).Dtypes(in, out)
      .Transposes(ta, tb).Any();
}

bool HasGroupedTile(DType in, DType out, bool ta, bool tb, Epilogue e,
                    GroupedTile t) {
  return KernelQuery(kernels::GroupedFamily(e)).Tile(t).Dtypes(in, out)
      .Transposes(ta, tb).Any();
}

// The small-group kernel a grouped call's layout has (the weight-gradient
// one for A transposed, the forward one for A not transposed: whichever
// the catalogue builds for its dtypes and transposes runs under the tile
// small_groups), the rows it pads (TN: K, the items' rows; NN / NT: m)
// and the bound on their mean per item (plan.h).
namespace {
struct SmallGroupKind {
  const char* name;
  int64_t rows;
  int64_t bound;
};
SmallGroupKind SmallGroupKindOf(const GemmProblem& p) {
  if (p.trans_a)
    return {"weight-gradient", p.k, kernels::kSmallGroupMaxMeanRows};
  return {"forward", p.m, kernels::kSmallGroupFwdMaxMeanRows};
}

// Whether the call's items hold few rows on average for its small-group
// kernel (plan.h SmallGroupRows, SmallGroupFwdRows).
bool FewRows(const GemmProblem& p) {
  return p.trans_a ? kernels::SmallGroupRows(p.k, p.batch)
                   : kernels::SmallGroupFwdRows(p.m, p.batch);
}
}  // namespace

GroupedTile GroupedTileChoice(const GemmProblem& p) {
  // The small-group kernels where built for the call (the weight-gradient
  // one for A transposed: a contraction over each item's rows; the forward
  // one for A not transposed: x @ W[e] and x @ W[e]^T) and the items hold
  // few rows on average (FewRows).  Not with the swiglu epilogue: the
  // fused CUTLASS kernel stays planned there, the small-group one runs
  // where forced (KernelOptions(grouped_tile="small_groups")) until GPU
  // timings compare the two.  Both kernels need k and n multiples of 8
  // elements, which the grouped path proves of every call it runs
  // (GroupedExtentReasons): no grouped call runs the CUTLASS kernel for
  // want of them.
  if (p.epilogue == Epilogue::kNone &&
      HasGroupedTile(p.in_dtype, p.out_dtype, p.trans_a, p.trans_b,
                     p.epilogue, GroupedTile::kSmallGroups) &&
      FewRows(p))
    return GroupedTile::kSmallGroups;
  // The wide tile where built: on an H200 as fast as or faster than a
  // 256x128 tile at every moe bench case (its 128-row granule pads 21%
  // rows where the 256-row one pads 56%), and than a 64x256 ping-pong
  // tile (11%, but a slower tile); benchmarks/moe_tile_ab.py.
  if (!HasGroupedTile(p.in_dtype, p.out_dtype, p.trans_a, p.trans_b,
                      p.epilogue, GroupedTile::kWide))
    return GroupedTile::kMedium;
  return GroupedTile::kWide;
}

bool HasRaggedWindow(const GemmProblem& p) {
  for (const OperandDesc& op : p.op)
    if (op.present && op.ragged) return true;
  return false;
}

bool HasSm90Tile(DType in, DType out, bool ta, bool tb, Sm90Tile t) {
  return KernelQuery(KernelFamily::kSm90).Tile(t).Dtypes(in, out)
      .Transposes(ta, tb).Any();
}

KernelPlan PlanGemm(const GemmProblem& p, const DeviceFacts& dev) {
  const CallOptions& o = p.opts;
  KernelPlan k;
  const int sms = dev.sms;
  k.grouped_reasons = GroupedReasons(p, &dev);
  if (HasRaggedWindow(p)) {
    // Ragged windows: one grouped launch, or (Python's lowering) XLA window
    // ops around one plain gemm, which plans itself.  Nothing else runs
    // them.
    k.alignment = AlignmentProof(p);
    const std::string items = Str(p.batch) + (p.batch == 1 ? " item" : " items");
    if (k.grouped_reasons.empty()) {
      k.path = Path::kSm90Grouped;
      const bool forced =
          o.grouped_tile >= 0 &&
          HasGroupedTile(p.in_dtype, p.out_dtype, p.trans_a, p.trans_b,
                         p.epilogue, static_cast<GroupedTile>(o.grouped_tile));
      k.kernel.grouped_tile = forced
                                  ? static_cast<GroupedTile>(o.grouped_tile)
                                  : GroupedTileChoice(p);
      const TileMN t =
          kGroupedTileShapes[static_cast<int>(k.kernel.grouped_tile)];
      k.fresh_out_reasons = FreshOutReasons(p, k.path);
      k.kernel.fresh_out = k.fresh_out_reasons.empty();
      GemmProblem planned = LayoutProblem(p, k.path);
      planned.planned = k.kernel;
      k.layout = Layout(planned);
      // The small-group kernels: which, and why (the mean rows per item
      // against plan.h's bound, or forced).
      const bool small = k.kernel.grouped_tile == GroupedTile::kSmallGroups;
      const SmallGroupKind sg = SmallGroupKindOf(p);
      const std::string mean = "mean rows per item " + Str(sg.rows) + " / " +
                               Str(p.batch);
      const std::string shape =
          p.trans_a ? Str(t.m) + "x" + Str(t.n) + " output tiles, "
                    : "operands swapped: " +
                          Str(kernels::kSmallGroupFwdTileN) +
                          " features of one item x " +
                          Str(kernels::kSmallGroupFwdChunk) +
                          " of its rows a CTA, rows padded to 8, ";
      const std::string empty =
          p.trans_a ? ", items without rows zeroed in the same launch)"
                    : ", items without rows read nothing)";
      const std::string kind =
          small ? std::string("the small-group ") + sg.name +
                      " kernel (mma.sync, " + shape +
                      (forced ? std::string("forced")
                              : mean + " <= " + Str(sg.bound)) +
                      empty
                : std::string(GroupedTileName(k.kernel.grouped_tile)) +
                      " tile " + Str(t.m) + "x" + Str(t.n) +
                      (forced ? " (forced)" : "") +
                      // Where a small-group kernel is built for the call:
                      // why not it (tall items, or the swiglu epilogue).
                      (forced || !HasGroupedTile(p.in_dtype, p.out_dtype,
                                                 p.trans_a, p.trans_b,
                                                 p.epilogue,
                                                 GroupedTile::kSmallGroups)
                           ? std::string()
                       : !FewRows(p)
                           ? std::string(", not the small-group ") + sg.name +
                                 " kernel: " + mean + " > " + Str(sg.bound)
                           : std::string(", not the small-group ") + sg.name +
                                 " kernel (" + mean + " <= " + Str(sg.bound) +
                                 "): with the swiglu epilogue it runs only "
                                 "where forced (KernelOptions(grouped_tile="
                                 "\"small_groups\"))");
      k.explain = std::string(PathName(k.path)) + " (one grouped launch over " +
                  items + ", " +
                  (p.epilogue == Epilogue::kSwiglu
                       ? "silu(gate) * up fused in its epilogue, "
                       : "") +
                  kind +
                  ", problem shapes from the valid extents on the device; " +
                  (k.kernel.fresh_out
                       ? "D a fresh buffer, its rows outside every window "
                         "zeroed by the pointer kernel; "
                       : "") +
                  "workspace " + Str(k.layout.total) + " bytes)";
    } else {
      k.path = Path::kGeneric;
      k.fresh_out_reasons = FreshOutReasons(p, k.path);
      k.layout = Layout(LayoutProblem(p, k.path));
      k.explain = "composed: the ragged operands read into dense windows by "
                  "XLA ops around one plain gemm (not grouped: " +
                  Join(k.grouped_reasons) + ")";
    }
    return k;
  }
  // Only a grouped launch takes a fresh D (the reasons say so).
  k.fresh_out_reasons = FreshOutReasons(p, Path::kGeneric);
  k.alignment = AlignmentProof(p);
  k.sm90_reasons = Sm90Reasons(p, &dev);
  k.skinny_reasons = SkinnyReasons(p, &dev);
  for (int t = 0; t < kNumSm90Tiles; ++t) {
    const Sm90TileShape& s = kSm90TileShapes[t];
    const int64_t waves = CeilDiv(Tiles(p, {s.m, s.n}) * p.batch, sms);
    const double per_tile_us =
        2.0 * s.m * s.n * p.k * sms / (s.tflops * 1e6);
    k.tile_times[t] = waves * per_tile_us;
  }
  k.skinny_split = kernels::SkinnySplit(p.n, p.k, sms);
  {
    // The forced tile where built, else the rule's where built.
    auto built = [&](SkinnyTile t) {
      return HasSkinnyTile(p.in_dtype, p.out_dtype, p.trans_a, p.trans_b, t);
    };
    const SkinnyTile chosen =
        o.skinny_tile >= 0 && built(static_cast<SkinnyTile>(o.skinny_tile))
            ? static_cast<SkinnyTile>(o.skinny_tile)
            : kernels::SkinnyTileChoice(p.n, p.k, p.trans_b, sms);
    k.skinny_tile = built(chosen) ? chosen : SkinnyTile::kWide;
  }
  k.cluster_k_tile_n = kernels::ClusterKTileN(p.m, p.n, p.k, sms);
  // Split-K, whether or not the options ask for it.
  k.split_k_direct_reasons = DirectChoice(p, Path::kSm90SplitK, sms).second;
  k.split_k_tiles = Tiles(p, kSplitKTile) * p.batch;
  k.split_k_candidates = SplitKCandidates(p);
  k.split_k_reasons = SplitKStaticReasons(p, &dev);
  if (k.split_k_reasons.empty()) {
    if (o.split_k_slices > 0) {
      if (!SliceOk(p, o.split_k_slices))
        k.split_k_slices_error = SlicesError(p, o.split_k_slices);
    } else if (k.split_k_candidates.empty()) {
      k.split_k_reasons.push_back(
          "k = " + Str(p.k) + " does not split into 2..32 equal slices of >= " +
          Str(kSplitKMinSliceK) + " elements and a multiple of 16 bytes");
    } else if (k.split_k_tiles >= SplitKTargetCtas(sms)) {
      k.split_k_reasons.push_back(Str(k.split_k_tiles) +
                                  " tiles already fill the GPU");
    }
    if (k.split_k_reasons.empty() && k.split_k_slices_error.empty())
      k.split_k_choice =
          ChooseSplitK(p, k.split_k_candidates,
                       k.split_k_direct_reasons.empty(), sms);
  }

  // The path.
  if (o.split_k && k.split_k_reasons.empty()) {
    if (!k.split_k_slices_error.empty()) {
      k.error = k.split_k_slices_error;
      return k;
    }
    k.path = Path::kSm90SplitK;
    k.split_k = k.split_k_choice;
  } else if (k.skinny_reasons.empty() && o.tile < 0) {
    k.path = Path::kSm90Skinny;
  } else if (k.sm90_reasons.empty()) {
    // The forced tile, else the one the wave model predicts fastest among
    // the tiles built for the dtypes and transposes (ties go to the bigger
    // tile: fewer CTAs, less re-reading of A and B).  float32 and the
    // float32-out lines use the 16-bit tiles' measured rates: their tiles
    // have the same M x N footprints, and only the ratios matter here.  A
    // forced tile not built for the call is ignored (float32 has the large
    // and medium tiles only).
    auto built = [&](int t) {
      return HasSm90Tile(p.in_dtype, p.out_dtype, p.trans_a, p.trans_b,
                         static_cast<Sm90Tile>(t));
    };
    int best = o.tile;
    if (best >= 0 && !built(best)) best = -1;
    if (best < 0) {
      for (int t = 0; t < kNumSm90Tiles; ++t)
        if (built(t) &&
            (best < 0 || k.tile_times[t] < k.tile_times[best]))
          best = t;
    }
    k.path = Sm90TilePath(static_cast<Sm90Tile>(best));
  } else if (p.in_dtype == DType::kF32 && p.out_dtype == DType::kF32 &&
             p.precision == Precision::kDefault) {
    // Windows the TMA kernels cannot read: CUTLASS 2.x TF32, any alignment.
    k.path = Path::kTf32;
  }

  // The kernel within the path.
  auto [direct, why] = DirectChoice(p, k.path, sms);
  k.direct = direct;
  k.direct_reasons = std::move(why);
  k.kernel.direct = direct;
  if (k.path == Path::kSm90Skinny) {
    // The handler's fallback (KernelOptions.skinny=False, unaligned bases)
    // is the tiny tile, direct twin included.
    k.kernel.direct = DirectChoice(p, Path::kSm90Tiny, sms).first;
    k.kernel.skinny_tile = k.skinny_tile;
    k.kernel.skinny_split =
        k.skinny_tile == SkinnyTile::kNarrow ? 1 : k.skinny_split;
  }
  // ClusterKTileN's width where it gives one, else (forced, or chosen for
  // its store rule) the wider tile.
  if (k.kernel.direct == DirectTile::kClusterK)
    k.kernel.cluster_k_tile_n =
        kernels::ClusterKForcedTileN(p.m, p.n, p.k, sms);
  // The workspace of the path and the kernel (a float32 call planned for
  // its direct kernel stages nothing: plan.h StagingOf), as the handler
  // computes it from the attributes this plan goes into.
  GemmProblem planned = LayoutProblem(p, k.path, k.split_k);
  planned.planned = k.kernel;
  k.layout = Layout(planned);
  // explain names the cluster-K tile's shape wherever that tile runs.
  const auto direct_name = [&](DirectTile t) {
    std::string s = std::string(DirectTileName(t)) + " tile";
    if (t == DirectTile::kClusterK)
      s += ": 64x" + Str(k.kernel.cluster_k_tile_n) +
           " output tiles, each one's K split across a cluster of " +
           Str(kernels::kClusterKSplit) + " CTAs";
    return s;
  };

  // One line: the path and why.
  const std::string ws =
      "workspace " + Str(k.layout.total) + " bytes)";
  const std::string name = PathName(k.path);
  if (k.path == Path::kSm90SplitK) {
    const std::string kind =
        k.split_k_direct_reasons.empty()
            ? "direct kernel"
            : "ptr-array slices + reduction: " +
                  Join(k.split_k_direct_reasons);
    k.explain = name + " (split_k " + Str(k.split_k) + ", " + kind + "; " + ws;
  } else if (k.path == Path::kSm90Skinny) {
    k.explain = name + " (" +
                (k.kernel.skinny_tile == SkinnyTile::kNarrow
                     ? std::string("narrow tile: ") +
                           Str(kernels::kSkinnyNarrowTileN) +
                           " columns a CTA over all of K, no cluster"
                     : "wide tile, split " + Str(k.skinny_split) + " on " +
                           Str(sms) + " SMs") +
                "; fallback the " +
                (k.kernel.direct == DirectTile::kClusterK
                     ? direct_name(DirectTile::kClusterK)
                     : std::string("tiny tile")) +
                "; " + ws;
  } else if (IsSm90Path(k.path) && p.in_dtype == DType::kF32) {
    const Tf32Staging st = StagingOf(planned);
    const char* staged = st.a && st.b ? "A and B" : st.a ? "A" : st.b ? "B" : "";
    std::string kind;
    if (st.parts == 3) {
      kind = "3xTF32 wgmma: A and B split into TF32 parts, staged K-major, "
             "K x 3; 128x128 tile, promoted accumulators";
    } else if (Tf32DirectPlanned(planned)) {
      kind = std::string("TF32 wgmma, direct kernel, ") +
             DirectTileName(direct) + " tile, B read in place";
    } else {
      // Why not the direct kernel where float32 has one (NN): the options,
      // or its rules.
      kind = "TF32 wgmma, ptr-array kernel";
      if (direct != DirectTile::kNone)
        kind += " (KernelOptions(direct=False))";
      else if (!p.trans_a && !p.trans_b)
        kind += " (not direct: " + Join(k.direct_reasons) + ")";
      if (*staged) kind += std::string(", ") + staged + " staged K-major";
    }
    k.explain = name + " (" + kind + "; " + ws;
  } else if (IsSm90Path(k.path)) {
    const std::string kind =
        direct != DirectTile::kNone
            ? "direct kernel, " + direct_name(direct)
            : "ptr-array kernel: " + Join(k.direct_reasons);
    k.explain = name + " (" + kind + "; " + ws;
  } else if (k.path == Path::kTf32) {
    k.explain = name + " (CUTLASS 2.x mma.sync, any alignment: " +
                Join(k.sm90_reasons) + "; " + ws;
  } else if (p.in_dtype == DType::kF32) {
    k.explain = "generic: float32 at precision highest (exact SIMT kernel): " +
                Join(k.sm90_reasons);
  } else {
    k.explain = "generic: " + Join(k.sm90_reasons);
  }
  return k;
}

std::string CheckPlanned(const GemmProblem& p) {
  const PlannedKernel& k = p.planned;
  const std::string who =
      std::string("jax_dynoff_gemm: the plan (path ") + PathName(p.path) +
      ", direct tile " + DirectTileName(k.direct) + ", skinny tile " +
      SkinnyTileName(k.skinny_tile) + ", skinny split " +
      Str(k.skinny_split) + ", cluster-K width " + Str(k.cluster_k_tile_n) +
      ")";
  if (p.path == Path::kSm90Grouped) {
    Reasons why = GroupedReasons(p, nullptr);
    if (!HasGroupedTile(p.in_dtype, p.out_dtype, p.trans_a, p.trans_b,
                        p.epilogue, k.grouped_tile))
      why.push_back(std::string("grouped tile ") +
                    GroupedTileName(k.grouped_tile) +
                    " is not built for these dtypes and transposes");
    if (k.direct != DirectTile::kNone || k.skinny_split != 0 ||
        k.skinny_tile != SkinnyTile::kWide || k.cluster_k_tile_n != 0)
      why.push_back("a grouped call plans no other kernel");
    if (k.fresh_out)
      for (std::string& r : FreshOutReasons(p, p.path))
        why.push_back("fresh out: " + r);
    return why.empty() ? "" : who + ": its rules do not hold: " + Join(why);
  }
  if (k.fresh_out)
    return who + ": a fresh out outside the grouped path";
  if (p.path != Path::kSm90SplitK && p.split_k != 1)
    return who + ": split_k " + Str(p.split_k) + " outside the split-K path";
  const bool skinny = p.path == Path::kSm90Skinny;
  if (skinny ? k.skinny_split < 1 || k.skinny_split > kernels::kSkinnyMaxSplit
             : k.skinny_split != 0)
    return who + ": bad skinny split";
  // The narrow tile: the skinny path's, where built, unsplit.
  if (k.skinny_tile != SkinnyTile::kWide &&
      (!skinny || k.skinny_split != 1 ||
       !HasSkinnyTile(p.in_dtype, p.out_dtype, p.trans_a, p.trans_b,
                      k.skinny_tile)))
    return who + ": bad skinny tile";
  // The cluster-K tile's width: one of its two (the kernel handles any
  // problem at either); none for other tiles.
  if (k.direct == DirectTile::kClusterK
          ? k.cluster_k_tile_n != 32 && k.cluster_k_tile_n != 64
          : k.cluster_k_tile_n != 0)
    return who + ": bad cluster-K width";
  // The static rules that chose the path and the tile must hold (only a
  // plan not made by plan.py can fail them).
  Reasons why;
  if (p.path == Path::kSm90SplitK) {
    why = SplitKStaticReasons(p, nullptr);
    if (!SliceOk(p, p.split_k)) why.push_back(SlicesError(p, p.split_k));
  } else if (skinny) {
    why = SkinnyReasons(p, nullptr);
  } else if (IsSm90Path(p.path)) {
    why = Sm90Reasons(p, nullptr);
  }
  if (k.direct != DirectTile::kNone) {
    const Path tile_path = skinny ? Path::kSm90Tiny : p.path;
    if (DirectTilePath(k.direct) != tile_path) {
      why.push_back(std::string("direct tile ") + DirectTileName(k.direct) +
                    " is not a tile of " + PathName(tile_path));
    } else {
      // The tile's rules, with the planned tile forced.
      GemmProblem q = p;
      q.opts.direct_tile = k.direct;
      for (std::string& r : DirectChoice(q, tile_path, 1).second)
        why.push_back(std::move(r));
    }
  }
  if (!why.empty()) return who + ": its rules do not hold: " + Join(why);
  return "";
}

}  // namespace jax_dynoff
