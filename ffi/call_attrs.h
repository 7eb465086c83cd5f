// The call's named attributes (the contract: gemm_problem.h's header,
// written by jax_dynoff/spec.py call_attrs) decoded into a GemmProblem and
// checked on their own, then against one call's buffers: what both
// handlers do first (ffi_problem.h), and what the module's planner
// functions read (module.cc).  One decoder for both sources: it reads
// through AttrReader, which the FFI's attribute dictionary and a Python
// dict implement.
#ifndef JAX_DYNOFF_CALL_ATTRS_H_
#define JAX_DYNOFF_CALL_ATTRS_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "gemm_problem.h"
#include "planner.h"

namespace jax_dynoff {

// Named, typed attributes: each getter returns "" or why the attribute is
// missing or of another type.
class AttrReader {
 public:
  virtual ~AttrReader() = default;
  virtual bool Has(std::string_view name) const = 0;
  virtual std::string Int(std::string_view name, int64_t* v) const = 0;
  virtual std::string Bool(std::string_view name, bool* v) const = 0;
  virtual std::string Float(std::string_view name, double* v) const = 0;
  virtual std::string Str(std::string_view name, std::string* v) const = 0;
  virtual std::string Ints(std::string_view name,
                           std::vector<int64_t>* v) const = 0;
  virtual std::string Dict(std::string_view name,
                           std::unique_ptr<AttrReader>* v) const = 0;
};

namespace call_attrs {

// Reads attributes of one dictionary (`where`: its path, for messages),
// keeping the first error; a failed read returns a zero value.
class Fields {
 public:
  Fields(const AttrReader& r, std::string where, std::string* error)
      : r_(r), where_(std::move(where)), error_(error) {}
  bool Has(std::string_view name) const { return r_.Has(name); }
  int64_t Int(std::string_view name) {
    int64_t v = 0;
    Note(name, r_.Int(name, &v));
    return v;
  }
  bool Bool(std::string_view name) {
    bool v = false;
    Note(name, r_.Bool(name, &v));
    return v;
  }
  double Float(std::string_view name) {
    double v = 0;
    Note(name, r_.Float(name, &v));
    return v;
  }
  std::string Str(std::string_view name) {
    std::string v;
    Note(name, r_.Str(name, &v));
    return v;
  }
  // An integer array; an absent optional one is empty.
  std::vector<int64_t> Ints(std::string_view name, bool optional = false) {
    std::vector<int64_t> v;
    if (!(optional && !r_.Has(name))) Note(name, r_.Ints(name, &v));
    return v;
  }
  // A name of enum E (its `name` function, N values).
  template <typename E, int N>
  E Enum(std::string_view name, const char* (*names)(E)) {
    const std::string s = Str(name);
    E e = static_cast<E>(0);
    if (error_->empty() && !FromName<E, N>(names, s, &e))
      Fail(name, "unknown value '" + s + "'");
    return e;
  }
  std::unique_ptr<AttrReader> Dict(std::string_view name) {
    std::unique_ptr<AttrReader> d;
    Note(name, r_.Dict(name, &d));
    return d;
  }
  std::string Where(std::string_view name) const {
    return where_ + std::string(name);
  }
  void Fail(std::string_view name, const std::string& why) {
    if (error_->empty())
      *error_ = "jax_dynoff_gemm: attribute " + Where(name) + ": " + why;
  }
  bool ok() const { return error_->empty(); }

