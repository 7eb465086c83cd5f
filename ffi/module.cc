// nanobind module: hands the FFI handlers to Python as capsules.
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string_view>
#include <string>
#include <vector>

#include "call_attrs.h"
#include "gemm_problem.h"
#include "handlers.h"
#include "kernels/catalogue.h"
#include "launch_choice.h"
#include "plan.h"
#include "planner.h"

namespace nb = nanobind;

namespace {

nb::capsule Capsule(XLA_FFI_Handler* handler) {
  return nb::capsule(reinterpret_cast<void*>(handler));
}

// A call's attributes as a Python dict (jax_dynoff/spec.py call_attrs,
// before the lowering turns them into MLIR attributes): ints, bools,
// floats, strs, sequences of ints and nested dicts.
class PyAttrs : public jax_dynoff::AttrReader {
 public:
  explicit PyAttrs(nb::dict d) : d_(std::move(d)) {}
  bool Has(std::string_view name) const override {
    return d_.contains(Key(name));
  }
  std::string Int(std::string_view name, int64_t* v) const override {
    nb::object o;
    if (!Find(name, &o)) return "missing";
    if (nb::isinstance<nb::bool_>(o) || !nb::try_cast(o, *v))
      return "not an integer";
    return "";
  }
  std::string Bool(std::string_view name, bool* v) const override {
    nb::object o;
    if (!Find(name, &o)) return "missing";
    if (!nb::isinstance<nb::bool_>(o)) return "not a bool";
    *v = nb::cast<bool>(o);
    return "";
  }
  std::string Float(std::string_view name, double* v) const override {
    nb::object o;
    if (!Find(name, &o)) return "missing";
    if (!nb::try_cast(o, *v)) return "not a number";
    return "";
  }
  std::string Str(std::string_view name, std::string* v) const override {
    nb::object o;
    if (!Find(name, &o)) return "missing";
    if (!nb::isinstance<nb::str>(o)) return "not a str";
    *v = nb::cast<std::string>(o);
    return "";
  }
  std::string Ints(std::string_view name,
                   std::vector<int64_t>* v) const override {
    nb::object o;
    if (!Find(name, &o)) return "missing";
    if (!nb::try_cast(o, *v)) return "not a sequence of integers";
    return "";
  }
  std::string Dict(std::string_view name,
                   std::unique_ptr<jax_dynoff::AttrReader>* v) const override {
    nb::object o;
    if (!Find(name, &o)) return "missing";
    if (!nb::isinstance<nb::dict>(o)) return "not a dict";
    *v = std::make_unique<PyAttrs>(nb::borrow<nb::dict>(o));
    return "";
  }

