// The GEMM problem as both FFI handlers see it.
//
// Python (jax_dynoff/lowering.py) passes everything static about one call
// as named attributes, which call_attrs.h decodes into a GemmProblem and
// validates against the buffers XLA hands the handler; this header defines
// the problem and the one clamping rule every backend uses.  Plain C++17: no CUTLASS, no CUDA runtime, so the
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
//          the `slots` attribute says where its value comes from
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
//          holds out's contents; on CUDA a call planned with
//          PlannedKernel::fresh_out has no `out` arg and ret 0 is a fresh
//          buffer the handler zeroes outside the windows); on CUDA, ret 1
//          is a U8 workspace whose size the Python side fixed at trace
//          time.
//   attrs: named and typed (call_attrs.h reads them; jax_dynoff/spec.py's
//          call_attrs writes them): the product (m, n, k, dtypes,
//          transposes, c_mode, precision, alpha, beta, batch_shape, the
//          epilogue, out_zeros), one
//          dictionary per operand (a, b, c, d: its array, window, starts
//          and their slots), the slots' sources, the caller's options and
//          the planner's answer (plan).
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
// What the epilogue does with the float32 product h = alpha op(A) op(B)
// (+ beta C) before D's cast.  kSwiglu: h's n columns hold a gated
// activation's gate and up columns interleaved (column 2j gate j, 2j + 1 up
// j), and D's column j is silu(h[:, 2j]) * h[:, 2j + 1]: D has n / 2
// columns (jax_dynoff.ragged_dot(activation="swiglu")).  It is read on
// calls with ragged windows only, without C (DecodeCallAttrs), so that it
// runs on the CPU handler, the fused grouped kernel or, composed, in XLA.
enum class Epilogue : int64_t { kNone = 0, kSwiglu = 1 };
inline constexpr int kNumEpilogues = 2;

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


// Where one dynamic start (a slot) comes from.
enum class SlotKind : int64_t {
  kVector = 0,  // element `arg` of the offsets vector (offsets_arg)
  kScalar = 1,  // FFI arg `arg`: an S32 / S64 scalar, the start itself
  kLookup = 2,  // FFI arg `table` (an S32 / S64 vector of L >= 1 entries) at
                // index ClampStart(FFI arg `arg`, L, 1): lax.dynamic_slice's
                // clamping of table[i]
};
// A division of a scalar slot's value, or of a look-up's index before the
// look-up, by a positive constant `divisor`, as the program computed it:
// jnp's floor_divide / remainder (`i // L`, `i % L`: the quotient rounded
// down, the remainder in [0, divisor)) or lax.div / lax.rem (rounded toward
// zero, the remainder with the dividend's sign).  None of them can
// overflow for a divisor >= 1, in 32 bits or 64.
enum class SlotDivOp : int64_t {
  kNone = 0, kFloorDiv = 1, kFloorMod = 2, kTruncDiv = 3, kTruncRem = 4
};
inline constexpr int64_t kNumSlotDivOps = 5;

// A scalar or look-up slot's value v becomes v * mul + add, wrapped to a
// `bits`-bit two's complement integer (32 or 64), as the program's own
// integer ops compute it (they wrap); then it is clamped like every start.
// mul = 1, add = 0 leave the value as it is; both lie in the int32 range
// (SlotRef holds them in 32 bits; a map with larger coefficients goes
// through the offsets vector instead).  The division (div_op, divisor in
// [1, 2^31)) comes first: on the scalar, or on the index of a look-up.
struct SlotSource {
  SlotKind kind = SlotKind::kVector;
  int64_t arg = -1;
  int64_t table = -1;
  int64_t mul = 1, add = 0, bits = 64;
  SlotDivOp div_op = SlotDivOp::kNone;
  int64_t divisor = 1;
};

// `v` divided by `d` >= 1 as `op` says (SlotDivOp).
JAX_DYNOFF_HD int64_t ApplyDivOp(SlotDivOp op, int64_t v, int64_t d) {
  const int64_t q = v / d, r = v % d;  // C++: rounded toward zero
  switch (op) {
    case SlotDivOp::kFloorDiv: return r < 0 ? q - 1 : q;
    case SlotDivOp::kFloorMod: return r < 0 ? r + d : r;
    case SlotDivOp::kTruncDiv: return q;
    case SlotDivOp::kTruncRem: return r;
    default: return v;
  }
}

