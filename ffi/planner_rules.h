// The planner's rules (ffi/planner_rules.cc): why each family of kernels
// can or cannot run a call, which direct tile and split-K a call takes,
// and the helpers the planner (planner.cc) shares with them.  Plain C++,
// no CUDA; every reason string here is what jax_dynoff/plan.py's
// *_reasons and explain return.
#ifndef JAX_DYNOFF_PLANNER_RULES_H_
#define JAX_DYNOFF_PLANNER_RULES_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "planner.h"

namespace jax_dynoff {
namespace planner_rules {

// Split-K (path kSm90SplitK): the ptr-array slices' tile, and the least K
// a slice may hold.
inline constexpr TileMN kSplitKTile{64, 128};  // Sm90SplitKConfig (ptr-array)
inline constexpr int64_t kSplitKMinSliceK = 128;  // two 64-deep k-tiles

// Per operand (a, b, d, then c where it is read), the reasons TMA alignment
// is not proven; only operands with reasons are listed.  A C copied into
// the workspace (c_mode kFromD) keeps C's leading dimension at a 256-byte
// aligned base: the same proof covers it.  A float32 operand the SM90
// kernels read from its staged copy (Sm90Staging) needs no proof.
std::vector<std::pair<std::string, Reasons>> AlignmentProof(
                                                            const GemmProblem& p);

int64_t CeilDiv(int64_t a, int64_t b);

// The slices of a call split-K can run.  The direct kernel: the most whose
// CTAs (output tiles x slices) fit one wave of SMs, e.g. m = 16,
// n = k = 4096: 32 tiles of 128x128 -> 4.  The ptr-array slices: the
// fewest that bring the slice tiles to SplitKTargetCtas (fewer slices =
// less partial traffic), else the most allowed; KernelOptions'
// split_k_slices where it forces a count.
int64_t ChooseSplitK(const GemmProblem& p, const std::vector<int64_t>& cands,
                     bool direct, int sms);

// (the direct tile for a call planned for `planned`, kNone for the
// ptr-array kernel; the reasons for kNone).  Each ptr-array tile has its
// direct twin; the large path has two: the wide tile (128x256) where its
// tiles fit one wave of SMs (its m64n256 wgmmas make each tile faster; with
// several waves the large tile was as fast or faster), else the large one;
// either one where only its store rule holds.  The tiny path has two as
// well: its own tile, and the cluster-K tile (below).
// KernelOptions.direct_tile (p.opts.direct_tile) forces one of the path's
// tiles where its rules hold.
std::pair<DirectTile, Reasons> DirectChoice(const GemmProblem& p, Path planned,
                                            int sms);

// Why a call cannot run as one grouped launch: the grouped kernel reads
// every item's problem shape (the valid extents: tiles past them are never
// scheduled) and operand addresses from the workspace, where the pointer
// kernel wrote them.  It needs a kernel built for the dtypes and
// transposes, TMA alignment (proved for every value of the starts), no C
// (its epilogue has no source), and an SM90 device.  `dev` null: the
// static rules alone.
Reasons GroupedReasons(const GemmProblem& p, const DeviceFacts* dev);

// Why a call planned for `path` keeps its `out` operand rather than
// getting D as a fresh buffer (PlannedKernel::fresh_out; empty: fresh).
// A fresh D is zeroed outside the windows by the grouped pointer kernel
// (cuda/prep_kernels.cu), which marks the rows every item's window covers:
// so the call must say its out is all zeros (out_zeros), run as one
// grouped launch, and have windows that are full-width row ranges of one
// shared 2-D D (no batch dim carried, valid columns static and the whole
// width), and the handler must launch something (no empty problem).
Reasons FreshOutReasons(const GemmProblem& p, Path path);

std::string Join(const Reasons& r);

GemmProblem LayoutProblem(const GemmProblem& p, Path path, int64_t split_k = 1);

Reasons SkinnyReasons(const GemmProblem& p, const DeviceFacts* dev);

// K splits into `s` equal slices whose addresses stay 16-byte aligned.
bool SliceOk(const GemmProblem& p, int64_t s);

std::string SlicesError(const GemmProblem& p, int64_t s);

// Why no SM90 path can run the call (empty: one can).  `dev` null: the
// static rules alone.
Reasons Sm90Reasons(const GemmProblem& p, const DeviceFacts* dev);

// The slice counts split-K may pick, ascending: equal slices of a multiple
// of 16 bytes (CUTLASS's ArrayProblemShape has one K for all items, and
// every slice's A / B address must stay TMA-aligned) and of at least
// kSplitKMinSliceK elements, whose float32 partials (written once, read
// once) at most double the bytes of B: 2 * S * m * n * 4 <= k * n * elt.
std::vector<int64_t> SplitKCandidates(const GemmProblem& p);

// Split-K's static rules: kernels for 16-bit NN inputs, skinny m, float32
// partials with ld = n a multiple of 16 bytes, A and B aligned as for
// every SM90 path (C and D are only touched by the reduction kernel).
Reasons SplitKStaticReasons(const GemmProblem& p, const DeviceFacts* dev);

// Split until the slice tiles fill about two waves (ceil(1.5) = 2) of SMs.
int64_t SplitKTargetCtas(int sms);

std::string Str(int64_t v);

int64_t Tiles(const GemmProblem& p, TileMN t);

}  // namespace planner_rules
}  // namespace jax_dynoff

#endif  // JAX_DYNOFF_PLANNER_RULES_H_