 private:
  static nb::str Key(std::string_view name) {
    return nb::str(name.data(), name.size());
  }
  bool Find(std::string_view name, nb::object* o) const {
    const nb::str key = Key(name);
    if (!d_.contains(key)) return false;
    *o = d_[key];
    return true;
  }
  nb::dict d_;
};

jax_dynoff::GemmProblem DecodeOrThrow(const nb::dict& attrs) {
  jax_dynoff::GemmProblem p;
  const std::string msg = jax_dynoff::DecodeCallAttrs(PyAttrs(attrs), &p);
  if (!msg.empty()) throw std::invalid_argument(msg);
  return p;
}

nb::dict LayoutDict(const jax_dynoff::WorkspaceLayout& w) {
  nb::dict d;
  d["kernel_bytes"] = w.kernel_bytes;
  d["ptrs"] = w.ptrs;
  d["ptr_count"] = w.ptr_count;
  d["scratch"] = w.scratch;
  d["scratch_item"] = w.scratch_item;
  d["partials"] = w.partials;
  d["partial_item"] = w.partial_item;
  d["stage_ptrs"] = w.stage_ptrs;
  d["stage_a"] = w.stage_a;
  d["stage_a_item"] = w.stage_a_item;
  d["stage_b"] = w.stage_b;
  d["stage_b_item"] = w.stage_b_item;
  d["shapes"] = w.shapes;
  d["strides"] = w.strides;
  d["total"] = w.total;
  return d;
}

// The choice function's answer (jax_dynoff/plan.py launch_choice).
nb::dict ChoiceDict(const jax_dynoff::LaunchChoice& c) {
  static const char* const kKinds[] = {"ptr_array", "direct", "skinny",
                                       "grouped"};
  nb::dict d;
  d["error"] = c.error;
  d["kind"] = kKinds[static_cast<int>(c.kind)];
  d["kernel"] = jax_dynoff::LineName(c.line);
  d["split"] = c.split;
  d["slices"] = c.slices;
  d["staged"] = c.staged;
  d["grid_z_batch"] = c.grid_z_batch;
  d["cluster_k_tile_n"] = c.cluster_k_tile_n;
  d["deterministic"] = c.deterministic;
  return d;
}

nb::list List(const std::vector<std::string>& v) {
  nb::list l;
  for (const std::string& s : v) l.append(s);
  return l;
}

// The planner's whole answer for one call (jax_dynoff/plan.py reads it).
nb::dict PlanDict(const jax_dynoff::KernelPlan& k) {
  using namespace jax_dynoff;
  nb::dict d;
  d["error"] = k.error;
  d["path"] = PathName(k.path);
  d["split_k"] = k.split_k;
  // The planned kernel within the path: what the call's `plan` attribute
  // carries beside path and split_k.
  nb::dict kernel;
  kernel["direct_tile"] = k.kernel.direct == DirectTile::kNone
                              ? "" : DirectTileName(k.kernel.direct);
  kernel["skinny_split"] = k.kernel.skinny_split;
  kernel["skinny_tile"] = SkinnyTileName(k.kernel.skinny_tile);
  kernel["cluster_k_tile_n"] = k.kernel.cluster_k_tile_n;
  kernel["grouped_tile"] = GroupedTileName(k.kernel.grouped_tile);
  kernel["fresh_out"] = k.kernel.fresh_out;
  d["kernel"] = kernel;
  d["direct_tile"] = k.direct == DirectTile::kNone
                         ? nb::object(nb::none())
                         : nb::object(nb::str(DirectTileName(k.direct)));
  d["workspace"] = LayoutDict(k.layout);
  d["explain"] = k.explain;
  d["sm90_reasons"] = List(k.sm90_reasons);
  d["skinny_reasons"] = List(k.skinny_reasons);
  d["direct_reasons"] = List(k.direct_reasons);
  d["split_k_reasons"] = List(k.split_k_reasons);
  d["split_k_slices_error"] = k.split_k_slices_error;
  d["split_k_direct_reasons"] = List(k.split_k_direct_reasons);
  d["grouped_reasons"] = List(k.grouped_reasons);
  d["fresh_out_reasons"] = List(k.fresh_out_reasons);
  d["grouped_tile"] = k.path == Path::kSm90Grouped
                          ? nb::object(nb::str(GroupedTileName(k.kernel.grouped_tile)))
                          : nb::object(nb::none());
  nb::dict align;  // insertion order: a, b, d, c
  for (const auto& [name, why] : k.alignment) align[name.c_str()] = List(why);
  d["alignment"] = align;
  nb::dict times;
  for (int t = 0; t < kNumSm90Tiles; ++t)
    times[Sm90TileName(static_cast<Sm90Tile>(t))] = k.tile_times[t];
  d["tile_times"] = times;
  nb::list cands;
  for (int64_t s : k.split_k_candidates) cands.append(s);
  d["split_k_candidates"] = cands;
  d["split_k_choice"] = k.split_k_choice;
  d["split_k_tiles"] = k.split_k_tiles;
  d["skinny_split"] = k.skinny_split;
  d["skinny_tile"] = SkinnyTileName(k.skinny_tile);
  d["cluster_k_tile_n"] = k.cluster_k_tile_n;
  return d;
}

// The contract's limits and the one code it carries (a slot's kind, in
// an integer array), for jax_dynoff/spec.py: the numbers live here only;
// everything else in the call's attributes is a name.
nb::dict CallCodes() {
  using jax_dynoff::SlotKind;
  nb::dict c;
  c["max_rank"] = jax_dynoff::kMaxRank;
  c["max_batch_rank"] = jax_dynoff::kMaxBatchRank;
  c["max_slots"] = jax_dynoff::kMaxSlots;
  nb::list dtypes;  // numpy's names of the dtypes a call takes
  for (int t = 0; t < 3; ++t)
    dtypes.append(jax_dynoff::DTypeName(static_cast<jax_dynoff::DType>(t)));
  c["dtypes"] = dtypes;
  nb::list epilogues;  // the epilogues' names (gemm_problem.h Epilogue)
  for (int e = 0; e < jax_dynoff::kNumEpilogues; ++e)
    epilogues.append(
        jax_dynoff::EpilogueName(static_cast<jax_dynoff::Epilogue>(e)));
  c["epilogues"] = epilogues;
  nb::dict slot_kinds;
  slot_kinds["vector"] = static_cast<int64_t>(SlotKind::kVector);
  slot_kinds["scalar"] = static_cast<int64_t>(SlotKind::kScalar);
  slot_kinds["lookup"] = static_cast<int64_t>(SlotKind::kLookup);
  c["slot_kinds"] = slot_kinds;
  nb::dict div_ops;  // SlotDivOp by the name of the op it stands for
  div_ops["none"] = static_cast<int64_t>(jax_dynoff::SlotDivOp::kNone);
  div_ops["floor_divide"] =
      static_cast<int64_t>(jax_dynoff::SlotDivOp::kFloorDiv);
  div_ops["remainder"] = static_cast<int64_t>(jax_dynoff::SlotDivOp::kFloorMod);
  div_ops["div"] = static_cast<int64_t>(jax_dynoff::SlotDivOp::kTruncDiv);
  div_ops["rem"] = static_cast<int64_t>(jax_dynoff::SlotDivOp::kTruncRem);
  c["slot_div_ops"] = div_ops;
  return c;
}

// The planner's names and tables, for plan.py's constants.
nb::dict PlannerTables() {
  using namespace jax_dynoff;
  nb::dict paths;
  for (int64_t i = 0; i < kNumPaths; ++i)
    paths[PathName(static_cast<Path>(i))] = i;
  nb::dict sm90_tiles;  // name: (tile m, tile n, TFLOP/s)
  for (int t = 0; t < kNumSm90Tiles; ++t) {
    const Sm90TileShape& s = kSm90TileShapes[t];
    sm90_tiles[Sm90TileName(static_cast<Sm90Tile>(t))] =
        nb::make_tuple(s.m, s.n, s.tflops);
  }
  nb::dict direct_tiles, direct_paths;  // name: (tile m, tile n); name: path
  for (DirectTile t : kAllDirectTiles) {
    const TileMN& s = kDirectTileShapes[static_cast<int>(t)];
    direct_tiles[DirectTileName(t)] = nb::make_tuple(s.m, s.n);
    direct_paths[DirectTileName(t)] = PathName(DirectTilePath(t));
  }
  nb::dict grouped_tiles;  // name: (tile m, tile n)
  for (int t = 0; t < kNumGroupedTiles; ++t)
    grouped_tiles[GroupedTileName(static_cast<GroupedTile>(t))] =
        nb::make_tuple(kGroupedTileShapes[t].m, kGroupedTileShapes[t].n);
  nb::list sm90_kernels;  // ((input dtype, output dtype, trans_a, trans_b), tiles)
  const DType dts[] = {DType::kBF16, DType::kF16, DType::kF32};
  const char* names[] = {"bfloat16", "float16", "float32"};
  for (int i = 0; i < 3; ++i)
    for (int o = 0; o < 3; ++o)
      for (int ta = 0; ta < 2; ++ta)
        for (int tb = 0; tb < 2; ++tb)
          if (HasSm90Kernel(dts[i], dts[o], ta, tb)) {
            nb::list tiles;  // the tiles built for it, Sm90Tile order
            for (int t = 0; t < kNumSm90Tiles; ++t)
              if (HasSm90Tile(dts[i], dts[o], ta, tb, static_cast<Sm90Tile>(t)))
                tiles.append(Sm90TileName(static_cast<Sm90Tile>(t)));
            sm90_kernels.append(nb::make_tuple(
                nb::make_tuple(names[i], names[o], bool(ta), bool(tb)),
                nb::tuple(tiles)));
          }
  // The kernel catalogue, a tuple a line: (name, family, tiles, input
  // dtype, output dtype, layouts it serves), as kernels/catalogue.h holds
  // it (ffi/kernels/catalogue.py generates it).
  nb::list catalogue;
  for (int i = 0; i < kernels::kCatalogueSize; ++i) {
    const kernels::CatalogueKernel& k = kernels::kCatalogue[i];
    using kernels::KernelFamily;
    const char* family = "";
    const char* (*tile_name)(int) = nullptr;  // a tile code's name
    switch (k.family) {
      case KernelFamily::kGeneric: family = "generic"; break;
      case KernelFamily::kTf32: family = "tf32"; break;
      case KernelFamily::kSm90:
      case KernelFamily::kSm90Tf32Highest:
        family = k.family == KernelFamily::kSm90 ? "sm90"
                                                 : "sm90_tf32_highest";
        tile_name = [](int t) { return Sm90TileName(static_cast<Sm90Tile>(t)); };
        break;
      case KernelFamily::kSm90SplitK: family = "sm90_split_k"; break;
      case KernelFamily::kSm90Direct:
        family = "sm90_direct";
        tile_name = [](int t) {
          return DirectTileName(static_cast<DirectTile>(t));
        };
        break;
      case KernelFamily::kSm90Grouped:
      case KernelFamily::kSm90GroupedSwiglu:
        family = k.family == KernelFamily::kSm90Grouped
                     ? "sm90_grouped" : "sm90_grouped_swiglu";
        tile_name = [](int t) {
          return GroupedTileName(static_cast<GroupedTile>(t));
        };
        break;
      case KernelFamily::kSm90Skinny:
        family = "sm90_skinny";
        tile_name = [](int t) {
          return SkinnyTileName(static_cast<SkinnyTile>(t));
        };
        break;
    }
    nb::list tile_names;  // the set bits of its tiles (TileBit: the codes)
    for (int t = 0; tile_name != nullptr && t < 32; ++t)
      if ((k.tiles >> t) & 1u) tile_names.append(tile_name(t));
    nb::list layouts;
    for (int ta = 0; ta < 2; ++ta)
      for (int tb = 0; tb < 2; ++tb)
        if (k.layouts & kernels::LayoutBit(ta, tb))
          layouts.append(std::string(ta ? "T" : "N") + (tb ? "T" : "N"));
    catalogue.append(nb::make_tuple(k.name, family, nb::tuple(tile_names),
                                    DTypeName(k.in), DTypeName(k.out),
                                    nb::tuple(layouts)));
  }
  nb::dict d;
  d["catalogue"] = catalogue;
  d["paths"] = paths;
  d["sm90_tiles"] = sm90_tiles;
  d["direct_tiles"] = direct_tiles;
  d["direct_tile_paths"] = direct_paths;
  d["grouped_tiles"] = grouped_tiles;
  nb::list skinny_tiles;  // SkinnyTile order
  for (int t = 0; t < kNumSkinnyTiles; ++t)
    skinny_tiles.append(SkinnyTileName(static_cast<SkinnyTile>(t)));
  d["skinny_tiles"] = nb::tuple(skinny_tiles);
  // The skinny path's narrow tile (plan.h SkinnyTileChoice), where its
  // n / 16 CTAs fit one wave at the fifth an SM: NN up to the first K,
  // and up to the second where n is at most the third; NT up to the
  // fourth.
  d["skinny_narrow_max_k"] = kernels::kSkinnyNarrowMaxK;
  d["skinny_narrow_long_max_k"] = kernels::kSkinnyNarrowLongMaxK;
  d["skinny_narrow_long_max_n"] = kernels::kSkinnyNarrowLongMaxN;
  d["skinny_narrow_nt_max_k"] = kernels::kSkinnyNarrowNtMaxK;
  d["skinny_narrow_ctas_per_sm"] = kernels::kSkinnyNarrowCtasPerSm;
  // The small-group weight-gradient kernel's bound on a call's mean rows
  // per item (plan.h SmallGroupRows).
  d["small_group_max_mean_rows"] = kernels::kSmallGroupMaxMeanRows;
  // The small-group forward kernel's (A not transposed: m's capacity /
  // items; plan.h SmallGroupFwdRows).
  d["small_group_fwd_max_mean_rows"] = kernels::kSmallGroupFwdMaxMeanRows;
  d["sm90_kernels"] = sm90_kernels;
  return d;
}

}  // namespace