// The SM90 ptr-array tiles, in KernelOptions.tile's order
// (jax_dynoff/options.py SM90_TILES; bigger first: ties go to the first).
enum class Sm90Tile : int { kLarge = 0, kMedium, kSmallM, kTiny };
inline constexpr int kNumSm90Tiles = 4;

// The direct tiles (kernels/sm90_direct.h) in options.py DIRECT_TILES'
// order after kNone (the ptr-array kernel).
enum class DirectTile : int64_t {
  kNone = 0, kLarge, kWide, kMedium, kSmall, kTiny, kSplitK, kClusterK
};
inline constexpr int kNumDirectTiles = 7;  // kNone aside

// The grouped kernel's tiles (kernels/sm90_grouped.h says why each
// exists), and kSmallGroups: the small-group kernels, a grouped launch of
// their own over few rows per item: the weight-gradient one for A
// transposed (kernels/small_group_grad.h), the forward one for A not
// transposed (kernels/small_group_fwd.h).
enum class GroupedTile : int64_t { kMedium = 0, kWide, kSmallGroups };
inline constexpr int kNumGroupedTiles = 3;

// The skinny path's tiles, in options.py SKINNY_TILES' order: kWide
// (kernels/sm90_skinny.h: 64 columns a CTA, K split across a cluster)
// and kNarrow (kernels/sm90_skinny_narrow.h: 16 columns a CTA over all of
// K, no cluster).  plan.h SkinnyTileChoice picks one.
enum class SkinnyTile : int64_t { kWide = 0, kNarrow };
inline constexpr int kNumSkinnyTiles = 2;

// The caller's KernelOptions (jax_dynoff/options.py) that reach C++, all
// of them by one channel (the call's `options` attribute): the planner
// reads the ones that choose the plan, the CUDA handler the switches.
struct CallOptions {
  bool sm90 = true;           // False: the generic kernel for 16-bit inputs
  bool tf32 = true;           // False: the exact SIMT kernel for float32
  bool direct = true;         // False: ptr-array kernels, never a direct one
  bool skinny = true;         // False: the tiny tile for the skinny path
  bool deterministic = true;  // False: split-K partials added as they come
  bool split_k = false;       // plan split-K where it can run
  int64_t split_k_slices = 0;              // forced slice count, 0: none
  int tile = -1;                           // forced Sm90Tile, -1: none
  int grouped_tile = -1;                   // forced GroupedTile, -1: none
  int skinny_tile = -1;                    // forced SkinnyTile, -1: none
  DirectTile direct_tile = DirectTile::kNone;  // forced direct tile
};

// The planner's answer within its path (the call's `plan` attribute,
// beside path and split_k; planner.h PlanGemm makes it).
struct PlannedKernel {
  // The direct tile standing in for the planned path's ptr-array kernel
  // (the skinny path: for its fallback, the tiny tile); kNone: none.
  DirectTile direct = DirectTile::kNone;
  int skinny_split = 0;  // the skinny path: CTAs per column tile, else 0
  // The skinny path's tile (kWide elsewhere); the narrow one runs at
  // skinny_split 1.
  SkinnyTile skinny_tile = SkinnyTile::kWide;
  // The cluster-K direct tile (direct == kClusterK, as the path's tile or
  // the skinny path's fallback): its width (32 or 64), else 0.
  int cluster_k_tile_n = 0;
  GroupedTile grouped_tile = GroupedTile::kMedium;  // sm90_grouped's tile
  // sm90_grouped only: D is a fresh buffer (the call has no `out` operand
  // and no alias), which the grouped pointer kernel zeroes outside every
  // item's window before the kernel writes; planned where the call says
  // its out is all zeros (GemmProblem::out_zeros) and every window is a
  // full-width row range of one shared 2-D D (planner_rules.h
  // FreshOutReasons).
  bool fresh_out = false;
};

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
  Epilogue epilogue = Epilogue::kNone;
  Path path = Path::kGeneric;
  int64_t split_k = 1;
  // The caller's `out` is all zeros (jax_dynoff.ragged_dot's shared out):
  // every element of D outside the windows comes out zero.  The planner
  // reads it (PlannedKernel::fresh_out); the attribute `out_zeros`,
  // present only where true.
  bool out_zeros = false;
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
  CallOptions opts;
  PlannedKernel planned;  // with path and split_k: the planner's answer

  // D's columns: n, or n / 2 where the epilogue pairs h's columns.
  JAX_DYNOFF_HD int64_t out_cols() const {
    return epilogue == Epilogue::kSwiglu ? n / 2 : n;
  }

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

