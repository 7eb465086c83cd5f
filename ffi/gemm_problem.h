// The GEMM problem as both FFI handlers see it.
//
// Python (jax_dynoff/lowering.py) encodes everything static about one call
// into a flat int64 attribute `desc`; this header decodes and validates it
// against the buffers XLA hands the handler, and defines the one clamping
// rule every backend uses.  Plain C++17: no CUTLASS, no CUDA runtime, so the
// CPU handler, the CUDA handler and device code all share it
// (JAX_DYNOFF_HD marks the functions device code calls).
//
// Semantics (see jax_dynoff/reference.py, the oracle):
//   for every batch index t:
//     acc = alpha * op(A_t) @ op(B_t) + beta * C_t      (float32 accumulation)
//     D_t[window] = cast(acc)
// where every operand is a window of an array of rank r (>= 2), placed at
// starts that follow lax.dynamic_slice exactly: s < 0 becomes s + dim, then
// s is clamped to [0, dim - size].  Leading dims have window extent 1.
//
// FFI layout of one call (target "jax_dynoff_gemm"):
//   args:  the arrays named by the operand blocks (A, B, C when c_mode is
//          kOwn, the caller's `out` when there is one: only there for the
//          input/output alias, never read), then the integer operands the
//          dynamic starts come from.  Each dynamic start is a slot, and
//          desc's slot section says where its value comes from
//          (SlotSource): an element of the offsets vector (one S32 or S64
//          vector made by one XLA fusion: V vector slots; unbatched: V
//          elements, vector slot v at v; batched: V x batch, item t of
//          vector slot v at v * batch + t); an integer scalar operand taken
//          as it is (a loop counter, a function argument: no XLA op at
//          all); or an element of an integer table operand at a scalar
//          operand's index (`table[i]`, looked up on the device with
//          lax.dynamic_slice's clamping); either of the last two may be
//          taken through an affine map `v * mul + add` in the integer
//          width the program computed it in (`table[i] * m`, `i * m + c`),
//          so that a loop body needs no XLA op to compute its starts.
//   rets:  ret 0 is D (aliased to `out` when the call has one, so it already
//          holds out's contents); on CUDA, ret 1 is a U8 workspace whose size
//          the Python side fixed at trace time.
//   attrs: desc (int64 array, below), alpha and beta (f64).
#ifndef JAX_DYNOFF_GEMM_PROBLEM_H_
#define JAX_DYNOFF_GEMM_PROBLEM_H_

#include <cstdint>
#include <string>

#if defined(__CUDACC__)
#define JAX_DYNOFF_HD __host__ __device__ __forceinline__
#else
#define JAX_DYNOFF_HD inline
#endif

