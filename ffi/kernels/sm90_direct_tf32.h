// The direct float32 kernels: x @ W at default precision (TF32 wgmma,
// float32 accumulation) with A row-major (m x k) and B row-major (k x n),
// one launch, windows located on the device as for the 16-bit direct
// kernels (kernels/sm90_direct.h).
//
// Why a kernel of its own: wgmma reads 32-bit operands from shared memory
// K-major only, and a row-major B is MN-major, so the ptr-array TF32
// kernels (kernels/sm90_tf32.h) run after a staging kernel that copies B
// K-major into the workspace, a pass per call that NT (nothing staged)
// does not pay and that kept NN behind cuBLAS (docs/design.md, float32).
// CUTLASS 4.2's register-sourced
// mainloop (MainloopSm90TmaGmmaRmemAWarpSpecialized) reads an MN-major A
// through registers instead: the warp groups copy their A tile from
// shared memory into wgmma's register fragments, which transposes it on
// the way, and only B is read by wgmma from shared memory.  Its builder
// refuses the ptr-array schedules, so it serves the direct (non-array)
// kernels only.
//
// The product is computed transposed, D^T = B^T A^T, as a GEMM of
// M' = n, N' = m: its A' is B^T (B as stored: MN-major, into registers),
// its B' is A^T (A as stored: K-major, read by wgmma from shared memory),
// and its D' (and C') an n x m column-major matrix, which is the row-major
// D (C) window itself.  CUTLASS's builder would swap A and B itself for A
// K-major and B MN-major (is_swapAB: its collective exchanges the operands
// inside to_underlying_arguments and the kernel swaps M and N); stated
// here instead, no swap happens inside CUTLASS, so DirectMainloop builds
// its descriptors from ptr_A / ptr_B as they are (the bfloat16 NT / TN
// kernels' TA / TB handling: A' stored k x n, B' stored m x k), and the
// epilogue is the same n x m column-major one in both forms
// (WindowEpilogue's kTransposed).
//
// The rules are the direct kernels' (ffi/planner.cc DirectChoice), with a
// K tile of 32 elements (128 bytes, the widest shared-memory swizzle) and
// B read in place, hence aligned.  Compiled for sm_90a only.
#ifndef JAX_DYNOFF_KERNELS_SM90_DIRECT_TF32_H_
#define JAX_DYNOFF_KERNELS_SM90_DIRECT_TF32_H_

#include <string>

#include "kernels/sm90_direct.h"

namespace jax_dynoff {
namespace kernels {

// Tile shapes are (n, m, k) of the transposed problem.  The output tiles
// are the ptr-array TF32 tiles' (256 x 128 and 128 x 128 of D), so the
// planner's direct rules (kDirectTileShapes, tile m x n) and its wave
// model hold for them unchanged.

// The large path: 256 (m) x 128 (n) of D, cooperative: each consumer warp
// group a 64 (n) x 256 (m) slab, so every wgmma is m64n256k8 (the least
// shared-memory traffic per MAC: wgmma reads only B' there, A' comes from
// registers); cuBLAS's TF32 kernel at these sizes has the same tile
// (sm90_xmma_gemm_f32f32_tf32f32_f32_nn_n_tilesize128x256x32).  An
// epilogue tile of 128 x 16 instead of CUTLASS's 128 x 32: its four
// float32 stages of C then take 32 KB instead of 64, which leaves the
// mainloop 4 stages instead of 3, closer to cuBLAS TF32 at every size
// swept (benchmarks/sm90_tiles/tf32_sweep; the figures in docs/design.md).
// No cluster: the CTA pair along n (sharing A's tile) was slower with the
// same 4 stages, along m slower still.
struct Sm90DirectTf32LargeConfig {
  using KernelSchedule = cutlass::gemm::KernelTmaWarpSpecializedCooperative;
  using EpilogueSchedule = cutlass::epilogue::TmaWarpSpecializedCooperative;
  using TileShape = cute::Shape<cute::_128, cute::_256, cute::_32>;
  using ClusterShape = cute::Shape<cute::_1, cute::_1, cute::_1>;
  using EpilogueTile = cute::Shape<cute::_128, cute::_16>;
};

// The medium path: 128 x 128 ping-pong (one warp group's epilogue hides
// behind the other's MMA), as the ptr-array medium tile.
struct Sm90DirectTf32MediumConfig {
  using KernelSchedule = cutlass::gemm::KernelTmaWarpSpecializedPingpong;
  using EpilogueSchedule = cutlass::epilogue::TmaWarpSpecialized;
  using TileShape = cute::Shape<cute::_128, cute::_128, cute::_32>;
  using ClusterShape = cute::Shape<cute::_1, cute::_1, cute::_1>;
  using EpilogueTile = cutlass::epilogue::collective::EpilogueTileAuto;
};

template <typename Config>
struct Sm90DirectTf32NN {
  using CM = cutlass::layout::ColumnMajor;
  static constexpr int kAlign = 4;  // 16 bytes of float32

