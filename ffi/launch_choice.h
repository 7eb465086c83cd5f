// The choice function: which compiled kernel a call launches, from its
// plan and what only the run can tell (the device, whether the build has
// its sm_90a kernels, the buffers' alignment).  Plain C++17, no CUDA: the
// CUDA handler calls it at its instantiate stage for every case the run can
// present (ffi/cuda/handler.cu), so the execute stage only picks the case,
// patches addresses and launches; the module exposes it to the CPU tests.
//
// The rule (the planned path is a request, the fallbacks always fit the
// planned workspace):
// - sm90_grouped runs its grouped kernel or fails: nothing else takes
//   valid extents.
// - An SM90 path runs an SM90 kernel only on a compute capability 9.0
//   device, in a build with sm_90a, for k > 0, with KernelOptions.sm90 (and
//   tf32, for float32) on; else the generic kernel, or CUTLASS 2.x TF32 for
//   float32 at default precision.
// - sm90_skinny runs the skinny kernel of its planned tile (wide or
//   narrow) where KernelOptions.skinny and every base is aligned, else it
//   is the tiny tile (its direct twin included).
// - sm90_split_k runs its planned direct kernel (KernelOptions.direct, every
//   base aligned), else the ptr-array slices and the reduction (A, B and
//   workspace bases aligned: C and D are touched by the reduction only),
//   else the generic kernel, unsplit.
// - Another SM90 tile runs its planned direct kernel where
//   KernelOptions.direct and every base is aligned, else its ptr-array
//   kernel (every base aligned), else the generic one.  float32 without the
//   direct kernel and with an MN-major operand the plan did not stage runs
//   CUTLASS 2.x TF32 instead (any layout, in place).
#ifndef JAX_DYNOFF_LAUNCH_CHOICE_H_
#define JAX_DYNOFF_LAUNCH_CHOICE_H_

#include <string>

#include "gemm_problem.h"

namespace jax_dynoff {

// What only the run can tell.
struct RunFacts {
  bool sm90_device = false;  // compute capability 9.0
  bool sm90_built = false;   // the build has its sm_90a kernels
  // The bases of A, B, C (D's where C is read from D's array or absent),
  // D and the workspace are 16-byte aligned ...
  bool bases_aligned = false;
  // ... or those of A, B and the workspace (split-K's ptr-array slices).
  bool ab_ws_aligned = false;
};

// The alignment cases a call can present, as RunFacts' two flags: every
// base aligned, only A's, B's and the workspace's, or neither.
inline constexpr int kNumAlignmentCases = 3;
inline RunFacts WithAlignmentCase(RunFacts f, int alignment_case) {
  f.bases_aligned = alignment_case == 0;
  f.ab_ws_aligned = alignment_case <= 1;
  return f;
}
inline int AlignmentCase(bool bases_aligned, bool ab_ws_aligned) {
  return bases_aligned ? 0 : ab_ws_aligned ? 1 : 2;
}

// How the kernel is launched (ffi/cuda/runners.h has one runner each).
enum class LaunchKind : int {
  kPtrArray = 0,  // pointer kernel, then one GEMM over pointer arrays
                  // (CUTLASS 2.x generic / TF32, SM90 ptr-array, split-K
                  // slices + reduction)
  kDirect,        // one launch, windows located on the device
  kSkinny,        // one launch of the skinny kernel
  kGrouped,       // pointer kernel, then one grouped launch
};

struct LaunchChoice {
  std::string error;  // non-empty: the call cannot run (grouped only)
  LaunchKind kind = LaunchKind::kPtrArray;
  int line = -1;      // the kernel's line of the catalogue (kCatalogue)
  // CTAs along K per output tile (direct split-K and cluster-K, skinny),
  // or K slices of the ptr-array split-K kernel; 1 otherwise.
  int split = 1;
  bool slices = false;  // ptr-array split-K: S slices, then the reduction
  bool staged = false;  // float32 SM90 ptr-array: the staged operands
  // The CUTLASS 2.x kernels index batch items with grid z (<= 65535); the
  // SM90 ones take the whole batch.
  bool grid_z_batch = false;
  int cluster_k_tile_n = 0;    // the cluster-K direct tile's width
  bool deterministic = true;   // direct split-K: partials in a fixed order
};

// The kernel `p` (decoded, plan included, CheckPlanned passed) launches
// under `f`.
LaunchChoice ChooseLaunch(const GemmProblem& p, const RunFacts& f);

// The catalogue line's kernel name ("" for none), for logs and tests.
const char* LineName(int line);

}  // namespace jax_dynoff

#endif  // JAX_DYNOFF_LAUNCH_CHOICE_H_