namespace jax_dynoff {

inline constexpr int64_t kDescVersion = 5;
inline constexpr int kMaxRank = 8;       // rank of one operand's array
inline constexpr int kMaxBatchRank = 4;  // nested vmaps
inline constexpr int kNumOperands = 4;   // A, B, C, D
// Dynamic starts and valid extents (two per ragged window).
inline constexpr int kMaxSlots = kNumOperands * (kMaxRank + 2);

enum class DType : int64_t { kF32 = 0, kF16 = 1, kBF16 = 2 };
enum Operand : int { kA = 0, kB = 1, kC = 2, kD = 3 };
// Where C comes from: absent, its own array, or D's buffer (the caller passed
// windows of one array as `c` and `out`; the windows may differ or overlap).
enum class CMode : int64_t { kNone = 0, kOwn = 1, kFromD = 2 };
enum class Precision : int64_t { kDefault = 0, kHighest = 1 };

// Kernel paths, chosen at trace time by jax_dynoff/plan.py from static
// information only.  The CPU handler ignores the choice; the CUDA handler
// refuses a path whose static requirements (alignment, dtype) do not hold.
enum class Path : int64_t {
  kGeneric = 0,      // non-TMA kernel, any alignment, any GPU >= sm_80
  kSm90Large = 1,    // TMA warp-specialized ptr-array, 256x128 tiles
  kSm90SmallM = 2,   // TMA warp-specialized ptr-array, 64x128 tiles
  kSm90SplitK = 3,   // skinny m: split K through the batch, then reduce
  kSm90Medium = 4,   // TMA warp-specialized ptr-array, 128x128 tiles
  kSm90Tiny = 5,     // TMA warp-specialized ptr-array, 64x64 tiles
  kTf32 = 6,         // float32 at default precision: TF32 tensor cores
  kSm90Skinny = 7,   // m <= 16: mma.sync, K shared by a cluster (sm_90)
  kSm90Grouped = 8,  // ragged windows: one grouped launch, problem shapes
                     // (the valid extents) read on the device
};
inline constexpr int64_t kNumPaths = 9;

// Offsets into `desc`.
namespace desc {
inline constexpr int kVersion = 0, kM = 1, kN = 2, kK = 3, kInDType = 4,
                     kOutDType = 5, kTransA = 6, kTransB = 7, kCMode = 8,
                     kPrecision = 9, kPath = 10, kSplitK = 11, kBatchRank = 12,
                     kBatchShape = 13,  // kMaxBatchRank entries
                     kOffsetsArg = 17,  // FFI arg of the offsets, or -1
                     kOptions = 18,     // switch bits (namespace opt)
                     kDirectTile = 19,  // forced direct tile, 0: none
                     kKernel = 20;      // the planned kernel (planner.h)
inline constexpr int kHeaderSize = 21;
// One block per operand, in the order A, B, C, D.
inline constexpr int kPresent = 0, kArg = 1, kRank = 2, kBatchedMask = 3,
                     kDims = 4, kWin = kDims + kMaxRank,
                     kStart = kWin + kMaxRank, kStartArg = kStart + kMaxRank,
                     // A ragged window: the flag, its valid extents (rows,
                     // cols; static, already clamped) and their slots (-1:
                     // static).  A plain window: 0, its extents, -1, -1.
                     kRagged = kStartArg + kMaxRank, kValid = kRagged + 1,
                     kValidArg = kValid + 2;
inline constexpr int kBlockSize = kValidArg + 2;  // 41
// After the blocks, one entry per possible slot: kind, arg, table, mul,
// add, bits (SlotSource).
inline constexpr int kSlots = kHeaderSize + kNumOperands * kBlockSize;
inline constexpr int kSlotEntry = 6;
inline constexpr int kSize = kSlots + kMaxSlots * kSlotEntry;
}  // namespace desc

// Where one dynamic start (a slot) comes from.
enum class SlotKind : int64_t {
  kVector = 0,  // element `arg` of the offsets vector (desc kOffsetsArg)
  kScalar = 1,  // FFI arg `arg`: an S32 / S64 scalar, the start itself
  kLookup = 2,  // FFI arg `table` (an S32 / S64 vector of L >= 1 entries) at
                // index ClampStart(FFI arg `arg`, L, 1): lax.dynamic_slice's
                // clamping of table[i]
};
// A scalar or look-up slot's value v becomes v * mul + add, wrapped to a
// `bits`-bit two's complement integer (32 or 64), as the program's own
// integer ops compute it (they wrap); then it is clamped like every start.
// mul = 1, add = 0 leave the value as it is; both lie in the int32 range
// (SlotRef holds them in 32 bits; a map with larger coefficients goes
// through the offsets vector instead).
struct SlotSource {
  SlotKind kind = SlotKind::kVector;
  int64_t arg = -1;
  int64_t table = -1;
  int64_t mul = 1, add = 0, bits = 64;
};

// The caller's kernel options (jax_dynoff.KernelOptions) that the CUDA
// handler applies itself; the planner applied the rest before the path was
// chosen.  Bits of desc[kOptions]:
namespace opt {
inline constexpr int64_t kNoSm90 = 1,  // generic kernel for 16-bit inputs
    kNoTf32 = 2,                       // exact SIMT kernel for float32
    kNoDirect = 4,                     // ptr-array kernel, never a direct one
    kNoSkinny = 8,                     // the tiny tile for the skinny path
    kNondeterministic = 16,            // split-K partials added as they come
    kAll = 31;
// desc[kDirectTile]: 0, or 1 + the index of the tile in
// jax_dynoff/options.py's DIRECT_TILES (large, wide, medium, small_m,
// tiny, split_k, cluster_k); planner.h's DirectTile names them and checks
// this count.
inline constexpr int64_t kNumDirectTiles = 7;
}  // namespace opt

// lax.dynamic_slice's rule for one start: negative starts count from the end,
// then the window is moved inside the array.  Total for every int64 value.
JAX_DYNOFF_HD int64_t ClampStart(int64_t start, int64_t dim, int64_t size) {
  if (start < 0) start += dim;  // cannot overflow: start < 0 < dim
  const int64_t hi = dim - size;
  return start < 0 ? 0 : (start > hi ? hi : start);
}

struct OperandDesc {
  bool present = false;
  int64_t arg = -1;             // FFI arg index of the array; -1: ret 0 (D)
  int rank = 0;                 // rank of the array without batch dims
  int64_t batched_mask = 0;     // bit j: the array carries batch dim j
  int64_t dims[kMaxRank] = {};
  int64_t win[kMaxRank] = {};   // window extent per dim (1 for leading dims)
  int64_t start[kMaxRank] = {}; // static start, already clamped
  int64_t start_arg[kMaxRank] = {};  // offsets slot of a dynamic start, or -1
  // A ragged window (jax_dynoff.window(..., valid=...)): the valid extents
  // of its two trailing dims, static (clamped to the window) or from a slot
  // (valid_arg >= 0, clamped to [0, win] where read: ValidExtent).  Its
  // trailing starts clamp to [0, dim - valid].  A plain window: win.
  bool ragged = false;
  int64_t valid[2] = {};
  int64_t valid_arg[2] = {-1, -1};
  // Derived by Decode:
  int64_t strides[kMaxRank] = {};   // elements, row-major
  int64_t batch_strides[kMaxBatchRank] = {};  // elements; 0 if not batched
  int64_t elements = 0;         // elements of the whole buffer (batch incl.)
  int64_t static_offset = 0;    // elements contributed by static starts