NB_MODULE(_jax_dynoff, m) {
  m.doc() = "jax_dynoff FFI handlers";
  // {platform: {target name: capsule, or {stage: capsule}}};
  // jax_dynoff/lowering.py registers each with jax.ffi.register_ffi_target.
  // The CUDA handler has two stages: instantiate (decode and plan once per
  // op instance, into a state) and execute.
  m.def("registrations", []() {
    nb::dict platforms;
    nb::dict cpu;
    cpu[jax_dynoff::kTargetName] = Capsule(jax_dynoff::CpuGemmHandler());
    platforms["cpu"] = cpu;
#ifdef JAX_DYNOFF_WITH_CUDA
    nb::dict stages;
    stages["instantiate"] = Capsule(jax_dynoff::CudaGemmInstantiate());
    stages["execute"] = Capsule(jax_dynoff::CudaGemmHandler());
    nb::dict cuda;
    cuda[jax_dynoff::kTargetName] = stages;
    cuda[jax_dynoff::kGraphPadName] = Capsule(jax_dynoff::GraphPadHandler());
    platforms["CUDA"] = cuda;
#endif
    return platforms;
  });
  // {platform: {type name: {"type_id": capsule, "type_info": capsule}}}: the
  // FFI types XLA must know before a handler's state of that type is set.
  m.def("ffi_types", []() {
    nb::dict platforms;
#ifdef JAX_DYNOFF_WITH_CUDA
    nb::dict type;
    type["type_id"] = nb::capsule(jax_dynoff::CudaGemmStateTypeId());
    type["type_info"] = nb::capsule(jax_dynoff::CudaGemmStateTypeInfo());
    nb::dict cuda;
    cuda["jax_dynoff_gemm_state"] = type;
    platforms["CUDA"] = cuda;
#endif
    return platforms;
  });
  // The CUDA handler's workspace layout for a call's attributes (plan
  // included; jax_dynoff/plan.py sizes the workspace result with it): the
  // formula lives in plan.h.
  m.def("workspace_layout", [](const nb::dict& attrs) {
    return LayoutDict(jax_dynoff::Layout(DecodeOrThrow(attrs)));
  });
  // One item of a grouped call whose valid extents are all static (no
  // slot to read): the product the grouped kernel runs and the zeros the
  // pointer kernel writes (plan.h GroupedItemOf, which both share).
  m.def("grouped_item", [](const nb::dict& attrs, int64_t t) {
    using namespace jax_dynoff;
    const GemmProblem p = DecodeOrThrow(attrs);
    if (p.num_slots != 0)
      throw std::invalid_argument("grouped_item: the call has dynamic slots");
    if (t < 0 || t >= p.batch)
      throw std::invalid_argument("grouped_item: no such batch item");
    const GroupedItem g = GroupedItemOf(p, t, nullptr);
    nb::dict d;
    d["m"] = g.m;
    d["n"] = g.n;
    d["k"] = g.k;
    d["dvr"] = g.dvr;
    d["dvc"] = g.dvc;
    d["covered"] = g.covered;
    return d;
  });
  // The planner (planner.h): the whole plan of the call the attributes
  // describe (their `plan`, if any, is ignored: it is the answer), their
  // `options` included, on a device of `sms` SMs and compute capability
  // cc_major.cc_minor.
  m.def("plan", [](const nb::dict& attrs, int sms, int cc_major,
                   int cc_minor) {
    using namespace jax_dynoff;
    if (sms < 1) throw std::invalid_argument("sms must be >= 1");
    GemmProblem p = DecodeOrThrow(attrs);
    p.path = Path::kGeneric;
    p.split_k = 1;
    p.planned = PlannedKernel{};
    return PlanDict(PlanGemm(p, DeviceFacts{sms, cc_major, cc_minor}));
  });
  // Checks a call's plan as the CUDA handler does ("" or why it would
  // refuse the call).
  m.def("check_planned", [](const nb::dict& attrs) {
    return jax_dynoff::CheckPlanned(DecodeOrThrow(attrs));
  });
  // The choice function (launch_choice.h) for a call's attributes (plan
  // included) under the run's facts: the kernel the CUDA handler would
  // launch.
  m.def("launch_choice", [](const nb::dict& attrs, bool sm90_device,
                            bool sm90_built, bool bases_aligned,
                            bool ab_ws_aligned) {
    using namespace jax_dynoff;
    const GemmProblem p = DecodeOrThrow(attrs);
    if (const std::string why = CheckPlanned(p); !why.empty())
      throw std::invalid_argument(why);
    RunFacts f;
    f.sm90_device = sm90_device;
    f.sm90_built = sm90_built;
    f.bases_aligned = bases_aligned;
    f.ab_ws_aligned = ab_ws_aligned || bases_aligned;
    return ChoiceDict(ChooseLaunch(p, f));
  });
  m.def("planner_tables", &PlannerTables);
  m.def("call_codes", &CallCodes);
  m.def("skinny_split", [](int64_t n, int64_t k, int sms) {
    return jax_dynoff::kernels::SkinnySplit(n, k, sms);
  });
  m.def("cluster_k_tile_n", [](int64_t m_, int64_t n, int64_t k, int sms) {
    return jax_dynoff::kernels::ClusterKTileN(m_, n, k, sms);
  });
  m.def("direct_split_k_workspace", [](int64_t m_, int64_t n) {
    return jax_dynoff::kernels::DirectSplitKWorkspace(m_, n);
  });
  m.attr("SM90_KERNEL_WORKSPACE") =
      static_cast<int64_t>(jax_dynoff::kernels::kSm90KernelWorkspace);
  m.attr("WORKSPACE_ALIGN") = jax_dynoff::kWorkspaceAlign;
  m.def("use_cpu_blas", [](const std::string& path) {
    return jax_dynoff::SetCpuBlas(path);
  });
  m.def("cpu_blas", []() { return std::string(jax_dynoff::CpuBlas()); });
  m.def("cuda_built", []() {
#ifdef JAX_DYNOFF_WITH_CUDA
    return true;
#else
    return false;
#endif
  });
  m.def("cuda_sm90_built", []() -> nb::object {
#ifdef JAX_DYNOFF_WITH_CUDA
    return nb::bool_(jax_dynoff::CudaSm90Built());
#else
    return nb::none();
#endif
  });
  m.def("cuda_build_info", []() -> nb::object {
#ifdef JAX_DYNOFF_WITH_CUDA
    return nb::str(jax_dynoff::CudaBuildInfo());
#else
    return nb::none();
#endif
  });
}
