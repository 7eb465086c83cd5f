// A candidate for ragged_dot's up projection with its gated activation
// fused: out = silu(h_gate) * h_up, h = alpha * x_g @ W[g] for each group g,
// where W[g]'s 2I columns hold the gate and up columns interleaved one by
// one (column 2j: gate j, 2j + 1: up j; the layout GPT-OSS stores its
// gate_up projection in).  The grouped SM90 kernel of
// ffi/kernels/sm90_grouped.h (the wide 128x256 cooperative tile, ptr-array,
// the items' shapes on the device), with its epilogue replaced: a wgmma
// accumulator fragment holds each column pair (2j, 2j + 1) of a row in one
// thread, so the activation needs no exchange, and the thread writes out's
// column j straight from registers (no shared-memory stage; out has half
// the columns of h, so the TMA epilogue's tile does not fit it).
//
// Not in the library's catalogue yet: benchmarks/grouped_glu/probe.cu
// checks it against a naive kernel and times it beside the library's
// grouped kernel followed by a separate activation kernel.
#pragma once

#include <cuda_runtime_api.h>

#include "cute/tensor.hpp"
#include "cutlass/cutlass.h"
#include "cutlass/epilogue/collective/detail.hpp"
#include "cutlass/epilogue/dispatch_policy.hpp"
#include "cutlass/epilogue/thread/linear_combination.h"
#include "cutlass/gemm/collective/collective_builder.hpp"
#include "cutlass/gemm/device/gemm_universal_adapter.h"
#include "cutlass/gemm/dispatch_policy.hpp"
#include "cutlass/gemm/group_array_problem_shape.hpp"
#include "cutlass/gemm/kernel/gemm_universal.hpp"
#include "cutlass/kernel_hardware_info.h"
#include "kernels/launch.h"
#include "kernels/run_sm90_gemm.h"

namespace jax_dynoff {
namespace kernels {

// The epilogue: CUTLASS's DefaultEpilogueArray (the ptr-array epilogue
// without shared memory) with its element-wise store replaced by the
// pairwise one.  Only a scalar alpha (no per-group alpha, no C).
template <class ElementD_, class StrideD_>
class Sm90GluEpilogueArray {
 public:
  using EpilogueSchedule = cutlass::epilogue::PtrArrayNoSmemWarpSpecialized;
  using DispatchPolicy = EpilogueSchedule;
  using ThreadEpilogueOp = cutlass::epilogue::thread::LinearCombination<
      ElementD_, 1, float, float,
      cutlass::epilogue::thread::ScaleType::OnlyAlphaScaling>;
  using ElementOutput = typename ThreadEpilogueOp::ElementOutput;
  using ElementAccumulator = float;
  using ElementCompute = float;
  using ElementScalar = float;
  using ElementC = void;
  using StrideC = StrideD_;
  using InternalStrideC = cute::remove_pointer_t<StrideC>;
  using ElementD = ElementD_;
  using StrideD = StrideD_;
  using InternalStrideD = cute::remove_pointer_t<StrideD>;
  using GmemElementC = ElementD;
  using GmemTiledCopyC = void;
  using GmemTiledCopyD = void;
  static const int kOutputAlignment = 1;
  using AlignmentType = ElementD;

  struct SharedStorage {};
  using TensorMapStorage = SharedStorage;

  struct Arguments {
    typename ThreadEpilogueOp::Params thread{};
    ElementC const** ptr_C = nullptr;
    StrideC dC{};
    ElementD** ptr_D = nullptr;
    StrideD dD{};
  };
  using Params = Arguments;

  template <class ProblemShape>
  static constexpr Params to_underlying_arguments(ProblemShape const&,
                                                  Arguments const& args,
                                                  void*) {
    return args;
  }
  template <class ProblemShape>
  static size_t get_workspace_size(ProblemShape const&, Arguments const&,
                                   int) {
    return 0;
  }
  template <class ProblemShape>
  static cutlass::Status initialize_workspace(ProblemShape const&,
                                              Arguments const&, void*,
                                              cudaStream_t,
                                              cutlass::CudaHostAdapter* = nullptr) {
    return cutlass::Status::kSuccess;
  }
  template <class ProblemShape>
  static bool can_implement(ProblemShape const&, Arguments const&) {
    return true;
  }

  CUTLASS_HOST_DEVICE
  Sm90GluEpilogueArray(Params const& p) : params(p) {}

  CUTLASS_DEVICE bool is_source_needed() { return false; }

