// The generic path: CUTLASS 2.x GemmUniversal in kArray mode (operand
// addresses from device pointer arrays, one batch item per grid z index).
//
// Why this configuration:
//  - SIMT (CUDA cores), two-stage MmaPipelined mainloop with ordinary loads:
//    the only CUTLASS 2.x mainloop that accepts 16-bit operands at an
//    alignment of one element (cp.async, used by the SM80 multistage and
//    tensor-op mainloops, moves 4, 8 or 16 bytes at a time).  Products are
//    exact in float (multiply_add converts the operands to the accumulator
//    type first), accumulation is float: full precision for every dtype,
//    float32 included (so Precision::kHighest holds on this path).
//  - A and B are AffineRank2 layouts, whose row and column strides are both
//    run-time values: one kernel per dtype pair serves all four transpose
//    combinations.  The "RowMajor" flavour only tells CUTLASS which stride is
//    usually the small one (loads are coalesced for A = row-major m x k and
//    B = row-major k x n, i.e. no transposes).
//  - C and D are plain row-major with alignment 1.
// This is the fallback (any alignment, any GPU >= sm_80), not the fast path.
#ifndef JAX_DYNOFF_KERNELS_GENERIC_GEMM_H_
#define JAX_DYNOFF_KERNELS_GENERIC_GEMM_H_

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

template <typename ElementIn, typename ElementOut>
struct GenericGemm {
  using Gemm = cutlass::gemm::device::GemmUniversal<
      ElementIn, cutlass::layout::AffineRank2RowMajor,   // A, alignment 1
      ElementIn, cutlass::layout::AffineRank2RowMajor,   // B, alignment 1
      ElementOut, cutlass::layout::RowMajor,             // C and D
      float,                                             // accumulator
      cutlass::arch::OpClassSimt,
      cutlass::arch::Sm70,  // not Sm80: Sm80 SIMT is the cp.async multistage
      cutlass::gemm::GemmShape<128, 128, 8>,  // threadblock tile
      cutlass::gemm::GemmShape<32, 64, 8>,    // warp tile (8 warps)
      cutlass::gemm::GemmShape<1, 1, 1>,      // SIMT instruction
      cutlass::epilogue::thread::LinearCombination<ElementOut, 1, float,
                                                   float>,
      cutlass::gemm::threadblock::GemmIdentityThreadblockSwizzle<1>,
      2,   // stages: MmaPipelined
      1,   // alignment A (elements)
      1>;  // alignment B (elements)

  static size_t Workspace(const GemmLaunch&) { return 0; }

  static std::string Run(const GemmLaunch& l) {
    using LayoutA = cutlass::layout::AffineRank2RowMajor;
    typename Gemm::Arguments args(
        cutlass::gemm::GemmUniversalMode::kArray,
        cutlass::gemm::GemmCoord(l.m, l.n, l.k), l.batch,
        {l.alpha, l.beta},
        static_cast<const void*>(l.ptr_a), static_cast<const void*>(l.ptr_b),
        static_cast<const void*>(l.ptr_c),
        static_cast<void*>(const_cast<void**>(l.ptr_d)),
        0, 0, 0, 0,  // batch strides: unused in kArray mode
        LayoutA(l.a_row, l.a_col).stride(), LayoutA(l.b_row, l.b_col).stride(),
        cutlass::layout::RowMajor(l.ldc).stride(),
        cutlass::layout::RowMajor(l.ldd).stride());
    return RunGemm<Gemm>("generic GEMM", args, nullptr, l.stream);
  }
};

}  // namespace kernels
}  // namespace jax_dynoff

// One instantiation per translation unit:
//   JAX_DYNOFF_GENERIC_KERNEL(kGenericBf16F32, cutlass::bfloat16_t, float)
#define JAX_DYNOFF_GENERIC_KERNEL(NAME, IN, OUT)                             \
  namespace jax_dynoff {                                                     \
  namespace kernels {                                                        \
  extern const KernelEntry NAME = {#NAME, &GenericGemm<IN, OUT>::Workspace,         \
                            &GenericGemm<IN, OUT>::Run};                     \
  }                                                                          \
  }

#endif  // JAX_DYNOFF_KERNELS_GENERIC_GEMM_H_
