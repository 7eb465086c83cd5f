// The SM90 paths: CUTLASS 3.x ptr-array TMA warp-specialized GEMMs (after
// CUTLASS example 56).  The kernel reads the operand addresses of batch item
// l from device pointer arrays and rewrites its TMA descriptors on the device,
// so the offsets computed by the handler's prep kernel never reach the host.
//
// Requirements (proved statically by jax_dynoff/plan.py, re-checked by the
// handler before it picks this path): every A/B/C/D address and every leading
// dimension is a multiple of 16 bytes, the contiguous extent of every window
// is a multiple of 8 elements, k > 0.  Compiled for sm_90a only.
#ifndef JAX_DYNOFF_KERNELS_SM90_GEMM_H_
#define JAX_DYNOFF_KERNELS_SM90_GEMM_H_

#include <string>
#include <type_traits>

#include "cute/tensor.hpp"
#include "cutlass/cutlass.h"
#include "cutlass/epilogue/collective/collective_builder.hpp"
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

// Large problems: 256x128x64 cooperative (two consumer warp groups share one
// tile), cluster 1x2 (multicast of A across the pair).
struct Sm90LargeConfig {
  using KernelSchedule = cutlass::gemm::KernelPtrArrayTmaWarpSpecializedCooperative;
  using EpilogueSchedule = cutlass::epilogue::PtrArrayTmaWarpSpecializedCooperative;
  using TileShape = cute::Shape<cute::_256, cute::_128, cute::_64>;
  using ClusterShape = cute::Shape<cute::_1, cute::_2, cute::_1>;
};

// Small m: 64x128x64 ping-pong (two consumer warp groups alternate tiles,
// one's epilogue hides behind the other's MMA); 4x the CTAs of the large
// tile for m <= 256.
struct Sm90SmallConfig {
  using KernelSchedule = cutlass::gemm::KernelPtrArrayTmaWarpSpecializedPingpong;
  using EpilogueSchedule = cutlass::epilogue::PtrArrayTmaWarpSpecializedPingpong;
  using TileShape = cute::Shape<cute::_64, cute::_128, cute::_64>;
  using ClusterShape = cute::Shape<cute::_1, cute::_1, cute::_1>;
};

// Mid-size problems (e.g. m = 512 or 1024 with n = 4096): 128x128x64
// ping-pong; twice the CTAs of the large tile, and a full wave where the
// large tile would fill half the GPU (far faster at 512x4096x4096 in the
// tile sweep, benchmarks/sm90_tiles).
struct Sm90MediumConfig {
  using KernelSchedule = cutlass::gemm::KernelPtrArrayTmaWarpSpecializedPingpong;
  using EpilogueSchedule = cutlass::epilogue::PtrArrayTmaWarpSpecializedPingpong;
  using TileShape = cute::Shape<cute::_128, cute::_128, cute::_64>;
  using ClusterShape = cute::Shape<cute::_1, cute::_1, cute::_1>;
};

// Very few tiles (m <= 128 and moderate n): 64x64x64 ping-pong, twice the
// CTAs of the small-m tile (faster at 128x4096x4096 in the tile sweep).
struct Sm90TinyConfig {
  using KernelSchedule = cutlass::gemm::KernelPtrArrayTmaWarpSpecializedPingpong;
  using EpilogueSchedule = cutlass::epilogue::PtrArrayTmaWarpSpecializedPingpong;
  using TileShape = cute::Shape<cute::_64, cute::_64, cute::_64>;
  using ClusterShape = cute::Shape<cute::_1, cute::_1, cute::_1>;
};

// Split-K for skinny m (m <= 64): the handler splits K into S equal slices
// through the ptr-array batch (item l = t * S + s reads A and B advanced by
// s * K / S along K) and this kernel writes each slice's float32 product
// (m x n, row-major, ld = n) into the workspace; a reduction kernel in
// ffi/cuda/prep_kernels.cu sums the S partials, applies alpha and beta * C and
// writes the D window.  Same 64x128x64 ping-pong tile as the small-m path
// (m = 16 uses a quarter of the MMA, but the problem is bound by streaming
// B, and the persistent producer keeps loading across the short K slices);
// the epilogue has no source (C is void), so it only stores float32.
struct Sm90SplitKConfig {
  using KernelSchedule = cutlass::gemm::KernelPtrArrayTmaWarpSpecializedPingpong;
  using EpilogueSchedule = cutlass::epilogue::PtrArrayTmaWarpSpecializedPingpong;
  using TileShape = cute::Shape<cute::_64, cute::_128, cute::_64>;
  using ClusterShape = cute::Shape<cute::_1, cute::_1, cute::_1>;
};

