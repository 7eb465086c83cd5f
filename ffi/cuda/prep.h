// The small kernels around the CUTLASS GEMMs (ffi/cuda/prep_kernels.cu):
// per-batch-item pointer arrays for the ptr-array kernels, copies of C
// windows that overlap D partly, the k == 0 epilogue and the split-K
// reduction; their parameters, built on the host by the runners
// (ffi/cuda/runners.cu).  Every start is read and clamped on the device.
#ifndef JAX_DYNOFF_CUDA_PREP_H_
#define JAX_DYNOFF_CUDA_PREP_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "gemm_problem.h"
#include "kernels/launch.h"

namespace jax_dynoff {
namespace cuda {

// One call's problem, its buffers and workspace regions, as the device
// kernels read them.
struct PrepParams {
  GemmProblem p;
  SlotRef slots[kMaxSlots];  // the dynamic starts (ResolveCallSlots)
  const char* base[kNumOperands];  // bytes; C's is D's for kFromD / kNone
  int elt[kNumOperands];           // element bytes
  const void** ptrs;               // WorkspaceLayout::ptr_count entries
  char* scratch;
  int64_t scratch_item;
  bool c_read;  // C present and beta != 0
  // Split-K (SplitPointerKernel only).
  int64_t slices;          // K slices per batch item
  int64_t a_slice_bytes;   // address step between consecutive slices of A
  int64_t b_slice_bytes;   // ... of B
  char* partials;
  int64_t partial_item;    // bytes per partial
  // The grouped path (LaunchGroupedPointers only): per item, the problem
  // shape (int32 m, n, k) and the A, B, C, D strides (int64 each).
  int32_t* shapes;
  int64_t* strides;
};


// One batch item whose C cannot overlap D (the common case): the host
// reduces the problem to "address of operand o = base[o] + sum of clamped
// dynamic starts x stride in bytes", one term per dynamic start, so the
// device work is one load and one multiply per start in parallel.  The
// general PointerKernel walks the whole GemmProblem from one thread, and
// that serial walk, not the size of its parameter block, is its cost
// (ncu; git history of docs/notes.md).
constexpr int kMaxTerms = kNumOperands * kMaxRank;

struct Prep1Params {
  struct Term {
    kernels::StartTerm start;  // scale: the dim's stride in bytes
    int32_t operand;
  };
  const char* base[kNumOperands];  // array base + static starts, bytes
  Term term[kMaxTerms];
  int terms;
  bool c_read;  // C is read (else the C pointer is D's, never read)
  const void** ptrs;
};

// Split-K reduction: for every batch item t,
//   D_t = cast(alpha * sum_s partial[t * slices + s] + beta * C_t),
// one pass, each thread owning 4 consecutive columns of one row (n % 4 == 0):
// float4 loads of the partials (summed in slice order: deterministic), C
// read before D is written by the same thread (same window: in place is
// safe; a partly overlapping C was copied to scratch first), vector stores
// when D's address allows them.  grid.y strides over batch items.
struct ReduceParams {
  const char* partials;
  int64_t partial_item;  // bytes
  int64_t slices;
  int64_t m, n, batch, ldc, ldd;
  const void* const* c;  // batch entries
  const void* const* d;  // batch entries
  float alpha, beta;
  bool c_read;
};


// Dynamic start i of operand `op`, its clamped value to be scaled by
// `scale` (one-item calls only: item 0 of its slot).
inline kernels::StartTerm DynamicStart(const PrepParams& P,
                                       const OperandDesc& op, int i,
                                       int64_t scale) {
  kernels::StartTerm t;
  t.slot = P.slots[op.start_arg[i]];
  t.dim = op.dims[i];
  t.win = op.win[i];
  t.scale = scale;
  return t;
}

// The launches (each returns cudaGetLastError after enqueuing):
// (1) the pointer arrays: the split-K slices' (`split`), else one item's
// terms (PointerKernel1) where its C cannot overlap D, else every item's;
cudaError_t LaunchPointers(const PrepParams& P, bool split,
                           cudaStream_t stream);
// (1g) the grouped path's pointer arrays, problem shapes and strides, and
// zeros in every item's valid part of D that its product does not cover
// (valid rows or columns of D past A's or B's, or no valid K); where D is
// a fresh buffer (PlannedKernel::fresh_out), zeros in its rows that no
// item's window covers too;
cudaError_t LaunchGroupedPointers(const PrepParams& P, cudaStream_t stream);
// (2) the C windows that overlap D partly, into the workspace's scratch;
cudaError_t LaunchCopyC(const PrepParams& P, cudaStream_t stream);
// (3a) k == 0: D = cast(beta * C) through the pointer arrays;
cudaError_t LaunchScale(const PrepParams& P, int64_t ldc, int64_t ldd,
                        float beta, cudaStream_t stream);
// (4) the split-K reduction of the float32 partials into D.
cudaError_t LaunchSplitKReduce(const ReduceParams& R, DType out,
                               cudaStream_t stream);

}  // namespace cuda
}  // namespace jax_dynoff

#endif  // JAX_DYNOFF_CUDA_PREP_H_
