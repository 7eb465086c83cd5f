// The grouped SM90 GEMM for ragged windows (after CUTLASS example 57): one
// launch over batch items whose problem shapes (m, n, k) live in device
// memory, written by the pointer kernel next to the items' operand
// addresses and strides, so that the tiles past each item's valid extents
// are never scheduled.  Not yet wired into the handler: this header fixes
// the kernel type and its arguments (see docs/notes.md, ragged windows).
//
// Requirements as for the ptr-array kernels (sm90_gemm.h): every address
// and leading dimension a multiple of 16 bytes.  Compiled for sm_90a only.
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
#include "kernels/sm90_gemm.h"

namespace jax_dynoff {
namespace kernels {

// One grouped launch: `groups` items, each with its problem shape, operand
// addresses and strides in device memory (the pointer kernel's output).
struct GroupedLaunch : LaunchCommon {
  int groups = 0;
  // Device arrays of `groups` entries each.
  const void* shapes = nullptr;  // cute::Shape<int, int, int>: (m, n, k)
  const void* const* ptr_a = nullptr;
  const void* const* ptr_b = nullptr;
  const void* const* ptr_c = nullptr;
  void* const* ptr_d = nullptr;
  const void* stride_a = nullptr;  // the kernel's InternalStride* types
  const void* stride_b = nullptr;
  const void* stride_c = nullptr;
  const void* stride_d = nullptr;
};

template <typename Config, typename ElementIn, typename ElementOut,
          typename LayoutA, typename LayoutB>
struct Sm90GroupedGemm {
  using LayoutC = cutlass::layout::RowMajor;
  using ProblemShape = cutlass::gemm::GroupProblemShape<cute::Shape<int, int, int>>;
  static constexpr int kAlignIn = 128 / cutlass::sizeof_bits<ElementIn>::value;
  static constexpr int kAlignOut =
      128 / cutlass::sizeof_bits<ElementOut>::value;

  using CollectiveEpilogue =
      typename cutlass::epilogue::collective::CollectiveBuilder<
          cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp,
          typename Config::TileShape, typename Config::ClusterShape,
          cutlass::epilogue::collective::EpilogueTileAuto,
          float, float,
          ElementOut, LayoutC*, kAlignOut,   // C
          ElementOut, LayoutC*, kAlignOut,   // D
          typename Config::EpilogueSchedule>::CollectiveOp;

  using CollectiveMainloop =
      typename cutlass::gemm::collective::CollectiveBuilder<
          cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp,
          ElementIn, LayoutA*, kAlignIn,
          ElementIn, LayoutB*, kAlignIn,
          float,
          typename Config::TileShape, typename Config::ClusterShape,
          cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(
              sizeof(typename CollectiveEpilogue::SharedStorage))>,
          typename Config::KernelSchedule>::CollectiveOp;

  using GemmKernel = cutlass::gemm::kernel::GemmUniversal<
      ProblemShape, CollectiveMainloop, CollectiveEpilogue>;
  using Gemm = cutlass::gemm::device::GemmUniversalAdapter<GemmKernel>;

  // Per-group strides, as the pointer kernel writes them.
  using StrideA = typename GemmKernel::InternalStrideA;
  using StrideB = typename GemmKernel::InternalStrideB;
  using StrideC = typename GemmKernel::InternalStrideC;
  using StrideD = typename GemmKernel::InternalStrideD;
  using Shape = typename ProblemShape::UnderlyingProblemShape;

  static typename Gemm::Arguments Args(const GroupedLaunch& l) {
    cutlass::KernelHardwareInfo hw;
    hw.device_id = l.device;
    hw.sm_count = l.sm_count;
    using EA = typename Gemm::ElementA;
    using EB = typename Gemm::ElementB;
    using EC = typename Gemm::ElementC;
    using ED = typename Gemm::EpilogueOutputOp::ElementOutput;
    typename Gemm::Arguments args{
        cutlass::gemm::GemmUniversalMode::kGrouped,
        // The shapes on the device only: the scheduler reads them there.
        {l.groups, static_cast<Shape*>(const_cast<void*>(l.shapes)), nullptr},
        {reinterpret_cast<const EA**>(const_cast<const void**>(l.ptr_a)),
         static_cast<StrideA*>(const_cast<void*>(l.stride_a)),
         reinterpret_cast<const EB**>(const_cast<const void**>(l.ptr_b)),
         static_cast<StrideB*>(const_cast<void*>(l.stride_b))},
        {{},
         reinterpret_cast<const EC**>(const_cast<const void**>(l.ptr_c)),
         static_cast<StrideC*>(const_cast<void*>(l.stride_c)),
         reinterpret_cast<ED**>(const_cast<void**>(l.ptr_d)),
         static_cast<StrideD*>(const_cast<void*>(l.stride_d))},
        hw};
    auto& fusion = args.epilogue.thread;
    fusion.alpha = l.alpha;
    fusion.beta = l.beta;
    return args;
  }

  static size_t Workspace(const GroupedLaunch& l) {
    return Gemm::get_workspace_size(Args(l));
  }

  static std::string Run(const GroupedLaunch& l) {
    return RunSm90Gemm<Gemm>("SM90 grouped GEMM", Args(l), l.workspace,
                             l.stream, l.device);
  }
};

}  // namespace kernels
}  // namespace jax_dynoff

#endif  // JAX_DYNOFF_KERNELS_SM90_GROUPED_H_