// A CUTLASS 3.x (MN, K, L) stride of a row-major matrix: the leading
// dimension goes into the one run-time stride of the first two (the unit
// stride is static), `layer` into L (0: unused, as in ptr-array mode).
template <typename Stride>
Stride MakeStride(int64_t ld, int64_t layer = 0) {
  Stride s{};
  if constexpr (cute::is_static<
                    cute::remove_cvref_t<decltype(cute::get<0>(s))>>::value)
    cute::get<1>(s) = ld;
  else
    cute::get<0>(s) = ld;
  cute::get<2>(s) = layer;
  return s;
}

// Tile order (the tile sweep, benchmarks/sm90_tiles; docs/design.md): one
// wave or less wants no swizzle (there it only costs); several waves want 4
// (4096^3) to 8 (8192^3) so that CTAs running together share A and B tiles
// in L2.  Raster along M measured best or tied.
template <typename TileShape, typename Arguments>
void SetTileOrder(Arguments& args, int64_t m, int64_t n, int64_t batch,
                  int sm_count) {
  using TM = cute::tuple_element_t<0, TileShape>;
  using TN = cute::tuple_element_t<1, TileShape>;
  const int64_t tiles =
      (m + TM::value - 1) / TM::value * ((n + TN::value - 1) / TN::value) *
      batch;
  const int sms = sm_count > 0 ? sm_count : 132;
  args.scheduler.max_swizzle_size =
      tiles <= sms ? 1 : tiles <= int64_t{8} * sms ? 4 : 8;
  using Raster = decltype(args.scheduler.raster_order);
  args.scheduler.raster_order = Raster::AlongM;
}

// The builder's ptr-array mainloop `M` with its accumulators promoted: the
// wgmma accumulator is added into a second, CUDA-core float32 accumulator
// every few k-blocks and restarted (CUTLASS's FP8 mainloop, which does
// that and nothing else differently).  Hopper's wgmma accumulates with
// less than float32's rounding; over a long K that shows.
template <typename M>
struct PromotedMainloop;
template <typename Policy, typename... Rest>
struct PromotedMainloop<cutlass::gemm::collective::CollectiveMma<Policy,
                                                                 Rest...>> {
  using type = cutlass::gemm::collective::CollectiveMma<
      cutlass::gemm::MainloopSm90ArrayTmaGmmaWarpSpecializedFP8<
          Policy::Stages, typename Policy::ClusterShape,
          typename Policy::Schedule>,
      Rest...>;
};

// ElementC_ = void: a sourceless epilogue (beta must be 0, ptr_c unused).
// kPromote: PromotedMainloop (the 16-bit kernels: false).
template <typename Config, typename ElementIn, typename ElementOut,
          typename LayoutA, typename LayoutB, typename ElementC_ = ElementOut,
          bool kPromote = false>
struct Sm90Gemm {
  using LayoutC = cutlass::layout::RowMajor;
  static constexpr bool kHasC = !std::is_void_v<ElementC_>;
  static constexpr int kAlignIn = 128 / cutlass::sizeof_bits<ElementIn>::value;
  static constexpr int kAlignOut =
      128 / cutlass::sizeof_bits<ElementOut>::value;
  static constexpr int kAlignC =
      128 / cutlass::sizeof_bits<
                std::conditional_t<kHasC, ElementC_, ElementOut>>::value;

  using CollectiveEpilogue =
      typename cutlass::epilogue::collective::CollectiveBuilder<
          cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp,
          typename Config::TileShape, typename Config::ClusterShape,
          cutlass::epilogue::collective::EpilogueTileAuto,
          float, float,                             // accumulator, compute
          ElementC_, LayoutC, kAlignC,              // C (void: none)
          ElementOut, LayoutC, kAlignOut,           // D
          typename Config::EpilogueSchedule>::CollectiveOp;

  using BuiltMainloop =
      typename cutlass::gemm::collective::CollectiveBuilder<
          cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp,
          ElementIn, LayoutA, kAlignIn,
          ElementIn, LayoutB, kAlignIn,
          float,
          typename Config::TileShape, typename Config::ClusterShape,
          cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(
              sizeof(typename CollectiveEpilogue::SharedStorage))>,
          typename Config::KernelSchedule>::CollectiveOp;
  using CollectiveMainloop =
      std::conditional_t<kPromote, typename PromotedMainloop<BuiltMainloop>::type,
                         BuiltMainloop>;

