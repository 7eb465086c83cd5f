// The desc attribute (its layout: gemm_problem.h) decoded into a
// GemmProblem and checked on its own, then against one call's buffers:
// what both handlers do first (ffi_problem.h), and what the module's
// plan asks for (module.cc).
#ifndef JAX_DYNOFF_DESC_DECODE_H_
#define JAX_DYNOFF_DESC_DECODE_H_

#include <cstdint>
#include <string>

#include "gemm_problem.h"

namespace jax_dynoff {

// Decodes `d` (length `len`) into `p`: everything static about the call,
// validated on its own (extents, ranks, dtypes, start slots, the product's
// shapes).  Needs no buffer, so the CUDA handler runs it once per op
// instance (its instantiate stage).  Returns "" or an error message.
inline std::string DecodeDesc(const int64_t* d, int64_t len, double alpha,
                              double beta, GemmProblem* p) {
  using namespace desc;
  auto err = [](const std::string& s) { return "jax_dynoff_gemm: " + s; };
  if (len != kSize)
    return err("desc has " + std::to_string(len) + " entries, expected " +
               std::to_string(kSize) + " (extension and Python out of sync)");
  if (d[kVersion] != kDescVersion)
    return err("desc version " + std::to_string(d[kVersion]) +
               ", expected " + std::to_string(kDescVersion));
  p->m = d[kM];
  p->n = d[kN];
  p->k = d[kK];
  if (p->m < 0 || p->n < 0 || p->k < 0) return err("negative m, n or k");
  if (d[kInDType] < 0 || d[kInDType] > 2 || d[kOutDType] < 0 ||
      d[kOutDType] > 2)
    return err("bad dtype code");
  p->in_dtype = static_cast<DType>(d[kInDType]);
  p->out_dtype = static_cast<DType>(d[kOutDType]);
  p->trans_a = d[kTransA] != 0;
  p->trans_b = d[kTransB] != 0;
  if (d[kCMode] < 0 || d[kCMode] > 2) return err("bad c_mode");
  p->c_mode = static_cast<CMode>(d[kCMode]);
  p->precision = static_cast<Precision>(d[kPrecision]);
  if (d[kPath] < 0 || d[kPath] >= kNumPaths) return err("bad path");
  p->path = static_cast<Path>(d[kPath]);
  p->split_k = d[kSplitK];
  if (p->split_k < 1) return err("split_k must be >= 1");
  p->batch_rank = static_cast<int>(d[kBatchRank]);
  if (p->batch_rank < 0 || p->batch_rank > kMaxBatchRank)
    return err("bad batch rank");
  p->batch = 1;
  for (int j = 0; j < p->batch_rank; ++j) {
    p->batch_shape[j] = d[kBatchShape + j];
    if (p->batch_shape[j] < 0) return err("negative batch extent");
    p->batch *= p->batch_shape[j];
  }
  p->alpha = alpha;
  p->beta = beta;
  p->offsets_arg = d[kOffsetsArg];
  p->num_slots = 0;
  p->options = d[kOptions];
  p->direct_tile = d[kDirectTile];
  if (p->options < 0 || (p->options & ~opt::kAll) != 0)
    return err("bad option bits");
  if (p->direct_tile < 0 || p->direct_tile > opt::kNumDirectTiles)
    return err("bad forced direct tile");
  p->kernel = d[kKernel];
  if (p->kernel < 0) return err("bad planned kernel");

  for (int o = 0; o < kNumOperands; ++o) {
    const int64_t* b = d + kHeaderSize + o * kBlockSize;
    OperandDesc& op = p->op[o];
    op.present = b[kPresent] != 0;
    const char* name = "ABCD" + o;
    const std::string who = std::string("operand ") + name[0];
    if (!op.present) {
      if (o == kA || o == kB || o == kD) return err(who + " missing");
      if (p->c_mode != CMode::kNone) return err("c_mode needs operand C");
      continue;
    }
    op.arg = b[kArg];
    op.rank = static_cast<int>(b[kRank]);
    op.batched_mask = b[kBatchedMask];
    if (op.rank < 2 || op.rank > kMaxRank) return err(who + ": bad rank");
    const bool in_d = o == kD || (o == kC && p->c_mode == CMode::kFromD);
    if (in_d ? op.arg != -1 : op.arg < 0)
      return err(who + (in_d ? " must name ret 0" : ": bad arg"));
    if (op.batched_mask < 0 || op.batched_mask >= (int64_t{1} << p->batch_rank))
      return err(who + ": bad batch mask");
    for (int i = 0; i < op.rank; ++i) {
      op.dims[i] = b[kDims + i];
      op.win[i] = b[kWin + i];
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
    op.ragged = b[kRagged] != 0;
    for (int j = 0; j < 2; ++j) {
      const int64_t w = op.win[op.rank - 2 + j];
      op.valid_arg[j] = op.ragged && b[kValidArg + j] >= 0 ? b[kValidArg + j]
                                                           : -1;
      op.valid[j] = !op.ragged ? w
                    : op.valid_arg[j] >= 0
                        ? 0
                        : b[kValid + j] < 0 ? 0
                                            : b[kValid + j] > w ? w
                                                                : b[kValid + j];
      // (0 is the one static start a dynamic valid extent keeps as it is.)
      if (op.valid_arg[j] >= 0 && b[kStartArg + op.rank - 2 + j] < 0 &&
          b[kStart + op.rank - 2 + j] != 0)
        return err(who + ": a static start other than 0 beside a dynamic "
                   "valid extent");
    }
    // Starts: static ones are re-clamped here (cheap, and it makes a bad
    // desc harmless); dynamic ones name their slot of the offsets operand.
    op.static_offset = 0;
    for (int i = 0; i < op.rank; ++i) {
      op.start_arg[i] = b[kStartArg + i];
      if (op.start_arg[i] < 0) {
        op.start_arg[i] = -1;
        const int64_t size =
            i >= op.rank - 2 ? op.valid[i - (op.rank - 2)] : op.win[i];
        op.start[i] = ClampStart(b[kStart + i], op.dims[i], size);
        op.static_offset += op.start[i] * op.strides[i];
      } else {
        op.start[i] = 0;
        ++p->num_slots;
      }
    }
    for (int j = 0; j < 2; ++j) p->num_slots += op.valid_arg[j] >= 0;
  }
  // Every slot in [0, num_slots) is named by exactly one dynamic start and
  // has a source; the vector slots name distinct elements of the vector.
  p->num_vector_slots = 0;
  uint64_t vector_seen = 0;
  static_assert(kMaxSlots <= 64, "vector_seen is a 64-bit mask");
  for (int64_t j = 0; j < kMaxSlots; ++j) {
    const int64_t* e = d + kSlots + j * kSlotEntry;
    if (j >= p->num_slots) {
      if (e[0] != 0 || e[1] != -1 || e[2] != -1 || e[3] != 1 || e[4] != 0 ||
          e[5] != 64)
        return err("source of unused slot " + std::to_string(j));
      continue;
    }
    SlotSource& src = p->slot[j];
    if (e[0] < 0 || e[0] > 2) return err("bad slot kind");
    src.kind = static_cast<SlotKind>(e[0]);
    src.arg = e[1];
    src.table = e[2];
    src.mul = e[3];
    src.add = e[4];
    src.bits = e[5];
    if (src.bits != 32 && src.bits != 64)
      return err("bad arithmetic width of slot " + std::to_string(j));
    if (src.mul != static_cast<int32_t>(src.mul) ||
        src.add != static_cast<int32_t>(src.add))
      return err("slot " + std::to_string(j) +
                 ": mul or add outside the int32 range");
    if (src.kind == SlotKind::kVector) {
      if (src.mul != 1 || src.add != 0)
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
  if (D.rows() != p->m || D.cols() != p->n)
    return err("D window does not match m, n");
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
// sets p->offsets_batched.  After DecodeDesc and CheckBuffers no start
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
      return err(who + ": buffer dtype does not match desc");
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
      if ((!t.is_s32 && !t.is_s64) || t.rank != 1 || t.elements() < 1)
        return err(who + ": want a non-empty int32 or int64 vector table");
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

// DecodeDesc, then CheckBuffers.
template <typename ArgInfoFn>
std::string Decode(const int64_t* d, int64_t len, double alpha, double beta,
                   int64_t num_args, ArgInfoFn arg_info,
                   const BufferInfo& d_info, GemmProblem* p) {
  std::string msg = DecodeDesc(d, len, alpha, beta, p);
  if (msg.empty()) msg = CheckBuffers(p, num_args, arg_info, d_info);
  return msg;
}

}  // namespace jax_dynoff

#endif  // JAX_DYNOFF_DESC_DECODE_H_
