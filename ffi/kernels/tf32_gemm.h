// The TF32 path: float32 GEMMs at default precision on tensor cores, as
// jnp.dot does on GPU.  CUTLASS 2.x GemmUniversal in kArray mode (operand
// addresses from the handler's device pointer arrays, like the generic
// path), SM80 tensor-op multistage mainloop: runs on every GPU >= sm_80,
// Hopper included (mma.sync, not wgmma: about half of Hopper's TF32 peak,
// but far faster than the SIMT kernel, with any alignment).
//
// Why this configuration:
//  - Alignment 1 (4 bytes): cp.async moves 4-byte chunks, so windows at any
//    offset and any leading dimension run here (CUTLASS's own "align1" tf32
//    kernels); the plan never needs an alignment proof for float32.
//  - 128x128x16 threadblock tile, 64x64x16 warps, 4 stages (one of the tf32
//    configurations CUTLASS's generator emits for sm_80); m16n8k8 TF32 MMA.
//  - The operand layouts are compile-time (the tensor-op shared-memory
//    layouts differ for K-major and MN-major operands): one kernel per
//    transpose combination.
//  - float inputs are rounded to TF32 by the MMA (10-bit mantissa), the
//    accumulation is float32.  precision=HIGHEST never comes here (plan.py
//    sends it to the exact SIMT kernel).
#ifndef JAX_DYNOFF_KERNELS_TF32_GEMM_H_
#define JAX_DYNOFF_KERNELS_TF32_GEMM_H_

#include <string>

#include "cutlass/cutlass.h"
#include "cutlass/epilogue/thread/linear_combination.h"
#include "cutlass/gemm/device/gemm_universal.h"
#include "cutlass/gemm/threadblock/threadblock_swizzle.h"
#include "cutlass/layout/matrix.h"
#include "kernels/launch.h"
#include "kernels/run_gemm.h"

namespace jax_dynoff {
namespace kernels {

template <typename LayoutA, typename LayoutB>
struct Tf32Gemm {
  using Gemm = cutlass::gemm::device::GemmUniversal<
      float, LayoutA, float, LayoutB, float, cutlass::layout::RowMajor,
      float, cutlass::arch::OpClassTensorOp, cutlass::arch::Sm80,
      cutlass::gemm::GemmShape<128, 128, 16>,
      cutlass::gemm::GemmShape<64, 64, 16>,
      cutlass::gemm::GemmShape<16, 8, 8>,
      cutlass::epilogue::thread::LinearCombination<float, 1, float, float>,
      cutlass::gemm::threadblock::GemmIdentityThreadblockSwizzle<1>,
      4,   // stages
      1,   // alignment A (elements)
      1,   // alignment B (elements)
      cutlass::arch::OpMultiplyAdd>;

  static size_t Workspace(const GemmLaunch&) { return 0; }

  static std::string Run(const GemmLaunch& l) {
    // Row-major A (m x k) has ld = a_row; column-major A has ld = a_col.
    const int64_t lda =
        std::is_same_v<LayoutA, cutlass::layout::RowMajor> ? l.a_row : l.a_col;
    const int64_t ldb =
        std::is_same_v<LayoutB, cutlass::layout::RowMajor> ? l.b_row : l.b_col;
    typename Gemm::Arguments args(
        cutlass::gemm::GemmUniversalMode::kArray,
        cutlass::gemm::GemmCoord(l.m, l.n, l.k), l.batch, {l.alpha, l.beta},
        static_cast<const void*>(l.ptr_a), static_cast<const void*>(l.ptr_b),
        static_cast<const void*>(l.ptr_c),
        static_cast<void*>(const_cast<void**>(l.ptr_d)),
        0, 0, 0, 0,  // batch strides: unused in kArray mode
        lda, ldb, l.ldc, l.ldd);
    return RunGemm<Gemm>("TF32 GEMM", args, nullptr, l.stream);
  }
};

}  // namespace kernels
}  // namespace jax_dynoff

// One line per kernel, which the build generates from its line in the
// kernel catalogue (ffi/kernels/catalogue.py):
//   JAX_DYNOFF_TF32_KERNEL(kTf32NN, cutlass::layout::RowMajor,
//                          cutlass::layout::RowMajor)
#define JAX_DYNOFF_TF32_KERNEL(NAME, LA, LB)                                 \
  namespace jax_dynoff {                                                     \
  namespace kernels {                                                        \
  extern const KernelEntry NAME = {#NAME, &Tf32Gemm<LA, LB>::Workspace,      \
                                   &Tf32Gemm<LA, LB>::Run};                  \
  }                                                                          \
  }

#endif  // JAX_DYNOFF_KERNELS_TF32_GEMM_H_