  JAX_DYNOFF_HD int64_t rows() const { return win[rank - 2]; }
  JAX_DYNOFF_HD int64_t cols() const { return win[rank - 1]; }
  // Leading dimension of the window viewed as a row-major matrix.
  JAX_DYNOFF_HD int64_t ld() const { return dims[rank - 1]; }
};

struct GemmProblem {
  int64_t m = 0, n = 0, k = 0;
  DType in_dtype = DType::kF32, out_dtype = DType::kF32;
  bool trans_a = false, trans_b = false;
  CMode c_mode = CMode::kNone;
  Precision precision = Precision::kDefault;
  Path path = Path::kGeneric;
  int64_t split_k = 1;
  int batch_rank = 0;
  int64_t batch_shape[kMaxBatchRank] = {};
  int64_t batch = 1;  // product of batch_shape
  double alpha = 1.0, beta = 0.0;
  OperandDesc op[kNumOperands];
  // The dynamic starts: their count and sources; the offsets vector's FFI
  // arg (-1 when no slot reads it), its slot count, and (set by
  // CheckBuffers) whether it holds one value per batch item.
  int64_t num_slots = 0;
  SlotSource slot[kMaxSlots];
  int64_t offsets_arg = -1;
  int64_t num_vector_slots = 0;
  bool offsets_batched = false;
  int64_t options = 0;       // namespace opt bits
  int64_t direct_tile = 0;   // desc[kDirectTile]
  int64_t kernel = 0;        // desc[kKernel]: EncodeKernel (planner.h)

  // Multi-index of flat batch item t along batch dim j (row-major).
  JAX_DYNOFF_HD int64_t BatchIndex(int64_t t, int j) const {
    for (int i = batch_rank - 1; i > j; --i) t /= batch_shape[i];
    return t % batch_shape[j];
  }
};

// What the handler knows about one FFI buffer, independent of the FFI API.
struct BufferInfo {
  int64_t dtype_code;  // DType, or -1 for anything else
  int rank;
  const int64_t* dims;
  bool is_s32 = false, is_s64 = false;
  int64_t elements() const {
    int64_t e = 1;
    for (int i = 0; i < rank; ++i) e *= dims[i];
    return e;
  }
};

inline int64_t ElementBytes(DType t) { return t == DType::kF32 ? 4 : 2; }

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

// One slot made concrete for a call: where its value lies in memory (host
// memory for the CPU handler, device memory for the CUDA kernels, which
// read it themselves) and how to read it.  Built by ResolveSlots.
struct SlotRef {
  const void* value = nullptr;  // item 0's start, or its index into `table`
  const void* table = nullptr;  // nullptr: `value` is the start itself
  int64_t table_len = 0;
  // Elements between batch items' values (0 or 1), and the slot's map
  // (SlotSource): 32-bit fields keep a SlotRef at 40 bytes, which the
  // kernels' parameter blocks hold by the dozen (kernels/launch.h).
  int32_t item_step = 0;
  int32_t mul = 1, add = 0;
  int8_t value64 = 0, table64 = 0, wrap32 = 0;

