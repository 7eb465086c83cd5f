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
// Compiled for sm_90a only.  The family's second epilogue, swiglu, fuses
// ragged_dot's gated activation (Sm90GluEpilogueArray below).
#ifndef JAX_DYNOFF_KERNELS_SM90_GROUPED_H_
#define JAX_DYNOFF_KERNELS_SM90_GROUPED_H_

#include <cuda_runtime_api.h>

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
#include "cutlass/epilogue/collective/detail.hpp"
#include "cutlass/epilogue/dispatch_policy.hpp"
#include "cutlass/epilogue/thread/linear_combination.h"
#include "gemm_problem.h"  // Epilogue
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

// The swiglu epilogue (Epilogue::kSwiglu): out = silu(h_gate) * h_up,
// h = alpha * x_g @ W[g], where W[g]'s 2I columns hold the gate and up
// columns interleaved one by one (column 2j: gate j, 2j + 1: up j; the
// layout GPT-OSS stores its gate_up projection in).  CUTLASS's
// DefaultEpilogueArray (the ptr-array epilogue without shared memory) with
// its element-wise store replaced by a pairwise one: a wgmma accumulator
// fragment holds each column pair (2j, 2j + 1) of a row in one thread, so
// the activation needs no exchange, and the thread writes out's column j
// straight from registers (out has half the columns of h, so the TMA
// epilogue's tile does not fit it).  Only a scalar alpha (no per-group
// alpha, no C).  Checked against a naive kernel on an H200
// (benchmarks/grouped_glu/probe.cu).  One store per element, no vectors:
// D's width needs no 16-byte multiple of its own (the planner still
// proves D's addresses aligned, as for every grouped call).
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

// The collective epilogue of each Epilogue, and the shared memory it takes
// from the mainloop's stages.
template <Epilogue E, typename Config, typename ElementOut>
struct GroupedEpilogueOf;

// None: CUTLASS's TMA epilogue; C is void: a sourceless epilogue (D =
// alpha * acc).
template <typename Config, typename ElementOut>
struct GroupedEpilogueOf<Epilogue::kNone, Config, ElementOut> {
  using LayoutC = cutlass::layout::RowMajor;
  static constexpr int kAlignOut =
      128 / cutlass::sizeof_bits<ElementOut>::value;
  using Op = typename cutlass::epilogue::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp,
      typename Config::TileShape, typename Config::ClusterShape,
      cutlass::epilogue::collective::EpilogueTileAuto,
      float, float,
      void, LayoutC*, kAlignOut,         // C: none
      ElementOut, LayoutC*, kAlignOut,   // D
      typename Config::EpilogueSchedule>::CollectiveOp;
  static constexpr int kCarveout =
      static_cast<int>(sizeof(typename Op::SharedStorage));
};

// Swiglu: the pairwise store from registers, no shared memory (every
// stage to the mainloop, as the probe measured it), on the cooperative
// kernel the probe checked (the wide tile).
template <typename Config, typename ElementOut>
struct GroupedEpilogueOf<Epilogue::kSwiglu, Config, ElementOut> {
  static_assert(
      std::is_same_v<typename Config::KernelSchedule,
                     cutlass::gemm::KernelPtrArrayTmaWarpSpecializedCooperative>,
      "the swiglu epilogue is built on the cooperative grouped kernel");
  using StrideD = cutlass::detail::TagToStrideC_t<cutlass::layout::RowMajor*>;
  using Op = cutlass::epilogue::collective::detail::
      Sm90TmaWarpSpecializedAdapter<Sm90GluEpilogueArray<ElementOut, StrideD>>;
  static constexpr int kCarveout = 0;
};

// Config: one of the grouped tiles above.  ElementOut: D's element (the
// input's, or float32 for preferred_element_type=float32).  E: what the
// epilogue does with the product (gemm_problem.h Epilogue); with swiglu
// the items' shapes are h's (m, 2I, k) and D's rows hold I columns.
template <typename Config, typename Element, typename ElementOut,
          typename LayoutA, typename LayoutB, Epilogue E = Epilogue::kNone>
struct Sm90GroupedGemm {
  using ProblemShape =
      cutlass::gemm::GroupProblemShape<cute::Shape<int, int, int>>;
  static constexpr int kAlign = 128 / cutlass::sizeof_bits<Element>::value;
  using EpilogueOf = GroupedEpilogueOf<E, Config, ElementOut>;
  using CollectiveEpilogue = typename EpilogueOf::Op;

  using CollectiveMainloop =
      typename cutlass::gemm::collective::CollectiveBuilder<
          cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp,
          Element, LayoutA*, kAlign,
          Element, LayoutB*, kAlign,
          float,
          typename Config::TileShape, typename Config::ClusterShape,
          cutlass::gemm::collective::StageCountAutoCarveout<
              EpilogueOf::kCarveout>,
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
// and, with the swiglu epilogue (A and B row-major: NN),
//   JAX_DYNOFF_SM90_GROUPED_SWIGLU_KERNEL(kSm90GroupedSwigluWideBf16NN,
//                                         Sm90GroupedWideConfig,
//                                         cutlass::bfloat16_t,
//                                         cutlass::bfloat16_t)
#define JAX_DYNOFF_SM90_GROUPED_KERNEL_EPILOGUE(NAME, CONFIG, IN, OUT, LA, LB, \
                                                EPILOGUE)                      \
  namespace jax_dynoff {                                                       \
  namespace kernels {                                                          \
  using NAME##_t = Sm90GroupedGemm<CONFIG, IN, OUT, LA, LB, EPILOGUE>;         \
  extern const GroupedKernelEntry NAME = {                                     \
      #NAME, &NAME##_t::Workspace, &NAME##_t::Run, &NAME##_t::Prepare};        \
  }                                                                            \
  }
#define JAX_DYNOFF_SM90_GROUPED_KERNEL_TILE(NAME, CONFIG, IN, OUT, LA, LB)     \
  JAX_DYNOFF_SM90_GROUPED_KERNEL_EPILOGUE(NAME, CONFIG, IN, OUT, LA, LB,       \
                                          ::jax_dynoff::Epilogue::kNone)
#define JAX_DYNOFF_SM90_GROUPED_SWIGLU_KERNEL(NAME, CONFIG, IN, OUT)           \
  JAX_DYNOFF_SM90_GROUPED_KERNEL_EPILOGUE(                                     \
      NAME, CONFIG, IN, OUT, cutlass::layout::RowMajor,                        \
      cutlass::layout::RowMajor, ::jax_dynoff::Epilogue::kSwiglu)

#endif  // JAX_DYNOFF_KERNELS_SM90_GROUPED_H_
