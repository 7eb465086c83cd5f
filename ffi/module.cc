// nanobind module: hands the FFI handlers to Python as capsules.
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "desc_decode.h"
#include "gemm_problem.h"
#include "handlers.h"
#include "plan.h"
#include "planner.h"

namespace nb = nanobind;

namespace {

nb::capsule Capsule(XLA_FFI_Handler* handler) {
  return nb::capsule(reinterpret_cast<void*>(handler));
}

jax_dynoff::GemmProblem DecodeOrThrow(const std::vector<int64_t>& desc,
                                      double alpha, double beta) {
  jax_dynoff::GemmProblem p;
  const std::string msg = jax_dynoff::DecodeDesc(
      desc.data(), static_cast<int64_t>(desc.size()), alpha, beta, &p);
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
  d["kernel"] = KernelCode(k);
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
  d["grouped_tile"] = k.path == Path::kSm90Grouped
                          ? nb::object(nb::str(GroupedTileName(k.grouped_tile)))
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
  d["cluster_k_tile_n"] = k.cluster_k_tile_n;
  return d;
}

// The desc's layout and every code in it (gemm_problem.h), for
// jax_dynoff/spec.py, which encodes the desc: the numbers live here only.
nb::dict DescCodes() {
  namespace d = jax_dynoff::desc;
  using jax_dynoff::DType;
  nb::dict c;
  c["version"] = jax_dynoff::kDescVersion;
  c["max_rank"] = jax_dynoff::kMaxRank;
  c["max_batch_rank"] = jax_dynoff::kMaxBatchRank;
  c["max_slots"] = jax_dynoff::kMaxSlots;
  nb::dict header;  // field -> index of the header
  header["version"] = d::kVersion;
  header["m"] = d::kM;
  header["n"] = d::kN;
  header["k"] = d::kK;
  header["in_dtype"] = d::kInDType;
  header["out_dtype"] = d::kOutDType;
  header["trans_a"] = d::kTransA;
  header["trans_b"] = d::kTransB;
  header["c_mode"] = d::kCMode;
  header["precision"] = d::kPrecision;
  header["path"] = d::kPath;
  header["split_k"] = d::kSplitK;
  header["batch_rank"] = d::kBatchRank;
  header["batch_shape"] = d::kBatchShape;
  header["offsets_arg"] = d::kOffsetsArg;
  header["options"] = d::kOptions;
  header["direct_tile"] = d::kDirectTile;
  header["kernel"] = d::kKernel;
  c["header"] = header;
  c["header_size"] = d::kHeaderSize;
  nb::dict block;  // field -> index within an operand's block
  block["present"] = d::kPresent;
  block["arg"] = d::kArg;
  block["rank"] = d::kRank;
  block["batched_mask"] = d::kBatchedMask;
  block["dims"] = d::kDims;
  block["win"] = d::kWin;
  block["start"] = d::kStart;
  block["start_arg"] = d::kStartArg;
  block["ragged"] = d::kRagged;
  block["valid"] = d::kValid;
  block["valid_arg"] = d::kValidArg;
  c["block"] = block;
  c["block_size"] = d::kBlockSize;
  c["slots_at"] = d::kSlots;
  c["slot_entry"] = d::kSlotEntry;
  c["size"] = d::kSize;
  nb::dict dtypes;  // numpy dtype name -> DType
  dtypes["float32"] = static_cast<int64_t>(DType::kF32);
  dtypes["float16"] = static_cast<int64_t>(DType::kF16);
  dtypes["bfloat16"] = static_cast<int64_t>(DType::kBF16);
  c["dtypes"] = dtypes;
  nb::dict c_modes;
  c_modes["none"] = static_cast<int64_t>(jax_dynoff::CMode::kNone);
  c_modes["own"] = static_cast<int64_t>(jax_dynoff::CMode::kOwn);
  c_modes["from_d"] = static_cast<int64_t>(jax_dynoff::CMode::kFromD);
  c["c_modes"] = c_modes;
  nb::dict precisions;
  precisions["default"] =
      static_cast<int64_t>(jax_dynoff::Precision::kDefault);
  precisions["highest"] =
      static_cast<int64_t>(jax_dynoff::Precision::kHighest);
  c["precisions"] = precisions;
  nb::dict slot_kinds;
  slot_kinds["vector"] = static_cast<int64_t>(jax_dynoff::SlotKind::kVector);
  slot_kinds["scalar"] = static_cast<int64_t>(jax_dynoff::SlotKind::kScalar);
  slot_kinds["lookup"] = static_cast<int64_t>(jax_dynoff::SlotKind::kLookup);
  c["slot_kinds"] = slot_kinds;
  nb::dict options;  // the handler's switch bits (namespace opt)
  options["no_sm90"] = jax_dynoff::opt::kNoSm90;
  options["no_tf32"] = jax_dynoff::opt::kNoTf32;
  options["no_direct"] = jax_dynoff::opt::kNoDirect;
  options["no_skinny"] = jax_dynoff::opt::kNoSkinny;
  options["nondeterministic"] = jax_dynoff::opt::kNondeterministic;
  c["options"] = options;
  c["num_direct_tiles"] = jax_dynoff::opt::kNumDirectTiles;
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
              if (HasSm90Tile(dts[i], static_cast<Sm90Tile>(t)))
                tiles.append(Sm90TileName(static_cast<Sm90Tile>(t)));
            sm90_kernels.append(nb::make_tuple(
                nb::make_tuple(names[i], names[o], bool(ta), bool(tb)),
                nb::tuple(tiles)));
          }
  nb::dict d;
  d["paths"] = paths;
  d["sm90_tiles"] = sm90_tiles;
  d["direct_tiles"] = direct_tiles;
  d["direct_tile_paths"] = direct_paths;
  d["grouped_tiles"] = grouped_tiles;
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
  // The CUDA handler's workspace layout for a desc (jax_dynoff/plan.py
  // sizes the workspace result with it): the formula lives in plan.h.
  m.def("workspace_layout", [](const std::vector<int64_t>& desc, double alpha,
                               double beta) {
    return LayoutDict(jax_dynoff::Layout(DecodeOrThrow(desc, alpha, beta)));
  });
  // The planner (planner.h): the whole plan of the call a desc describes
  // (its path, split_k and kernel fields are ignored: they are the answer)
  // on a device of `sms` SMs and compute capability cc_major.cc_minor,
  // with the KernelOptions the desc does not carry: a forced SM90 `tile`
  // and a forced `grouped_tile` ("" for none), `split_k`, and forced
  // `split_k_slices` (0 for none).
  m.def("plan", [](const std::vector<int64_t>& desc, double alpha, double beta,
                   int sms, int cc_major, int cc_minor,
                   const std::string& tile, const std::string& grouped_tile,
                   bool split_k, int64_t split_k_slices) {
    using namespace jax_dynoff;
    const GemmProblem p = DecodeOrThrow(desc, alpha, beta);
    PlanOptions o;
    for (int t = 0; t < kNumSm90Tiles; ++t)
      if (tile == Sm90TileName(static_cast<Sm90Tile>(t))) o.tile = t;
    if (!tile.empty() && o.tile < 0)
      throw std::invalid_argument("unknown SM90 tile " + tile);
    for (int t = 0; t < kNumGroupedTiles; ++t)
      if (grouped_tile == GroupedTileName(static_cast<GroupedTile>(t)))
        o.grouped_tile = t;
    if (!grouped_tile.empty() && o.grouped_tile < 0)
      throw std::invalid_argument("unknown grouped tile " + grouped_tile);
    if (sms < 1) throw std::invalid_argument("sms must be >= 1");
    o.split_k = split_k;
    o.split_k_slices = split_k_slices;
    return PlanDict(PlanGemm(p, o, DeviceFacts{sms, cc_major, cc_minor}));
  });
  // Checks a desc's planned kernel field as the CUDA handler does ("" or
  // why it would refuse the desc).
  m.def("check_planned", [](const std::vector<int64_t>& desc, double alpha,
                            double beta) {
    jax_dynoff::PlannedKernel k;
    return jax_dynoff::DecodeKernel(DecodeOrThrow(desc, alpha, beta), &k);
  });
  m.def("planner_tables", &PlannerTables);
  m.def("desc_codes", &DescCodes);
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
  m.def("cuda_build_info", []() -> nb::object {
#ifdef JAX_DYNOFF_WITH_CUDA
    return nb::str(jax_dynoff::CudaBuildInfo());
#else
    return nb::none();
#endif
  });
}