  // The (unclamped) start of batch item t.
  JAX_DYNOFF_HD int64_t Load(int64_t t) const {
    const int64_t i = t * item_step;
    int64_t v = value64 ? static_cast<const int64_t*>(value)[i]
                        : static_cast<const int32_t*>(value)[i];
    if (table != nullptr) {
      const int64_t j = ClampStart(v, table_len, 1);
      v = table64 ? static_cast<const int64_t*>(table)[j]
                  : static_cast<const int32_t*>(table)[j];
    }
    if (mul != 1 || add != 0) {
      // Unsigned arithmetic wraps as the program's integer ops do; the low
      // 32 bits of the 64-bit result are the 32-bit result.
      const uint64_t r =
          static_cast<uint64_t>(v) *
              static_cast<uint64_t>(static_cast<int64_t>(mul)) +
          static_cast<uint64_t>(static_cast<int64_t>(add));
      v = wrap32 ? static_cast<int64_t>(static_cast<int32_t>(
                       static_cast<uint32_t>(r)))
                 : static_cast<int64_t>(r);
    }
    return v;
  }
};

static_assert(sizeof(SlotRef) == 40, "kernel parameter blocks hold SlotRefs");

// An FFI arg's data, as ResolveSlots needs it.
struct ArgData {
  const void* data;
  bool is64;
  int64_t elements;
};

// Each slot's SlotRef for one call (after CheckBuffers); `arg(i)` returns FFI
// arg i's ArgData.
template <typename ArgFn>
void ResolveSlots(const GemmProblem& p, ArgFn arg, SlotRef* out) {
  for (int64_t j = 0; j < p.num_slots; ++j) {
    const SlotSource& s = p.slot[j];
    SlotRef r;
    if (s.kind == SlotKind::kVector) {
      const ArgData v = arg(p.offsets_arg);
      const int64_t per_slot = p.offsets_batched ? p.batch : 1;
      r.value = static_cast<const char*>(v.data) +
                s.arg * per_slot * (v.is64 ? 8 : 4);
      r.value64 = v.is64;
      r.item_step = p.offsets_batched ? 1 : 0;
    } else {
      const ArgData v = arg(s.arg);
      r.value = v.data;
      r.value64 = v.is64;
      r.mul = static_cast<int32_t>(s.mul);  // DecodeDesc: int32 range
      r.add = static_cast<int32_t>(s.add);
      r.wrap32 = s.bits == 32;
      if (s.kind == SlotKind::kLookup) {
        const ArgData t = arg(s.table);
        r.table = t.data;
        r.table64 = t.is64;
        r.table_len = t.elements;
      }
    }
    out[j] = r;
  }
}

// The valid extent of operand `op`'s window along its trailing dim j (0:
// rows, 1: cols) for batch item t: the window's extent for a plain window,
// a dynamic one clamped to [0, extent]; `slots` are the call's ResolveSlots.
JAX_DYNOFF_HD int64_t ValidExtent(const OperandDesc& op, int j, int64_t t,
                                  const SlotRef* slots) {
  if (op.valid_arg[j] < 0) return op.valid[j];
  const int64_t v = slots[op.valid_arg[j]].Load(t);
  const int64_t w = op.win[op.rank - 2 + j];
  return v < 0 ? 0 : v > w ? w : v;
}

// Element offset of operand `op`'s window for batch item t; `slots` are the
// call's ResolveSlots.  A ragged window's trailing starts clamp with its
// valid extents (its capacity may cross the array's end; the valid part
// never does).
JAX_DYNOFF_HD int64_t WindowOffset(const GemmProblem& p, const OperandDesc& op,
                                   int64_t t, const SlotRef* slots) {
  int64_t off = op.static_offset;
  for (int j = 0; j < p.batch_rank; ++j)
    off += p.BatchIndex(t, j) * op.batch_strides[j];
  for (int i = 0; i < op.rank; ++i)
    if (op.start_arg[i] >= 0) {
      const int64_t size = i >= op.rank - 2
                               ? ValidExtent(op, i - (op.rank - 2), t, slots)
                               : op.win[i];
      off += ClampStart(slots[op.start_arg[i]].Load(t), op.dims[i], size) *
             op.strides[i];
    }
  return off;
}

}  // namespace jax_dynoff

#endif  // JAX_DYNOFF_GEMM_PROBLEM_H_
