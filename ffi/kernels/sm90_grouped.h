// The grouped SM90 GEMM for ragged windows (after CUTLASS example 57): one
// launch over batch items whose problem shapes (m, n, k) live in device
// memory only, written by the handler's grouped pointer kernel
// (ffi/cuda/prep_kernels.cu) beside the items' operand addresses and
// strides.  The shapes are the items' valid extents, so the persistent
// scheduler never schedules a tile past them, and an item with no valid
// row gets no tile at all.  TMA reads and writes stop at each item's
// shape: inside its valid parts.
//
// Requirements (the planner's GroupedReasons): every address and leading
// dimension a multiple of 16 bytes, no C (the epilogue has no source).
// Compiled for sm_90a only.
#ifndef JAX_DYNOFF_KERNELS_SM90_GROUPED_H_
#define JAX_DYNOFF_KERNELS_SM90_GROUPED_H_

#include <string>
#include <type_traits>

#include "cute/tensor.hpp"
#include "cutlass/cutlass.h"
#include "cutlass/epilogue/collective/collective_builder.hpp"
#include "cutlass/gemm/collective/collective_builder.hpp"
#include "cutlass/gemm/device/gemm_universal_adapter.h"
#include "cutlass/gemm/dispatch_policy.hpp"
#include "cutlass/gemm/group_array_problem_shape.hpp"
#include "cutlass/gemm/kernel/gemm_universal.hpp"
#include "cutlass/kernel_hardware_info.h"
#include "kernels/launch.h"
#include "kernels/run_sm90_gemm.h"
#include "kernels/sm90_gemm.h"  // Sm90MediumConfig
#include "plan.h"  // kGroupedShapeBytes, kGroupedStrideBytes

namespace jax_dynoff {
namespace kernels {

// The grouped tiles (planner.h GroupedTile).  A ragged item's rows are
// padded to the tile's m (the scheduler rounds each item's tile count up;
// TMA zero-fills the rows past the item, but the MMAs still run), and a
// cluster along M would round them up to two tiles, so clusters span N.
//   medium: 128x128 ping-pong: every dtype and transpose built.
//   wide:   128x256 cooperative, no cluster (bfloat16 NN, planned where
//           built).  The fastest grouped tile on the bench's moe cases
//           (benchmarks/moe_tile_ab.py): 256x128 cooperative pads more
//           rows (a 256-row granule: 56% more rows where 128 pads 21% on
//           the 64-expert case), 64x256 ping-pong pads fewer but is a
//           slower tile.  Without the 1x2 cluster it is faster on every
//           moe case (benchmarks/sm90_tiles/grouped_sweep, the kernel
//           alone; docs/design.md): the pair's A multicast saves little
//           where the weights are the traffic, and a cluster's two CTAs
//           must start together.
using Sm90GroupedMediumConfig = Sm90MediumConfig;
struct Sm90GroupedWideConfig {
  using KernelSchedule =
      cutlass::gemm::KernelPtrArrayTmaWarpSpecializedCooperative;
  using EpilogueSchedule =
      cutlass::epilogue::PtrArrayTmaWarpSpecializedCooperative;
  using TileShape = cute::Shape<cute::_128, cute::_256, cute::_64>;
  using ClusterShape = cute::Shape<cute::_1, cute::_1, cute::_1>;
};

// Config: one of the grouped tiles above.  ElementOut: D's element (the
// input's, or float32 for preferred_element_type=float32).
template <typename Config, typename Element, typename ElementOut,
          typename LayoutA, typename LayoutB>
struct Sm90GroupedGemm {
  using LayoutC = cutlass::layout::RowMajor;
  using ProblemShape =
      cutlass::gemm::GroupProblemShape<cute::Shape<int, int, int>>;
  static constexpr int kAlign = 128 / cutlass::sizeof_bits<Element>::value;
  static constexpr int kAlignOut =
      128 / cutlass::sizeof_bits<ElementOut>::value;

  // C is void: a sourceless epilogue (D = alpha * acc).
  using CollectiveEpilogue =
      typename cutlass::epilogue::collective::CollectiveBuilder<
          cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp,
          typename Config::TileShape, typename Config::ClusterShape,
          cutlass::epilogue::collective::EpilogueTileAuto,
          float, float,
          void, LayoutC*, kAlignOut,         // C: none
          ElementOut, LayoutC*, kAlignOut,   // D
          typename Config::EpilogueSchedule>::CollectiveOp;

  using CollectiveMainloop =
      typename cutlass::gemm::collective::CollectiveBuilder<
          cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp,
          Element, LayoutA*, kAlign,
          Element, LayoutB*, kAlign,
          float,
          typename Config::TileShape, typename Config::ClusterShape,
          cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(
              sizeof(typename CollectiveEpilogue::SharedStorage))>,
          typename Config::KernelSchedule>::CollectiveOp;

