// The planner's rules (planner_rules.h): why each family of kernels can or
// cannot run a call, the direct tile and the split-K choice.
// jax_dynoff/plan.py's docstring says what each path is and why it is
// chosen.  Every reason string here is what plan.py's *_reasons and explain
// return.
#include "planner_rules.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "kernels/catalogue.h"

namespace jax_dynoff {
namespace planner_rules {

using kernels::KernelFamily;
using kernels::KernelQuery;

constexpr int64_t kTmaAlignBytes = 16;
constexpr int64_t kInt32Max = 0x7fffffff;
constexpr int64_t kTwoPow31 = int64_t{1} << 31;

// The direct kernels' K tile: 128 bytes (the widest shared-memory swizzle),
// 64 elements of a 16-bit dtype, 32 of float32.
constexpr int64_t kDirectTileKBytes = 128;

// Split-K (path kSm90SplitK): the direct split-K kernel where its windows
// suit it, else the ptr-array slices (64x128 tiles) and a reduction.
constexpr int64_t kSplitKMaxM = 256;
constexpr int64_t kSplitKCandidates[] = {2, 4, 8, 16, 32};
constexpr int64_t kPartialBytes = 4;       // float32 partials

constexpr int64_t kSkinnyMaxM = 16;  // kSm90Skinny16*: one m16 fragment

// The float32 SM90 kernels' staged copies (plan.h StagingOf) stay below
// this many bytes, so that a large batched call does not take a large
// share of the GPU's memory for copies; above it the CUTLASS 2.x kernels
// run (they read the windows in place).
constexpr int64_t kMaxStagingBytes = int64_t{1} << 32;
// The float32 direct kernel (B read in place through registers) against the
// staged ptr-array kernel: the staging copy of B costs in proportion to
// k * n, the register-sourced mainloop ~5% of the GEMM's m * n * k, so the
// direct kernel wins below some m.  On an H200, square NN, it was faster at
// 2048^3 and 4096^3 and slower at 8192^3, with 3 mainloop stages and with 4
// under a sustained load (docs/design.md, float32 and TF32).
constexpr int64_t kTf32DirectMaxM = 4096;

bool Is16Bit(DType t) { return t == DType::kBF16 || t == DType::kF16; }

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

int64_t Tiles(const GemmProblem& p, TileMN t) {
  return CeilDiv(p.m, t.m) * CeilDiv(p.n, t.n);
}

std::string Join(const Reasons& r) {
  std::string s;
  for (size_t i = 0; i < r.size(); ++i) s += (i ? "; " : "") + r[i];
  return s;
}

bool CRead(const GemmProblem& p) {
  return p.op[kC].present && p.c_mode != CMode::kNone && p.beta != 0.0;
}

bool EmptyProblem(const GemmProblem& p) {
  return p.k == 0 || p.m == 0 || p.n == 0 || p.batch == 0;
}

bool HugeExtent(const GemmProblem& p) {
  return std::max({p.m, p.n, p.k}) >= kTwoPow31 || p.batch >= kTwoPow31;
}

std::string Str(int64_t v) { return std::to_string(v); }

// Why operand `op`'s address may not be 16-byte aligned (empty: proven
// aligned), assuming a 16-byte aligned buffer base (XLA's buffers are; the
// handler re-checks the actual addresses).  The window's address is
// base + elt * (static offset + sum of dynamic starts * stride + batch
// indices * batch stride), every start clamped: a multiple of 16 bytes for
// every value of the dynamic starts iff each term is.  TMA also needs the
// leading dimension and (CUTLASS's check) the contiguous extent to be.
Reasons WindowAlignment(const GemmProblem& p, const OperandDesc& op,
                        DType dtype) {
  const int64_t e = ElementBytes(dtype);
  const std::string eb = " x " + Str(e) + " bytes";
  auto bad = [&](int64_t elements) { return elements * e % kTmaAlignBytes; };
  Reasons why;
  if (bad(op.ld())) why.push_back("leading dimension " + Str(op.ld()) + eb);
  if (bad(op.cols())) why.push_back("window width " + Str(op.cols()) + eb);
  if (bad(op.static_offset))
    why.push_back("static offset " + Str(op.static_offset) + eb);
  // A dynamic start on a dim the window spans fully always clamps to 0,
  // except on a ragged window's trailing dims: there it clamps with the
  // valid extent, which may be smaller.
  for (int i = 0; i < op.rank; ++i)
    if (op.start_arg[i] >= 0 &&
        (op.win[i] != op.dims[i] || (op.ragged && i >= op.rank - 2)) &&
        bad(op.strides[i]))
      why.push_back("dynamic start in dim " + Str(i) + " (stride " +
                    Str(op.strides[i]) + eb + ")");
  for (int j = 0; j < p.batch_rank; ++j)
    if (bad(op.batch_strides[j]))
      why.push_back("batch dim " + Str(j) + " (stride " +
                    Str(op.batch_strides[j]) + eb + ")");
  return why;
}

// The float32 operands an SM90 tile would stage (plan.h StagingOf).
Tf32Staging Sm90Staging(const GemmProblem& p) {
  GemmProblem q = p;
  q.path = Path::kSm90Large;
  return StagingOf(q);
}

// Per operand (a, b, d, then c where it is read), the reasons TMA alignment
// is not proven; only operands with reasons are listed.  A C copied into
// the workspace (c_mode kFromD) keeps C's leading dimension at a 256-byte
// aligned base: the same proof covers it.  A float32 operand the SM90
// kernels read from its staged copy (Sm90Staging) needs no proof.
std::vector<std::pair<std::string, Reasons>> AlignmentProof(
    const GemmProblem& p) {
  std::vector<std::pair<std::string, Reasons>> out;
  auto add = [&](const char* name, int o, DType t) {
    Reasons r = WindowAlignment(p, p.op[o], t);
    if (!r.empty()) out.emplace_back(name, std::move(r));
  };
  const Tf32Staging st = Sm90Staging(p);
  if (!st.a) add("a", kA, p.in_dtype);
  if (!st.b) add("b", kB, p.in_dtype);
  add("d", kD, p.out_dtype);
  if (CRead(p)) add("c", kC, p.out_dtype);
  return out;
}

std::string CcReason(const DeviceFacts& dev) {
  if (dev.cc_major == 9 && dev.cc_minor == 0) return "";
  return "compute capability " + Str(dev.cc_major) + "." + Str(dev.cc_minor) +
         ": the SM90 kernels run on 9.0 only";
}

std::string PyBool(bool b) { return b ? "True" : "False"; }

// "no <family> kernel for ('bfloat16', 'bfloat16', False, True)": the
// call's dtypes and transposes as Python writes the key.
std::string NoKernelFor(const char* family, const GemmProblem& p) {
  return std::string("no ") + family + " kernel for ('" +
         DTypeName(p.in_dtype) + "', '" + DTypeName(p.out_dtype) + "', " +
         PyBool(p.trans_a) + ", " + PyBool(p.trans_b) + ")";
}

// Why no SM90 path can run the call (empty: one can).  `dev` null: the
// static rules alone.
Reasons Sm90Reasons(const GemmProblem& p, const DeviceFacts* dev) {
  Reasons why;
  if (!HasSm90Kernel(p.in_dtype, p.out_dtype, p.trans_a, p.trans_b))
    why.push_back(NoKernelFor("SM90", p));
  if (EmptyProblem(p)) why.push_back("empty problem");
  if (HugeExtent(p)) why.push_back("extent >= 2^31");
  for (const auto& [name, bad] : AlignmentProof(p))
    why.push_back(name + ": " + Join(bad));
  const Tf32Staging st = Sm90Staging(p);
  const double staged = 4.0 * static_cast<double>(p.batch) *
                        static_cast<double>(st.k) *
                        static_cast<double>((st.a ? p.m : 0) + (st.b ? p.n : 0));
  if (staged > static_cast<double>(kMaxStagingBytes))
    why.push_back("staged float32 copies of " + Str(static_cast<int64_t>(staged)) +
                  " bytes > " + Str(kMaxStagingBytes));
  if (dev != nullptr && !CcReason(*dev).empty())
    why.push_back(CcReason(*dev));
  return why;
}

// The rules the direct and skinny kernels share: one item, no transposes,
// in and out of one dtype (16-bit; `f32`: float32 too), and no C read from
// out's own array (a C window overlapping D's partly would be read after
// other CTAs wrote it).
Reasons OneItemNNReasons(const GemmProblem& p, const char* kind,
                         bool f32 = false) {
  Reasons why;
  if (p.batch != 1) why.push_back(Str(p.batch) + " batch items");
  if (p.trans_a || p.trans_b) why.push_back("transposed operand");
  const bool dtype_ok =
      Is16Bit(p.in_dtype) || (f32 && p.in_dtype == DType::kF32);
  if (!dtype_ok || p.out_dtype != p.in_dtype)
    why.push_back(std::string("no ") + kind + " kernel for " +
                  DTypeName(p.in_dtype) + " -> " + DTypeName(p.out_dtype));
  if (p.c_mode == CMode::kFromD && CRead(p))
    why.push_back("C is read from out's own array (may overlap D partly)");
  return why;
}

Reasons SkinnyReasons(const GemmProblem& p, const DeviceFacts* dev) {
  Reasons why = Sm90Reasons(p, dev);
  if (p.m > kSkinnyMaxM)
    why.push_back("m = " + Str(p.m) + " > " + Str(kSkinnyMaxM));
  // The direct kernels' rules, but for B (transposed where a kernel is)
  // and the dtypes (a float32 result where a kernel is).
  GemmProblem nn = p;
  nn.trans_b = false;
  nn.out_dtype = p.in_dtype;
  for (std::string& r : OneItemNNReasons(nn, "skinny"))
    why.push_back(std::move(r));
  if (Is16Bit(p.in_dtype) && !p.trans_a &&
      !HasSkinnyKernel(p.in_dtype, p.out_dtype, false, p.trans_b))
    why.push_back(std::string("no skinny kernel for ") +
                  DTypeName(p.in_dtype) + " -> " + DTypeName(p.out_dtype) +
                  (p.trans_b ? " with B transposed" : ""));
  return why;
}

// --- The grouped kernel (kernels/sm90_grouped.h) ----------------------------

// The grouped kernel's problem extents are the valid ones: m = min(op(A)'s
// rows, D's), n = min(op(B)'s columns, D's), k = min(op(A)'s columns,
// op(B)'s rows).  One that runs along an operand's contiguous dim must be
// a multiple of 16 bytes for every value of the valid extents, since the
// kernel moves whole 16-byte vectors there: its epilogue stores D's rows
// in 8-element vectors (an H200 wrote 2 elements past n = 118), and its
// loads are held to the same rule.  So each valid extent it is the min of
// must be static, and their min a multiple of 16 bytes.  Rows (strided
// dims) may be any value: the ragged rows of jax_dynoff.ragged_dot and
// the ragged K of its weight gradient are.
Reasons GroupedExtentReasons(const GemmProblem& p) {
  const OperandDesc &A = p.op[kA], &B = p.op[kB], &D = p.op[kD];
  struct Part {
    const char* operand;
    const OperandDesc* op;
    int j;  // 0: rows, 1: columns of the stored window
    int64_t scale = 1;  // h's columns per column of the window
  };
  const int64_t align = kTmaAlignBytes / ElementBytes(p.in_dtype);
  const struct {
    const char* name;
    bool contiguous;
    Part parts[2];
  } dims[] = {
      {"m", p.trans_a, {{"a", &A, p.trans_a ? 1 : 0}, {"d", &D, 0}}},
      // With the swiglu epilogue D's column j holds h's columns 2j and
      // 2j + 1: the kernel's n is min(B's columns, 2 x D's).
      {"n", true,
       {{"b", &B, p.trans_b ? 0 : 1},
        {"d", &D, 1, p.epilogue == Epilogue::kSwiglu ? 2 : 1}}},
      {"k", !p.trans_a || p.trans_b,
       {{"a", &A, p.trans_a ? 0 : 1}, {"b", &B, p.trans_b ? 1 : 0}}},
  };
  Reasons why;
  for (const auto& d : dims) {
    if (!d.contiguous) continue;
    int64_t least = -1;
    bool known = true;
    for (const Part& q : d.parts) {
      if (q.op->valid_arg[q.j] >= 0) {
        why.push_back(std::string(d.name) + ": " + q.operand + "'s valid " +
                      (q.j ? "columns" : "rows") +
                      " are dynamic along a contiguous dim (the grouped "
                      "kernel moves whole 16-byte vectors there)");
        known = false;
      } else if (least < 0 || q.op->valid[q.j] * q.scale < least) {
        least = q.op->valid[q.j] * q.scale;
      }
    }
    if (known && least % align != 0)
      why.push_back(std::string(d.name) + " = " + Str(least) +
                    " along a contiguous dim is not a multiple of " +
                    Str(align) + " elements (16 bytes)");
  }
  return why;
}

// Why a call cannot run as one grouped launch: the grouped kernel reads
// every item's problem shape (the valid extents: tiles past them are never
// scheduled) and operand addresses from the workspace, where the pointer
// kernel wrote them.  It needs a kernel built for the dtypes and
// transposes, TMA alignment (proved for every value of the starts), no C
// (its epilogue has no source), and an SM90 device.  `dev` null: the
// static rules alone.
Reasons GroupedReasons(const GemmProblem& p, const DeviceFacts* dev) {
  Reasons why;
  if (!HasRaggedWindow(p)) {
    why.push_back("no ragged window");
    return why;
  }
  if (!HasGroupedKernel(p.in_dtype, p.out_dtype, p.trans_a, p.trans_b,
                        p.epilogue))
    why.push_back(NoKernelFor(
        p.epilogue == Epilogue::kSwiglu ? "grouped swiglu" : "grouped", p));
  if (CRead(p)) why.push_back("C is read (the grouped epilogue has no source)");
  if (EmptyProblem(p)) why.push_back("empty problem");
  if (HugeExtent(p)) why.push_back("extent >= 2^31");
  if (!p.opts.sm90)
    why.push_back("KernelOptions(sm90=False)");
  for (const auto& [name, bad] : AlignmentProof(p))
    why.push_back(name + ": " + Join(bad));
  for (std::string& r : GroupedExtentReasons(p)) why.push_back(std::move(r));
  if (dev != nullptr && !CcReason(*dev).empty())
    why.push_back(CcReason(*dev));
  return why;
}

Reasons FreshOutReasons(const GemmProblem& p, Path path) {
  Reasons why;
  const OperandDesc& D = p.op[kD];
  if (!p.out_zeros) why.push_back("out is not known to be zeros");
  if (path != Path::kSm90Grouped) why.push_back("not one grouped launch");
  if (!D.ragged || D.rank != 2 || D.batched_mask != 0)
    why.push_back("D is not one 2-D array the items share");
  else if (D.valid_arg[1] >= 0 || D.valid[1] != D.dims[1])
    why.push_back("D's windows are not full-width row ranges");
  if (EmptyProblem(p)) why.push_back("empty problem");
  return why;
}

// --- The direct kernels (kernels/sm90_direct.h) -----------------------------

bool TileOrEdge(int64_t win, int64_t dim, int64_t tile) {
  return win % tile == 0 || win == dim;
}

// TMA extents within int32; no dynamic column start (one that spans its
// dim is always 0).
void DirectWindowReasons(const char* name, const OperandDesc& op,
                         Reasons* why) {
  const int r = op.rank;
  int64_t layers = 1;  // the matrices the array stacks
  for (int i = 0; i + 2 < r; ++i) layers *= op.dims[i];
  if (std::max({op.dims[r - 2], op.dims[r - 1], layers}) > kInt32Max)
    why->push_back(std::string(name) + ": a dim >= 2^31");
  if (op.start_arg[r - 1] >= 0 && op.win[r - 1] != op.dims[r - 1])
    why->push_back(std::string(name) + ": dynamic column start");
}

// D's extents multiples of the output tile or its buffer's dims (a store
// past the window would land in the buffer).  Not for the cluster-K tile,
// whose own epilogue predicates every store on D's window
// (kernels/sm90_cluster_k.h): any m and n.
Reasons StoreReasons(const OperandDesc& d, DirectTile tile) {
  const TileMN t = kDirectTileShapes[static_cast<int>(tile)];
  const int r = d.rank;
  Reasons why;
  if (tile == DirectTile::kClusterK) return why;
  auto check = [&](const char* extent, int64_t win, int64_t dim, int64_t tt,
                   const char* edge) {
    if (!TileOrEdge(win, dim, tt))
      why.push_back(std::string("out: ") + extent + " = " + Str(win) +
                    " neither a multiple of " + Str(tt) +
                    " nor the array's " + edge + " (" + DirectTileName(tile) +
                    " tile)");
  };
  check("m", d.win[r - 2], d.dims[r - 2], t.m, "height");
  check("n", d.win[r - 1], d.dims[r - 1], t.n, "width");
  return why;
}

// (the direct tile for a call planned for `planned`, kNone for the
// ptr-array kernel; the reasons for kNone).  Each ptr-array tile has its
// direct twin; the large path has two: the wide tile (128x256) where its
// tiles fit one wave of SMs (its m64n256 wgmmas make each tile faster; with
// several waves the large tile was as fast or faster), else the large one;
// either one where only its store rule holds.  The tiny path has two as
// well: its own tile, and the cluster-K tile (below).
// KernelOptions.direct_tile (p.opts.direct_tile) forces one of the path's tiles
// where its rules hold.
std::pair<DirectTile, Reasons> DirectChoice(const GemmProblem& p,
                                            Path planned, int sms) {
  std::vector<DirectTile> candidates;
  for (DirectTile t : kAllDirectTiles)
    if (DirectTilePath(t) == planned) candidates.push_back(t);
  if (candidates.empty())
    return {DirectTile::kNone,
            {std::string("planned ") + PathName(planned) +
             ": no direct kernel"}};
  // The tiles built for the dtypes and transposes (NT / TN: some only).
  std::vector<DirectTile> built;
  for (DirectTile t : candidates)
    if (HasDirectKernel(p.in_dtype, p.out_dtype, p.trans_a, p.trans_b, t))
      built.push_back(t);
  Reasons why;
  if (built.empty()) {  // says which: batch, transposes, dtypes, C
    why = OneItemNNReasons(p, "direct", /*f32=*/true);
    if (why.empty())  // float32 NN: the large and medium tiles only
      why.push_back(std::string("no ") + DTypeName(p.in_dtype) +
                    " direct kernel for " + PathName(planned));
  } else {
    candidates = built;
    if (p.batch != 1) why.push_back(Str(p.batch) + " batch items");
    if (p.c_mode == CMode::kFromD && CRead(p))
      why.push_back("C is read from out's own array (may overlap D partly)");
  }
  if (p.in_dtype == DType::kF32) {
    // The float32 direct kernel is TF32 (HIGHEST runs 3xTF32 on staged
    // parts), and it reads B in place: the SM90 path's alignment proof
    // leaves out the B it would stage (plan.h StagingOf).
    if (p.precision == Precision::kHighest)
      why.push_back("float32 at precision=HIGHEST (3xTF32 on staged "
                    "operands)");
    const Reasons bad = WindowAlignment(p, p.op[kB], p.in_dtype);
    if (!bad.empty()) why.push_back("b: " + Join(bad));
    if (p.m > kTf32DirectMaxM && p.opts.direct_tile == DirectTile::kNone)
      why.push_back("m = " + Str(p.m) + " > " + Str(kTf32DirectMaxM) +
                    ": staging B costs less than the register-sourced "
                    "mainloop");
  }
  if (planned == Path::kSm90SplitK) {
    // The unsplit SM90 paths are planned only with every window aligned;
    // split-K proves it for A and B alone (its ptr-array slices leave C and
    // D to the reduction kernel), the direct kernel needs C and D too.
    for (const auto& [name, bad] : AlignmentProof(p))
      if (name == "c" || name == "d") why.push_back(name + ": " + Join(bad));
  }
  DirectWindowReasons("a", p.op[kA], &why);
  DirectWindowReasons("b", p.op[kB], &why);
  DirectWindowReasons("d", p.op[kD], &why);
  if (CRead(p)) DirectWindowReasons("c", p.op[kC], &why);
  // The windows' K extents a multiple of the K tile or their buffer's dim
  // (a K tile past the window would be summed).  K is A's width and B's
  // height, the other way round for a transposed operand.
  const OperandDesc &A = p.op[kA], &B = p.op[kB];
  const int ak = p.trans_a ? A.rank - 2 : A.rank - 1;
  const int bk = p.trans_b ? B.rank - 1 : B.rank - 2;
  const struct {
    const char* name;
    int64_t win, dim;
    const char* edge;
  } ks[] = {{"a", A.win[ak], A.dims[ak], p.trans_a ? "height" : "width"},
            {"b", B.win[bk], B.dims[bk], p.trans_b ? "width" : "height"}};
  const int64_t tile_k = kDirectTileKBytes / ElementBytes(p.in_dtype);
  for (const auto& k : ks)
    if (!TileOrEdge(k.win, k.dim, tile_k))
      why.push_back(std::string(k.name) + ": k = " + Str(k.win) +
                    " neither a multiple of " + Str(tile_k) +
                    " nor the array's " + k.edge);
  const DirectTile forced = p.opts.direct_tile;
  const bool has_forced = forced != DirectTile::kNone;
  const bool forced_ok =
      has_forced && std::find(candidates.begin(), candidates.end(), forced) !=
                        candidates.end();
  if (has_forced && !forced_ok)
    why.push_back(std::string("direct_tile=") + DirectTileName(forced) +
                  (DirectTilePath(forced) == planned
                       ? std::string(": not built for these dtypes and "
                                     "transposes")
                       : std::string(": not a tile of ") + PathName(planned)));
  if (forced_ok) candidates = {forced};
  std::vector<Reasons> stores;
  bool any_store = false;
  for (DirectTile t : candidates) {
    stores.push_back(StoreReasons(p.op[kD], t));
    any_store |= stores.back().empty();
  }
  if (!any_store)  // each tile shape's reasons once
    for (size_t i = 0; i < stores.size(); ++i)
      if (i == 0 || kDirectTileShapes[static_cast<int>(candidates[i])].m !=
                        kDirectTileShapes[static_cast<int>(candidates[0])].m ||
          kDirectTileShapes[static_cast<int>(candidates[i])].n !=
              kDirectTileShapes[static_cast<int>(candidates[0])].n)
        for (const std::string& r : stores[i]) why.push_back(r);
  if (!why.empty()) return {DirectTile::kNone, why};
  if (candidates.size() == 1) return {candidates[0], {}};
  if (planned == Path::kSm90Tiny) {
    // {tiny, cluster_k}.  The cluster-K tile (each tile's K split across a
    // cluster, kernels/sm90_cluster_k.h) wherever ClusterKTileN (plan.h)
    // gives it a width, i.e. where the tiny tile's output tiles would leave
    // half the SMs or more idle: on an H200 0.9-1.4 us per call faster at
    // 64-256 x 1024-2048 x 1024-2048, launched from the host and as a node
    // of a CUDA graph alike (plan.h has the figures).  Also where the tiny
    // tile's store rule fails (m or n of D's window not a multiple of 64
    // inside a larger buffer: a row window of m = 32 or 96): the cluster-K
    // tile stores any window, in one launch where the ptr-array kernel
    // takes two.
    const bool tiny_stores = stores[0].empty();  // kTiny precedes kClusterK
    return {kernels::ClusterKTileN(p.m, p.n, p.k, sms) != 0 || !tiny_stores
                ? DirectTile::kClusterK
                : DirectTile::kTiny,
            {}};
  }
  // The large path's two tiles: candidates are {large, wide}.
  const bool large_ok = stores[0].empty(), wide_ok = stores[1].empty();
  const int64_t wide_tiles =
      Tiles(p, kDirectTileShapes[static_cast<int>(DirectTile::kWide)]);
  if (wide_ok && (wide_tiles <= sms || !large_ok)) return {DirectTile::kWide, {}};
  return {DirectTile::kLarge, {}};
}

// --- Split-K -----------------------------------------------------------------

// K splits into `s` equal slices whose addresses stay 16-byte aligned.
bool SliceOk(const GemmProblem& p, int64_t s) {
  const int64_t ks = s > 0 ? p.k / s : 0;
  return s >= 1 && ks > 0 && p.k % s == 0 &&
         ks * ElementBytes(p.in_dtype) % kTmaAlignBytes == 0 &&
         p.batch * s < kTwoPow31;
}

// The slice counts split-K may pick, ascending: equal slices of a multiple
// of 16 bytes (CUTLASS's ArrayProblemShape has one K for all items, and
// every slice's A / B address must stay TMA-aligned) and of at least
// kSplitKMinSliceK elements, whose float32 partials (written once, read
// once) at most double the bytes of B: 2 * S * m * n * 4 <= k * n * elt.
std::vector<int64_t> SplitKCandidates(const GemmProblem& p) {
  std::vector<int64_t> out;
  for (int64_t s : kSplitKCandidates)
    if (SliceOk(p, s) && p.k / s >= kSplitKMinSliceK &&
        2 * s * p.m * kPartialBytes <= p.k * ElementBytes(p.in_dtype))
      out.push_back(s);
  return out;
}

// Split until the slice tiles fill about two waves (ceil(1.5) = 2) of SMs.
int64_t SplitKTargetCtas(int sms) { return 3 * int64_t{sms} / 2; }

// Split-K's static rules: kernels for 16-bit NN inputs, skinny m, float32
// partials with ld = n a multiple of 16 bytes, A and B aligned as for
// every SM90 path (C and D are only touched by the reduction kernel).
Reasons SplitKStaticReasons(const GemmProblem& p, const DeviceFacts* dev) {
  Reasons why;
  if (!Is16Bit(p.in_dtype))
    why.push_back(std::string("no split-K kernel for ") +
                  DTypeName(p.in_dtype) + " inputs");
  if (p.trans_a || p.trans_b)
    why.push_back("split-K kernels exist only for A and B not transposed");
  if (EmptyProblem(p)) why.push_back("empty problem");
  if (HugeExtent(p)) why.push_back("extent >= 2^31");
  if (p.m > kSplitKMaxM)
    why.push_back("m = " + Str(p.m) + " > " + Str(kSplitKMaxM));
  if (p.n % 4)
    why.push_back("n = " + Str(p.n) +
                  " is not a multiple of 4 (float32 partials)");
  for (int o : {kA, kB}) {
    Reasons bad = WindowAlignment(p, p.op[o], p.in_dtype);
    if (!bad.empty()) why.push_back(std::string(o == kA ? "a" : "b") +
                                    ": " + Join(bad));
  }
  if (dev != nullptr && !CcReason(*dev).empty())
    why.push_back(CcReason(*dev));
  return why;
}

std::string SlicesError(const GemmProblem& p, int64_t s) {
  return "split_k_slices=" + Str(s) + ": k = " + Str(p.k) +
         " does not split into " + Str(s) +
         " equal slices of a multiple of 16 bytes";
}

// The slices of a call split-K can run.  The direct kernel: the most whose
// CTAs (output tiles x slices) fit one wave of SMs, e.g. m = 16,
// n = k = 4096: 32 tiles of 128x128 -> 4.  The ptr-array slices: the
// fewest that bring the slice tiles to SplitKTargetCtas (fewer slices =
// less partial traffic), else the most allowed.
int64_t ChooseSplitK(const GemmProblem& p,
                     const std::vector<int64_t>& cands, bool direct,
                     int sms) {
  if (p.opts.split_k_slices > 0) return p.opts.split_k_slices;
  if (direct) {
    const int64_t tiles =
        Tiles(p, {kernels::kDirectSplitKTileM, kernels::kDirectSplitKTileN}) *
        p.batch;
    int64_t best = 0;
    for (int64_t s : cands)
      if (tiles * s <= sms) best = s;
    return best ? best : cands.front();
  }
  const int64_t tiles = Tiles(p, kSplitKTile) * p.batch;
  for (int64_t s : cands)
    if (tiles * s >= SplitKTargetCtas(sms)) return s;
  return cands.back();
}

GemmProblem LayoutProblem(const GemmProblem& p, Path path,
                          int64_t split_k) {
  GemmProblem q = p;
  q.path = path;
  q.split_k = split_k;
  return q;
}

}  // namespace planner_rules
}  // namespace jax_dynoff
