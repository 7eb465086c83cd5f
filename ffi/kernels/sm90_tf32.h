// The SM90 TF32 kernels (float32 in, out and C; float32 accumulation) and
// the staging kernel in front of them: why they are built as they are, and
// the staging kernel's declarations, without CUTLASS (the configurations
// are in sm90_tf32_gemm.h, the kernels in the kernel catalogue,
// ffi/kernels/catalogue.py).
//
// Why the staging: wgmma reads 32-bit operands from shared memory K-major
// only.  CUTLASS 4.2's SM90 builder serves MN-major 32-bit operands only
// through its register-sourced (RS) mainloops (is_use_rmem_A: A from
// registers, operands swapped, or B transposed by a warp group), and the
// RS builder refuses the ptr-array schedules ("Only mixed input grouped RS
// GEMM is supported"), which every windowed and batched SM90 call here
// uses.  The layout identity (D^T = B^T A^T) swaps which operand plays A
// but not which dim is contiguous, so it makes no operand K-major.  So the
// ptr-array kernels are built for A K-major and B K-major alone (our "NT":
// A row-major m x k, B stored n x k), and a call whose operand is
// MN-major (A transposed, or B not transposed) has that operand copied
// K-major into the workspace first: one extra pass over that operand,
// which also takes any alignment and any window offset.  (The register-
// sourced non-array kernels read an MN-major operand in place, with the
// direct kernels' device-side window location: sm90_direct_tf32.h does so
// for NN calls whose windows suit it; TN, TT and the other NN calls pay
// the pass.)
//
// precision=HIGHEST (3xTF32): the staging kernel splits every element x of
// both operands into x_hi = tf32(x) and x_lo = tf32(x - x_hi) (round to
// nearest) and lays the K dim out three times, A' = [A_hi | A_lo | A_hi]
// (m x 3k) and B'^T = [B_hi | B_hi | B_lo] (n x 3k), so that one TF32 GEMM
// over K' = 3k sums A_hi B_hi + A_lo B_hi + A_hi B_lo: every product but
// A_lo B_lo (below 2^-22 relative), about float32's accuracy at three
// times the TF32 GEMM's work, on wgmma instead of the CUDA cores.  The
// staged values are exact in TF32, so wgmma's truncation of its 32-bit
// inputs drops nothing.
#ifndef JAX_DYNOFF_KERNELS_SM90_TF32_H_
#define JAX_DYNOFF_KERNELS_SM90_TF32_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/launch.h"

namespace jax_dynoff {
namespace kernels {

// One operand's staging: for every batch item t, the rows x k matrix whose
// element (r, p) sits at src[t] + r * row_stride + p * k_stride (elements)
// is written row-major (K-major) with leading dimension ld at
// dst + t * item_bytes, as `parts` copies of K (1: the values as they are;
// 3: the TF32 split, `lo_part` saying which copy holds the low part:
// 1 for A = [hi | lo | hi], 2 for B = [hi | hi | lo]), then zeros up to
// ld (parts * k rounded up to 4 elements: the GEMM's K, whose rows TMA
// reads in 16-byte units); dst_ptrs[t] gets each item's staged address
// (the GEMM's pointer array).
struct Tf32StageParams {
  const void* const* src = nullptr;
  void** dst_ptrs = nullptr;
  char* dst = nullptr;
  int64_t item_bytes = 0;
  int64_t rows = 0, k = 0, ld = 0;
  int64_t row_stride = 0, k_stride = 0;
  int64_t batch = 0;
  int parts = 1;
  int lo_part = 0;
};

// Enqueues the staging of one operand on `stream`; returns
// cudaGetLastError.
cudaError_t LaunchTf32Stage(const Tf32StageParams& s, cudaStream_t stream);

}  // namespace kernels
}  // namespace jax_dynoff

#endif  // JAX_DYNOFF_KERNELS_SM90_TF32_H_