 private:
  void Note(std::string_view name, const std::string& why) {
    if (!why.empty()) Fail(name, why);
  }
  const AttrReader& r_;
  std::string where_;
  std::string* error_;
};

// "" names no tile; else the tile of that name, or an error.
template <typename E, int N>
int TileOption(Fields& f, std::string_view name, const char* (*names)(E)) {
  const std::string s = f.Str(name);
  E e = static_cast<E>(0);
  if (s.empty()) return -1;
  if (!FromName<E, N>(names, s, &e)) f.Fail(name, "unknown tile '" + s + "'");
  return static_cast<int>(e);
}

inline const char* DirectTileOrNone(DirectTile t) {
  return t == DirectTile::kNone ? "" : DirectTileName(t);
}

}  // namespace call_attrs

// Decodes the call's attributes into `p`: everything static about the
// call, validated on its own (extents, ranks, dtypes, start slots, the
// product's shapes).  Needs no buffer, so the CUDA handler runs it once
// per op instance (its instantiate stage).  `plan` absent (the planner
// being asked) leaves the planned fields at generic.  Returns "" or an
// error message.
inline std::string DecodeCallAttrs(const AttrReader& attrs, GemmProblem* p) {
  using call_attrs::Fields;
  std::string error;
  Fields f(attrs, "", &error);
  auto err = [](const std::string& s) { return "jax_dynoff_gemm: " + s; };
  p->m = f.Int("m");
  p->n = f.Int("n");
  p->k = f.Int("k");
  p->in_dtype = f.Enum<DType, 3>("in_dtype", DTypeName);
  p->out_dtype = f.Enum<DType, 3>("out_dtype", DTypeName);
  p->trans_a = f.Bool("trans_a");
  p->trans_b = f.Bool("trans_b");
  p->c_mode = f.Enum<CMode, 3>("c_mode", CModeName);
  p->precision = f.Enum<Precision, 2>("precision", PrecisionName);
  p->epilogue = f.Enum<Epilogue, kNumEpilogues>("epilogue", EpilogueName);
  p->alpha = f.Float("alpha");
  p->beta = f.Float("beta");
  p->offsets_arg = f.Int("offsets_arg");
  p->out_zeros = f.Has("out_zeros") && f.Bool("out_zeros");
  const std::vector<int64_t> batch_shape = f.Ints("batch_shape", true);
  if (!f.ok()) return error;
  if (p->m < 0 || p->n < 0 || p->k < 0) return err("negative m, n or k");
  if (batch_shape.size() > static_cast<size_t>(kMaxBatchRank))
    return err("at most " + std::to_string(kMaxBatchRank) + " batch dims");
  p->batch_rank = static_cast<int>(batch_shape.size());
  p->batch = 1;
  for (int j = 0; j < p->batch_rank; ++j) {
    p->batch_shape[j] = batch_shape[j];
    if (p->batch_shape[j] < 0) return err("negative batch extent");
    p->batch *= p->batch_shape[j];
  }

  // The caller's options.
  {
    std::unique_ptr<AttrReader> d = f.Dict("options");
    if (!f.ok()) return error;
    Fields o(*d, "options.", &error);
    CallOptions& c = p->opts;
    c.sm90 = o.Bool("sm90");
    c.tf32 = o.Bool("tf32");
    c.direct = o.Bool("direct");
    c.skinny = o.Bool("skinny");
    c.deterministic = o.Bool("deterministic");
    c.split_k = o.Bool("split_k");
    c.split_k_slices = o.Int("split_k_slices");
    c.tile = call_attrs::TileOption<Sm90Tile, kNumSm90Tiles>(o, "tile",
                                                             Sm90TileName);
    c.grouped_tile = call_attrs::TileOption<GroupedTile, kNumGroupedTiles>(
        o, "grouped_tile", GroupedTileName);
    c.skinny_tile = call_attrs::TileOption<SkinnyTile, kNumSkinnyTiles>(
        o, "skinny_tile", SkinnyTileName);
    const int direct = call_attrs::TileOption<DirectTile, kNumDirectTiles + 1>(
        o, "direct_tile", call_attrs::DirectTileOrNone);
    c.direct_tile = direct < 0 ? DirectTile::kNone
                               : static_cast<DirectTile>(direct);
    if (!o.ok()) return error;
    if (c.split_k_slices < 0) return err("options.split_k_slices < 0");
  }

  // The planner's answer, where there is one.
  p->path = Path::kGeneric;
  p->split_k = 1;
  p->planned = PlannedKernel{};
  if (f.Has("plan")) {
    std::unique_ptr<AttrReader> d = f.Dict("plan");
    if (!f.ok()) return error;
    Fields o(*d, "plan.", &error);
    p->path = o.Enum<Path, kNumPaths>("path", PathName);
    p->split_k = o.Int("split_k");
    PlannedKernel& k = p->planned;
    const int direct = call_attrs::TileOption<DirectTile, kNumDirectTiles + 1>(
        o, "direct_tile", call_attrs::DirectTileOrNone);
    k.direct = direct < 0 ? DirectTile::kNone : static_cast<DirectTile>(direct);
    k.skinny_split = static_cast<int>(o.Int("skinny_split"));
    k.skinny_tile =
        o.Enum<SkinnyTile, kNumSkinnyTiles>("skinny_tile", SkinnyTileName);
    k.cluster_k_tile_n = static_cast<int>(o.Int("cluster_k_tile_n"));
    k.grouped_tile =
        o.Enum<GroupedTile, kNumGroupedTiles>("grouped_tile", GroupedTileName);
    k.fresh_out = o.Bool("fresh_out");
    if (!o.ok()) return error;
    if (p->split_k < 1) return err("plan.split_k must be >= 1");
  }

  // The operands.
  p->num_slots = 0;
  for (int o = 0; o < kNumOperands; ++o) {
    OperandDesc& op = p->op[o];
    const char name[2] = {"abcd"[o], '\0'};
    const std::string who = std::string("operand ") + "ABCD"[o];
    op.present = f.Has(name);
    if (!op.present) {
      if (o == kA || o == kB || o == kD) return err(who + " missing");
      if (p->c_mode != CMode::kNone) return err("c_mode needs operand C");
      continue;
    }
    std::unique_ptr<AttrReader> d = f.Dict(name);
    if (!f.ok()) return error;
    Fields w(*d, std::string(name) + ".", &error);
    op.arg = w.Int("arg");
    op.batched_mask = w.Int("batched_mask");
    const std::vector<int64_t> dims = w.Ints("dims"), win = w.Ints("win"),
                               starts = w.Ints("starts"),
                               start_slots = w.Ints("start_slots");
    op.ragged = w.Has("valid");
    const std::vector<int64_t> valid = w.Ints("valid", true),
                               valid_slots = w.Ints("valid_slots", true);
    if (!w.ok()) return error;
    op.rank = static_cast<int>(dims.size());
    if (op.rank < 2 || op.rank > kMaxRank) return err(who + ": bad rank");
    if (win.size() != dims.size() || starts.size() != dims.size() ||
        start_slots.size() != dims.size())
      return err(who + ": dims, win, starts and start_slots differ in length");
    if (op.ragged ? valid.size() != 2 || valid_slots.size() != 2
                  : w.Has("valid_slots"))
      return err(who + ": valid and valid_slots come as a pair of 2");
    const bool in_d = o == kD || (o == kC && p->c_mode == CMode::kFromD);
    if (in_d ? op.arg != -1 : op.arg < 0)
      return err(who + (in_d ? " must name ret 0" : ": bad arg"));
    if (op.batched_mask < 0 || op.batched_mask >= (int64_t{1} << p->batch_rank))
      return err(who + ": bad batch mask");
    for (int i = 0; i < op.rank; ++i) {
      op.dims[i] = dims[i];
      op.win[i] = win[i];
      if (op.dims[i] < 0 || op.win[i] < 0 || op.win[i] > op.dims[i])
        return err(who + ": window larger than its array");
      if (i < op.rank - 2 && op.win[i] != 1)
        return err(who + ": leading window extents must be 1");
    }
    // Strides.
    int64_t s = 1;
    for (int i = op.rank - 1; i >= 0; --i) {
      op.strides[i] = s;
      s *= op.dims[i];
    }
    for (int j = p->batch_rank - 1; j >= 0; --j) {
      if (op.batched_mask & (int64_t{1} << j)) {
        op.batch_strides[j] = s;
        s *= p->batch_shape[j];
      } else {
        op.batch_strides[j] = 0;
      }
    }
    op.elements = s;
    // Valid extents: a ragged window's static ones re-clamped to the
    // window, dynamic ones named by their slot; a trailing start clamps
    // with its dim's valid extent, so it can be static only where that is.
    for (int j = 0; j < 2; ++j) {
      const int64_t ext = op.win[op.rank - 2 + j];
      op.valid_arg[j] = op.ragged && valid_slots[j] >= 0 ? valid_slots[j] : -1;
      op.valid[j] = !op.ragged ? ext
                    : op.valid_arg[j] >= 0 ? 0
                    : valid[j] < 0 ? 0
                    : valid[j] > ext ? ext
                                     : valid[j];
      // (0 is the one static start a dynamic valid extent keeps as it is.)
      if (op.valid_arg[j] >= 0 && start_slots[op.rank - 2 + j] < 0 &&
          starts[op.rank - 2 + j] != 0)
        return err(who + ": a static start other than 0 beside a dynamic "
                   "valid extent");
    }
    // Starts: static ones are re-clamped here (cheap, and it makes a bad
    // attribute harmless); dynamic ones name their slot.
    op.static_offset = 0;
    for (int i = 0; i < op.rank; ++i) {
      op.start_arg[i] = start_slots[i];
      if (op.start_arg[i] < 0) {
        op.start_arg[i] = -1;
        const int64_t size =
            i >= op.rank - 2 ? op.valid[i - (op.rank - 2)] : op.win[i];
        op.start[i] = ClampStart(starts[i], op.dims[i], size);
        op.static_offset += op.start[i] * op.strides[i];
      } else {
        op.start[i] = 0;
        ++p->num_slots;
      }
    }
    for (int j = 0; j < 2; ++j) p->num_slots += op.valid_arg[j] >= 0;
  }

  // The slots' sources: every slot in [0, num_slots) is named by exactly
  // one dynamic start and has a source; the vector slots name distinct
  // elements of the vector.
  std::vector<int64_t> kind, arg, table, mul, add, bits, div_op, divisor;
  if (f.Has("slots")) {
    std::unique_ptr<AttrReader> d = f.Dict("slots");
    if (!f.ok()) return error;
    Fields sl(*d, "slots.", &error);
    kind = sl.Ints("kind");
    arg = sl.Ints("arg");
    table = sl.Ints("table");
    mul = sl.Ints("mul");
    add = sl.Ints("add");
    bits = sl.Ints("bits");
    div_op = sl.Ints("div_op");
    divisor = sl.Ints("divisor");
    if (!sl.ok()) return error;
  }
  const size_t num_slots = static_cast<size_t>(p->num_slots);
  if (kind.size() != num_slots || arg.size() != num_slots ||
      table.size() != num_slots || mul.size() != num_slots ||
      add.size() != num_slots || bits.size() != num_slots ||
      div_op.size() != num_slots || divisor.size() != num_slots)
    return err("slots: " + std::to_string(num_slots) +
               " dynamic starts need as many sources in each field");
  p->num_vector_slots = 0;
  uint64_t vector_seen = 0;
  static_assert(kMaxSlots <= 64, "vector_seen is a 64-bit mask");
  for (int64_t j = 0; j < p->num_slots; ++j) {
    SlotSource& src = p->slot[j];
    if (kind[j] < 0 || kind[j] > 2) return err("bad slot kind");
    src.kind = static_cast<SlotKind>(kind[j]);
    src.arg = arg[j];
    src.table = table[j];
    src.mul = mul[j];
    src.add = add[j];
    src.bits = bits[j];
    if (src.bits != 32 && src.bits != 64)
      return err("bad arithmetic width of slot " + std::to_string(j));
    if (src.mul != static_cast<int32_t>(src.mul) ||
        src.add != static_cast<int32_t>(src.add))
      return err("slot " + std::to_string(j) +
                 ": mul or add outside the int32 range");
    if (div_op[j] < 0 || div_op[j] >= kNumSlotDivOps || divisor[j] < 1 ||
        divisor[j] != static_cast<int32_t>(divisor[j]))
      return err("slot " + std::to_string(j) +
                 ": bad division (a divisor in [1, 2^31))");
    src.div_op = static_cast<SlotDivOp>(div_op[j]);
    src.divisor = divisor[j];
    if (src.kind == SlotKind::kVector) {
      if (src.mul != 1 || src.add != 0 || src.div_op != SlotDivOp::kNone)
        return err("vector slot " + std::to_string(j) + " with a map");
      if (src.arg < 0 || src.arg >= kMaxSlots || src.table != -1 ||
          (vector_seen >> src.arg) & 1u)
        return err("bad vector slot " + std::to_string(j));
      vector_seen |= uint64_t{1} << src.arg;
      ++p->num_vector_slots;
    } else if (src.arg < 0 ||
               (src.kind == SlotKind::kLookup) != (src.table >= 0)) {
      return err("bad source of slot " + std::to_string(j));
    }
  }
  if (vector_seen != (p->num_vector_slots == 64
                          ? ~uint64_t{0}
                          : (uint64_t{1} << p->num_vector_slots) - 1u))
    return err("the vector slots must name elements 0.." +
               std::to_string(p->num_vector_slots - 1));
  if (p->num_vector_slots > 0 && p->offsets_arg < 0)
    return err("vector slots without an offsets operand");
  uint64_t seen[(kMaxSlots + 63) / 64] = {};
  for (const OperandDesc& op : p->op)
    for (int i = 0; op.present && i < op.rank + 2; ++i) {
      const int64_t slot =
          i < op.rank ? op.start_arg[i] : op.valid_arg[i - op.rank];
      if (slot < 0) continue;
      if (slot >= p->num_slots || (seen[slot / 64] >> (slot % 64)) & 1)
        return err("bad offsets slot " + std::to_string(slot));
      seen[slot / 64] |= uint64_t{1} << (slot % 64);
    }
  // Shapes of the matrix product.
  const OperandDesc &A = p->op[kA], &B = p->op[kB], &D = p->op[kD];
  const int64_t am = p->trans_a ? A.cols() : A.rows();
  const int64_t ak = p->trans_a ? A.rows() : A.cols();
  const int64_t bk = p->trans_b ? B.cols() : B.rows();
  const int64_t bn = p->trans_b ? B.rows() : B.cols();
  if (am != p->m || ak != p->k || bk != p->k || bn != p->n)
    return err("A or B window does not match m, n, k");
  if (p->epilogue == Epilogue::kSwiglu) {
    // Pairs of h's columns, on the paths that take ragged windows (the
    // CPU handler, the fused grouped kernel, the composed XLA ops), with
    // no C to add: nothing else implements it.
    if (p->n % 2 != 0) return err("epilogue swiglu needs an even n");
    if (p->c_mode != CMode::kNone)
      return err("epilogue swiglu takes no C");
    if (!D.ragged) return err("epilogue swiglu needs a ragged D window");
  }
  if (D.rows() != p->m || D.cols() != p->out_cols())
    return err(p->epilogue == Epilogue::kSwiglu
                   ? "D window does not match m, n / 2 (epilogue swiglu)"
                   : "D window does not match m, n");
  if (p->op[kC].present &&
      (p->op[kC].rows() != p->m || p->op[kC].cols() != p->n))
    return err("C window does not match m, n");
  // D carries every batch dim, except a ragged D (a shared out): batch
  // items that do not own a copy of it write their valid parts into one
  // array, in item order (jax_dynoff.ragged_dot: disjoint rows).  C then
  // cannot be read from it.
  if (D.batched_mask != (int64_t{1} << p->batch_rank) - 1) {
    if (!D.ragged) return err("D must carry every batch dim");
    if (p->c_mode == CMode::kFromD)
      return err("C cannot be read from a shared (not batched) D");
  }
  return "";
}

// Checks a decoded problem against the buffers XLA hands the handler: the
// arrays' shapes and dtypes, the offsets operand's type and element count;
// sets p->offsets_batched.  After DecodeCallAttrs and CheckBuffers no start
// value, whatever it is, can address memory outside a buffer.  Returns ""
// or an error message.  `arg_info(i)` / `num_args` describe the FFI args;
// `d_info` describes ret 0.
template <typename ArgInfoFn>
std::string CheckBuffers(GemmProblem* p, int64_t num_args, ArgInfoFn arg_info,
                         const BufferInfo& d_info) {
  auto err = [](const std::string& s) { return "jax_dynoff_gemm: " + s; };
  for (int o = 0; o < kNumOperands; ++o) {
    const OperandDesc& op = p->op[o];
    if (!op.present) continue;
    const std::string who = std::string("operand ") + "ABCD"[o];
    if (op.arg >= num_args) return err(who + ": bad arg");
    const BufferInfo info = op.arg < 0 ? d_info : arg_info(op.arg);
    const DType want = (o == kA || o == kB) ? p->in_dtype : p->out_dtype;
    if (info.dtype_code != static_cast<int64_t>(want))
      return err(who + ": buffer dtype does not match the call's");
    // Expected buffer shape: the batch dims it carries, then dims.
    int expect_rank = 0;
    int64_t expect[kMaxBatchRank + kMaxRank];
    for (int j = 0; j < p->batch_rank; ++j)
      if (op.batched_mask & (int64_t{1} << j))
        expect[expect_rank++] = p->batch_shape[j];
    for (int i = 0; i < op.rank; ++i) expect[expect_rank++] = op.dims[i];
    if (info.rank != expect_rank) return err(who + ": buffer rank mismatch");
    for (int i = 0; i < expect_rank; ++i)
      if (info.dims[i] != expect[i]) return err(who + ": buffer shape mismatch");
  }
  p->offsets_batched = false;
  for (int64_t j = 0; j < p->num_slots; ++j) {
    const SlotSource& src = p->slot[j];
    if (src.kind == SlotKind::kVector) continue;
    const std::string who = "start slot " + std::to_string(j);
    if (src.arg >= num_args || src.table >= num_args)
      return err(who + ": bad arg");
    const BufferInfo v = arg_info(src.arg);
    if ((!v.is_s32 && !v.is_s64) || v.elements() != 1)
      return err(who + ": want an int32 or int64 scalar");
    if (src.kind == SlotKind::kLookup) {
      const BufferInfo t = arg_info(src.table);
      if ((!t.is_s32 && !t.is_s64) || t.rank != 1 || t.elements() < 1 ||
          t.elements() > INT32_MAX)  // SlotRef::table_len is 32 bits
        return err(who + ": want a non-empty int32 or int64 vector table "
                   "of fewer than 2^31 entries");
    }
  }
  if (p->num_vector_slots == 0) return "";
  if (p->offsets_arg >= num_args) return err("bad offsets arg");
  const BufferInfo si = arg_info(p->offsets_arg);
  if (!si.is_s32 && !si.is_s64)
    return err("the offsets operand must be int32 or int64");
  const int64_t e = si.elements(), v = p->num_vector_slots;
  if (e != v && e != v * p->batch)
    return err("the offsets operand has " + std::to_string(e) +
               " elements, expected " + std::to_string(v) + " or " +
               std::to_string(v) + " x the batch size");
  p->offsets_batched = e != v;
  return "";
}

}  // namespace jax_dynoff

#endif  // JAX_DYNOFF_CALL_ATTRS_H_