// One slot made concrete for a call: where its value lies in memory (host
// memory for the CPU handler, device memory for the CUDA kernels, which
// read it themselves) and how to read it.  Built by ResolveSlots.
struct SlotRef {
  const void* value = nullptr;  // item 0's start, or its index into `table`
  const void* table = nullptr;  // nullptr: `value` is the start itself
  // 32-bit fields keep a SlotRef at 40 bytes, which the kernels' parameter
  // blocks hold by the dozen (kernels/launch.h): the table's length
  // (CheckBuffers: < 2^31), elements between batch items' values (0 or 1),
  // and the slot's map and division (SlotSource).
  int32_t table_len = 0;
  int32_t item_step = 0;
  int32_t mul = 1, add = 0;
  int32_t divisor = 1;
  int8_t value64 = 0, table64 = 0, wrap32 = 0;
  int8_t div_op = 0;  // SlotDivOp

  // The (unclamped) start of batch item t.
  JAX_DYNOFF_HD int64_t Load(int64_t t) const {
    const int64_t i = t * item_step;
    int64_t v = value64 ? static_cast<const int64_t*>(value)[i]
                        : static_cast<const int32_t*>(value)[i];
    if (div_op != 0)
      v = ApplyDivOp(static_cast<SlotDivOp>(div_op), v, divisor);
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
      r.mul = static_cast<int32_t>(s.mul);  // DecodeCallAttrs: int32 range
      r.add = static_cast<int32_t>(s.add);
      r.wrap32 = s.bits == 32;
      r.div_op = static_cast<int8_t>(s.div_op);
      r.divisor = static_cast<int32_t>(s.divisor);  // DecodeCallAttrs: range
      if (s.kind == SlotKind::kLookup) {
        const ArgData t = arg(s.table);
        r.table = t.data;
        r.table64 = t.is64;
        r.table_len = static_cast<int32_t>(t.elements);  // CheckBuffers
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

// The start of operand `op`'s window along dim i for batch item t: the
// static start, or the slot's value clamped as lax.dynamic_slice does.  A
// ragged window's trailing starts clamp with its valid extents (its
// capacity may cross the array's end; the valid part never does); every
// other window's valid extents are its sizes.  The one clamp of a window
// start on either side of the FFI boundary: WindowOffset, the CPU
// handler, and the CUDA prep kernels all ask it.
JAX_DYNOFF_HD int64_t WindowStart(const OperandDesc& op, int i, int64_t t,
                                  const SlotRef* slots) {
  if (op.start_arg[i] < 0) return op.start[i];
  const int64_t size = i >= op.rank - 2
                           ? ValidExtent(op, i - (op.rank - 2), t, slots)
                           : op.win[i];
  return ClampStart(slots[op.start_arg[i]].Load(t), op.dims[i], size);
}

// Element offset of operand `op`'s window for batch item t; `slots` are the
// call's ResolveSlots.  The static starts are in `static_offset` already.
JAX_DYNOFF_HD int64_t WindowOffset(const GemmProblem& p, const OperandDesc& op,
                                   int64_t t, const SlotRef* slots) {
  int64_t off = op.static_offset;
  for (int j = 0; j < p.batch_rank; ++j)
    off += p.BatchIndex(t, j) * op.batch_strides[j];
  for (int i = 0; i < op.rank; ++i)
    if (op.start_arg[i] >= 0) off += WindowStart(op, i, t, slots) * op.strides[i];
  return off;
}

}  // namespace jax_dynoff

#endif  // JAX_DYNOFF_GEMM_PROBLEM_H_
