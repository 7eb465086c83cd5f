// The choice function (launch_choice.h): the rule, as catalogue searches.
#include "launch_choice.h"

#include "kernels/catalogue.h"
#include "plan.h"
#include "planner.h"

namespace jax_dynoff {

using kernels::KernelFamily;
using kernels::KernelQuery;

namespace {

// The SM90 ptr-array tile of an unsplit SM90 tile path, or -1.
int Sm90TileOf(Path path) {
  for (int t = 0; t < kNumSm90Tiles; ++t)
    if (Sm90TilePath(static_cast<Sm90Tile>(t)) == path) return t;
  return -1;
}

bool IsSm90Family(KernelFamily f) {
  return f != KernelFamily::kGeneric && f != KernelFamily::kTf32;
}

// The line a query finds where this build has its kernel, else -1.
int Line(const KernelQuery& q, KernelFamily family, const RunFacts& f) {
  if (IsSm90Family(family) && !f.sm90_built) return -1;
  return q.Find();
}

}  // namespace

const char* LineName(int line) {
  return line < 0 || line >= kernels::kCatalogueSize
             ? "" : kernels::kCatalogue[line].name;
}

LaunchChoice ChooseLaunch(const GemmProblem& p, const RunFacts& f) {
  LaunchChoice c;
  const bool ta = p.trans_a, tb = p.trans_b;
  auto line = [&](KernelFamily family, auto build) {
    return Line(build(KernelQuery(family)), family, f);
  };

  // Ragged windows: the grouped kernel, which nothing stands in for (the
  // planner chose it for this device's kind, so only a program moved to
  // another GPU or unaligned buffers land here without it).
  if (p.path == Path::kSm90Grouped) {
    c.kind = LaunchKind::kGrouped;
    // The epilogue picks the family: the fused swiglu kernel, or the plain
    // grouped one.
    c.line = line(kernels::GroupedFamily(p.epilogue), [&](KernelQuery q) {
      return q.Tile(p.planned.grouped_tile).Dtypes(p.in_dtype, p.out_dtype)
          .Transposes(ta, tb);
    });
    if (c.line < 0 || !f.sm90_device)
      c.error = "ragged windows need the grouped SM90 kernel: a build with "
                "sm_90a kernels and a compute capability 9.0 GPU";
    else if (!f.bases_aligned)
      c.error = "ragged windows need 16-byte aligned buffers";
    return c;
  }

  // The CUTLASS 2.x kernels: the generic one, and TF32 for float32 at
  // default precision (any alignment; KernelOptions(tf32=False) keeps the
  // exact generic kernel).
  c.line = line(KernelFamily::kGeneric, [&](KernelQuery q) {
    return q.Dtypes(p.in_dtype, p.out_dtype);
  });
  const bool f32_default = p.in_dtype == DType::kF32 &&
                           p.out_dtype == DType::kF32 &&
                           p.precision == Precision::kDefault;
  const bool no_tf32 = f32_default && !p.opts.tf32;
  const int tf32 = line(KernelFamily::kTf32, [&](KernelQuery q) {
    return q.Dtypes(p.in_dtype, p.out_dtype).Transposes(ta, tb);
  });
  if ((p.path == Path::kTf32 || IsSm90Path(p.path)) && f32_default &&
      !no_tf32 && tf32 >= 0)
    c.line = tf32;
  c.grid_z_batch = true;
  if (!IsSm90Path(p.path) || !p.opts.sm90 || no_tf32 || !f.sm90_device ||
      p.k <= 0)
    return c;

  const bool direct_ok = p.opts.direct && f.bases_aligned;
  auto direct_line = [&]() {
    if (!direct_ok || p.planned.direct == DirectTile::kNone) return -1;
    return line(KernelFamily::kSm90Direct, [&](KernelQuery q) {
      return q.Tile(p.planned.direct).Dtypes(p.in_dtype, p.out_dtype)
          .Transposes(ta, tb);
    });
  };
  auto take_direct = [&](int direct) {
    c.kind = LaunchKind::kDirect;
    c.line = direct;
    c.grid_z_batch = false;
    c.split = p.planned.direct == DirectTile::kSplitK
                  ? static_cast<int>(p.split_k)
              : p.planned.direct == DirectTile::kClusterK
                  ? kernels::kClusterKSplit
                  : 1;
    c.cluster_k_tile_n = p.planned.direct == DirectTile::kClusterK
                             ? p.planned.cluster_k_tile_n
                             : 0;
    c.deterministic = p.opts.deterministic;
  };

  // The skinny path: its kernel, else the tiny tile as if planned for it
  // (its workspace is the tiny tile's, its direct twin the planned one).
  Path tile_path = p.path;
  if (p.path == Path::kSm90Skinny) {
    const int skinny = line(KernelFamily::kSm90Skinny, [&](KernelQuery q) {
      return q.Tile(p.planned.skinny_tile).Dtypes(p.in_dtype, p.out_dtype)
          .Transposes(false, tb);
    });
    if (skinny >= 0 && p.opts.skinny && f.bases_aligned) {
      c.kind = LaunchKind::kSkinny;
      c.line = skinny;
      c.grid_z_batch = false;
      c.split = p.planned.skinny_split;
      return c;
    }
    tile_path = Path::kSm90Tiny;
  }

  // Split-K: the direct kernel, else the ptr-array slices and the
  // reduction kernel, else (above) the generic kernel unsplit.
  if (p.path == Path::kSm90SplitK) {
    if (const int direct = direct_line(); direct >= 0) {
      take_direct(direct);
      return c;
    }
    const int slices = line(KernelFamily::kSm90SplitK, [&](KernelQuery q) {
      return q.In(p.in_dtype).Transposes(ta, tb);
    });
    if (slices >= 0 && f.ab_ws_aligned) {
      c.line = slices;
      c.grid_z_batch = false;
      c.slices = true;
      c.split = static_cast<int>(p.split_k);
    }
    return c;
  }

  // The other SM90 tiles: direct where planned and allowed, else the
  // ptr-array kernel (3xTF32 for float32 at HIGHEST).
  const int tile = Sm90TileOf(tile_path);
  const int sm90 =
      p.in_dtype == DType::kF32 && p.precision == Precision::kHighest
          ? line(KernelFamily::kSm90Tf32Highest,
                 [&](KernelQuery q) { return q.Tile(tile); })
          : line(KernelFamily::kSm90, [&](KernelQuery q) {
              return q.Tile(tile).Dtypes(p.in_dtype, p.out_dtype)
                  .Transposes(ta, tb);
            });
  if (tile < 0 || sm90 < 0 || !f.bases_aligned) return c;
  if (const int direct = direct_line(); direct >= 0) {
    take_direct(direct);
    return c;
  }
  c.line = sm90;
  c.grid_z_batch = false;
  c.staged = p.in_dtype == DType::kF32;
  // A float32 call planned for the direct TF32 kernel has no staged copy
  // of its MN-major B in the workspace (plan.h StagingOf), which the
  // ptr-array TF32 kernel would need: where the direct kernel does not run
  // after all, the CUTLASS 2.x TF32 kernel (any layout, in place) does.
  const Tf32Staging staging = StagingOf(p);
  const bool k_major = (!ta || staging.a) && (tb || staging.b);
  if (c.staged && !k_major && tf32 >= 0) {
    c.line = tf32;
    c.grid_z_batch = true;
    c.staged = false;
  }
  return c;
}

}  // namespace jax_dynoff