  using GemmKernel = cutlass::gemm::kernel::GemmUniversal<
      ProblemShape, CollectiveMainloop, CollectiveEpilogue>;
  using Gemm = cutlass::gemm::device::GemmUniversalAdapter<GemmKernel>;

  // Per-item strides, as the pointer kernel writes them: one int64 each
  // (the leading dimension; the other strides are static).
  using StrideA = typename GemmKernel::InternalStrideA;
  using StrideB = typename GemmKernel::InternalStrideB;
  using StrideD = typename GemmKernel::InternalStrideD;
  using Shape = typename ProblemShape::UnderlyingProblemShape;
  static_assert(sizeof(Shape) == kGroupedShapeBytes, "problem shape layout");
  static_assert(sizeof(StrideA) == kGroupedStrideBytes &&
                    sizeof(StrideB) == kGroupedStrideBytes &&
                    sizeof(StrideD) == kGroupedStrideBytes,
                "one int64 per stride");

  static typename Gemm::Arguments Args(const GroupedLaunch& l) {
    cutlass::KernelHardwareInfo hw;
    hw.device_id = l.device;
    hw.sm_count = l.sm_count;
    using EA = typename Gemm::ElementA;
    using EB = typename Gemm::ElementB;
    using ED = typename Gemm::EpilogueOutputOp::ElementOutput;
    typename Gemm::Arguments args{
        cutlass::gemm::GemmUniversalMode::kGrouped,
        // The shapes on the device only: the scheduler reads them there
        // (no host copy: they depend on the valid extents).
        {l.groups, static_cast<Shape*>(const_cast<void*>(l.shapes)), nullptr},
        {reinterpret_cast<const EA**>(const_cast<const void**>(l.ptr_a)),
         static_cast<StrideA*>(const_cast<void*>(l.stride_a)),
         reinterpret_cast<const EB**>(const_cast<const void**>(l.ptr_b)),
         static_cast<StrideB*>(const_cast<void*>(l.stride_b))},
        {{},
         nullptr,  // C: none
         static_cast<StrideD*>(const_cast<void*>(l.stride_c)),
         reinterpret_cast<ED**>(const_cast<void**>(l.ptr_d)),
         static_cast<StrideD*>(const_cast<void*>(l.stride_d))},
        hw};
    auto& fusion = args.epilogue.thread;
    fusion.alpha = l.alpha;
    fusion.beta = 0.f;
    // The scheduler's defaults: no swizzle (without the shapes on the host
    // its grid is one row of CTAs, which CUTLASS 4.2 never swizzles:
    // tile_scheduler_params.h get_log_swizzle_size) and raster along M
    // (the group scheduler's default, no heuristic): consecutive clusters
    // take the next rows of one item under the same columns of B, so an
    // item's weight tile is read from DRAM once while its rows pass.
    return args;
  }

  static size_t Workspace(const GroupedLaunch& l) {
    return Gemm::get_workspace_size(Args(l));
  }

  static std::string Prepare(const GroupedLaunch& l, PreparedLaunch* out) {
    return PrepareSm90Gemm<Gemm>("SM90 grouped GEMM", Args(l), l.workspace,
                                 l.stream, l.device, out);
  }

  static std::string Run(const GroupedLaunch& l) {
    return RunSm90Gemm<Gemm>("SM90 grouped GEMM", Args(l), l.workspace,
                             l.stream, l.device);
  }
};

}  // namespace kernels
}  // namespace jax_dynoff

// One instantiation per translation unit:
//   JAX_DYNOFF_SM90_GROUPED_KERNEL_TILE(kSm90GroupedBf16NN,
//                                       Sm90GroupedMediumConfig,
//                                       cutlass::bfloat16_t,
//                                       cutlass::bfloat16_t,
//                                       cutlass::layout::RowMajor,
//                                       cutlass::layout::RowMajor)
#define JAX_DYNOFF_SM90_GROUPED_KERNEL_TILE(NAME, CONFIG, IN, OUT, LA, LB)   \
  namespace jax_dynoff {                                                     \
  namespace kernels {                                                        \
  using NAME##_t = Sm90GroupedGemm<CONFIG, IN, OUT, LA, LB>;                 \
  extern const GroupedKernelEntry NAME = {                                   \
      #NAME, &NAME##_t::Workspace, &NAME##_t::Run, &NAME##_t::Prepare};      \
  }                                                                          \
  }

#endif  // JAX_DYNOFF_KERNELS_SM90_GROUPED_H_