  using GemmKernel = cutlass::gemm::kernel::GemmUniversal<
      cutlass::gemm::ArrayProblemShape<cute::Shape<int, int, int, int>>,
      CollectiveMainloop, CollectiveEpilogue>;
  using Gemm = cutlass::gemm::device::GemmUniversalAdapter<GemmKernel>;

  using StrideA = typename Gemm::GemmKernel::StrideA;
  using StrideB = typename Gemm::GemmKernel::StrideB;
  using StrideC = typename Gemm::GemmKernel::StrideC;
  using StrideD = typename Gemm::GemmKernel::StrideD;


  static typename Gemm::Arguments Args(const GemmLaunch& l) {
    // op(A) is m x k: row-major A has row stride a_row = lda, column-major
    // A (a transposed window) has column stride a_col = lda.  op(B) is k x n;
    // CUTLASS 3.x indexes B as (n, k): row-major B -> stride (1, ldb).
    const int64_t lda = std::is_same_v<LayoutA, cutlass::layout::RowMajor>
                            ? l.a_row : l.a_col;
    const int64_t ldb = std::is_same_v<LayoutB, cutlass::layout::RowMajor>
                            ? l.b_row : l.b_col;
    cutlass::KernelHardwareInfo hw;
    hw.device_id = l.device;
    hw.sm_count = l.sm_count;
    using EA = typename Gemm::ElementA;
    using EB = typename Gemm::ElementB;
    using EC = std::conditional_t<kHasC, typename Gemm::ElementC, void>;
    const EC** ptr_c = nullptr;
    if constexpr (kHasC)
      ptr_c = reinterpret_cast<const EC**>(const_cast<const void**>(l.ptr_c));
    using ED = typename Gemm::EpilogueOutputOp::ElementOutput;
    typename Gemm::Arguments args{
        cutlass::gemm::GemmUniversalMode::kArray,
        {{l.m, l.n, l.k, l.batch}},
        {reinterpret_cast<const EA**>(const_cast<const void**>(l.ptr_a)),
         MakeStride<StrideA>(lda),
         reinterpret_cast<const EB**>(const_cast<const void**>(l.ptr_b)),
         MakeStride<StrideB>(ldb)},
        {{l.alpha, kHasC ? l.beta : 0.f},
         ptr_c,
         MakeStride<StrideC>(kHasC ? l.ldc : l.ldd),
         reinterpret_cast<ED**>(const_cast<void**>(l.ptr_d)),
         MakeStride<StrideD>(l.ldd)},
        hw};
    SetTileOrder<typename Config::TileShape>(args, l.m, l.n, l.batch,
                                             l.sm_count);
    return args;
  }

  static size_t Workspace(const GemmLaunch& l) {
    return Gemm::get_workspace_size(Args(l));
  }

  static std::string Run(const GemmLaunch& l) {
    return RunSm90Gemm<Gemm>("SM90 GEMM", Args(l), l.workspace, l.stream,
                             l.device);
  }
};

}  // namespace kernels
}  // namespace jax_dynoff

// One instantiation per translation unit:
//   JAX_DYNOFF_SM90_KERNEL(kSm90LargeBf16Bf16NN, Sm90LargeConfig,
//                          cutlass::bfloat16_t, cutlass::bfloat16_t,
//                          cutlass::layout::RowMajor, cutlass::layout::RowMajor)
#define JAX_DYNOFF_SM90_KERNEL(NAME, CONFIG, IN, OUT, LA, LB)                \
  namespace jax_dynoff {                                                     \
  namespace kernels {                                                        \
  using NAME##_t = Sm90Gemm<CONFIG, IN, OUT, LA, LB>;                        \
  extern const KernelEntry NAME = {#NAME, &NAME##_t::Workspace, &NAME##_t::Run};    \
  }                                                                          \
  }

// The split-K kernels: float32 partials, no C.
//   JAX_DYNOFF_SM90_SPLITK_KERNEL(kSm90SplitKBf16NN, cutlass::bfloat16_t,
//                                 cutlass::layout::RowMajor,
//                                 cutlass::layout::RowMajor)
#define JAX_DYNOFF_SM90_SPLITK_KERNEL(NAME, IN, LA, LB)                      \
  namespace jax_dynoff {                                                     \
  namespace kernels {                                                        \
  using NAME##_t = Sm90Gemm<Sm90SplitKConfig, IN, float, LA, LB, void>;      \
  extern const KernelEntry NAME = {#NAME, &NAME##_t::Workspace, &NAME##_t::Run};    \
  }                                                                          \
  }

#endif  // JAX_DYNOFF_KERNELS_SM90_GEMM_H_