  template <class ProblemShapeMNKL, class BlockShapeMNK, class BlockCoordMNKL,
            class FrgEngine, class FrgLayout, class TiledMma,
            class ResidueMNK>
  CUTLASS_DEVICE void operator()(
      ProblemShapeMNKL problem_shape_mnkl, BlockShapeMNK blk_shape_MNK,
      BlockCoordMNKL blk_coord_mnkl,
      cute::Tensor<FrgEngine, FrgLayout> const& accumulators,
      TiledMma tiled_mma, ResidueMNK, int thread_idx, char*) {
    using namespace cute;
    static_assert(is_static<FrgLayout>::value, "static accumulator layout");
    const int M = get<0>(problem_shape_mnkl);
    const int N = get<1>(problem_shape_mnkl);  // h's columns: 2 x out's
    auto [m_coord, n_coord, k_coord, l_coord] = blk_coord_mnkl;
    const int64_t ldd = get<0>(params.dD[l_coord]);
    ElementD* d = params.ptr_D[l_coord];
    const float alpha = params.thread.alpha;

    // Each accumulator element's (row, column) in the group's h.
    Tensor cD = local_tile(make_identity_tensor(make_shape(M, N)),
                           take<0, 2>(blk_shape_MNK),
                           make_coord(m_coord, n_coord));
    Tensor tCcD = tiled_mma.get_thread_slice(thread_idx).partition_C(cD);
    CUTE_STATIC_ASSERT_V(size(tCcD) == size(accumulators));
    static_assert(decltype(size(FrgLayout{}))::value % 2 == 0,
                  "pairs of columns");
    // A wgmma fragment's first mode steps a column first: elements 2i and
    // 2i + 1 are columns n (even) and n + 1 of one row.
    CUTLASS_PRAGMA_UNROLL
    for (int i = 0; i < size(accumulators); i += 2) {
      const int m = get<0>(tCcD(i)), n = get<1>(tCcD(i));
      if (m < M && n < N) {
        const float g = alpha * static_cast<float>(accumulators(i));
        const float u = alpha * static_cast<float>(accumulators(i + 1));
        d[m * ldd + (n >> 1)] =
            static_cast<ElementD>(g / (1.f + __expf(-g)) * u);
      }
    }
  }

 private:
  Params params;
};

// The 128x256 cooperative tile, no cluster: the library's wide grouped
// tile (ffi/kernels/sm90_grouped.h Sm90GroupedWideConfig).
template <typename Element, typename ElementOut>
struct Sm90GroupedGluGemm {
  using LayoutA = cutlass::layout::RowMajor;
  using LayoutB = cutlass::layout::RowMajor;
  using TileShape = cute::Shape<cute::_128, cute::_256, cute::_64>;
  using ClusterShape = cute::Shape<cute::_1, cute::_1, cute::_1>;
  using ProblemShape =
      cutlass::gemm::GroupProblemShape<cute::Shape<int, int, int>>;
  static constexpr int kAlign = 128 / cutlass::sizeof_bits<Element>::value;
  using StrideD = cutlass::detail::TagToStrideC_t<cutlass::layout::RowMajor*>;

  using CollectiveEpilogue =
      cutlass::epilogue::collective::detail::Sm90TmaWarpSpecializedAdapter<
          Sm90GluEpilogueArray<ElementOut, StrideD>>;
  using CollectiveMainloop =
      typename cutlass::gemm::collective::CollectiveBuilder<
          cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp,
          Element, LayoutA*, kAlign, Element, LayoutB*, kAlign, float,
          TileShape, ClusterShape,
          cutlass::gemm::collective::StageCountAutoCarveout<0>,
          cutlass::gemm::KernelPtrArrayTmaWarpSpecializedCooperative>::
          CollectiveOp;
  using GemmKernel = cutlass::gemm::kernel::GemmUniversal<
      ProblemShape, CollectiveMainloop, CollectiveEpilogue>;
  using Gemm = cutlass::gemm::device::GemmUniversalAdapter<GemmKernel>;
  using StrideA = typename GemmKernel::InternalStrideA;
  using StrideB = typename GemmKernel::InternalStrideB;
  using Shape = typename ProblemShape::UnderlyingProblemShape;
  static_assert(sizeof(StrideA) == 8 && sizeof(StrideB) == 8 &&
                    sizeof(cute::remove_pointer_t<StrideD>) == 8,
                "one int64 per stride, as the pointer kernel writes them");

  // l.shapes: (m, 2I, k) per group; l.stride_d: out's leading dimension
  // (I or more); l.ptr_d: out's first row of the group.
  static typename Gemm::Arguments Args(const GroupedLaunch& l) {
    cutlass::KernelHardwareInfo hw;
    hw.device_id = l.device;
    hw.sm_count = l.sm_count;
    using EA = typename Gemm::ElementA;
    using EB = typename Gemm::ElementB;
    typename Gemm::Arguments args{
        cutlass::gemm::GemmUniversalMode::kGrouped,
        {l.groups, static_cast<Shape*>(const_cast<void*>(l.shapes)), nullptr},
        {reinterpret_cast<const EA**>(const_cast<const void**>(l.ptr_a)),
         static_cast<StrideA*>(const_cast<void*>(l.stride_a)),
         reinterpret_cast<const EB**>(const_cast<const void**>(l.ptr_b)),
         static_cast<StrideB*>(const_cast<void*>(l.stride_b))},
        {{},
         nullptr,
         static_cast<StrideD>(const_cast<void*>(l.stride_c)),
         reinterpret_cast<ElementOut**>(const_cast<void**>(l.ptr_d)),
         static_cast<StrideD>(const_cast<void*>(l.stride_d))},
        hw};
    args.epilogue.thread.alpha = l.alpha;
    args.epilogue.thread.beta = 0.f;
    return args;
  }
  static size_t Workspace(const GroupedLaunch& l) {
    return Gemm::get_workspace_size(Args(l));
  }
};

}  // namespace kernels
}  // namespace jax_dynoff