  // D' = D^T, n x m column-major: the row-major D window.
  using CollectiveEpilogue = WindowEpilogue<
      typename cutlass::epilogue::collective::CollectiveBuilder<
          cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp,
          typename Config::TileShape, typename Config::ClusterShape,
          typename Config::EpilogueTile, float, float, float, CM, kAlign,
          float, CM, kAlign, typename Config::EpilogueSchedule>::CollectiveOp,
      /*kTransposed=*/true>;

  // A' = B^T: (n, k) with n contiguous, CUTLASS's column-major A, which the
  // builder sends to registers (is_use_rmem_A: 32-bit and not both
  // K-major).  B' = A^T: (m, k) with k contiguous, its column-major
  // (K-major) B.
  using BuiltMainloop =
      typename cutlass::gemm::collective::CollectiveBuilder<
          cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, float, CM,
          kAlign, float, CM, kAlign, float, typename Config::TileShape,
          typename Config::ClusterShape,
          cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(
              sizeof(typename CollectiveEpilogue::SharedStorage))>,
          typename Config::KernelSchedule>::CollectiveOp;
  static_assert(
      std::is_same_v<typename BuiltMainloop::DispatchPolicy,
                     cutlass::gemm::MainloopSm90TmaGmmaRmemAWarpSpecialized<
                         BuiltMainloop::DispatchPolicy::Stages,
                         typename Config::ClusterShape,
                         typename Config::KernelSchedule>> &&
          !BuiltMainloop::SwapAB && !BuiltMainloop::TransposeB,
      "expected CUTLASS's register-sourced mainloop, A' in registers, "
      "operands not swapped");
  // A' is B's window as stored (k x n: TA), B' is A's (m x k: TB).
  using CollectiveMainloop = DirectMainloop<BuiltMainloop, true, true>;
  // The mainloop's pipeline stages: what shared memory leaves beside the
  // epilogue's (the sweep prints them).
  static constexpr int kStages = BuiltMainloop::DispatchPolicy::Stages;

  using GemmKernel = cutlass::gemm::kernel::GemmUniversal<
      cute::Shape<int, int, int, int>, CollectiveMainloop, CollectiveEpilogue>;
  using Gemm = cutlass::gemm::device::GemmUniversalAdapter<GemmKernel>;

  // A' = B's window (k x n as stored), B' = A's: D^T = B^T A^T.
  static typename Gemm::Arguments Args(const DirectLaunch& l) {
    return DirectArgs<Gemm, typename Config::TileShape, true>(l);
  }

  static size_t Workspace(const DirectLaunch& l) {
    return Gemm::get_workspace_size(Args(l));
  }

  static std::string Run(const DirectLaunch& l) {
    return RunSm90Gemm<Gemm>("direct SM90 TF32 GEMM", Args(l), l.workspace,
                             l.stream, l.device);
  }

  static std::string Prepare(const DirectLaunch& l, PreparedLaunch* out) {
    return PrepareSm90Gemm<Gemm>("direct SM90 TF32 GEMM", Args(l),
                                 l.workspace, l.stream, l.device, out);
  }
};

}  // namespace kernels
}  // namespace jax_dynoff

// One instantiation per translation unit:
//   JAX_DYNOFF_SM90_DIRECT_TF32_KERNEL(kSm90DirectLargeF32NN,
//                                      Sm90DirectTf32LargeConfig)
#define JAX_DYNOFF_SM90_DIRECT_TF32_KERNEL(NAME, CONFIG)                     \
  namespace jax_dynoff {                                                     \
  namespace kernels {                                                        \
  using NAME##_t = Sm90DirectTf32NN<CONFIG>;                                 \
  extern const DirectKernelEntry NAME = {#NAME, &NAME##_t::Workspace,        \
                                         &NAME##_t::Run, &NAME##_t::Prepare};\
  }                                                                          \
  }

#endif  // JAX_DYNOFF_KERNELS_SM90_DIRECT_TF32_H_
