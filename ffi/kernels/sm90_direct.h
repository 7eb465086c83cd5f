// The direct SM90 path: CUTLASS 3.x's plain (non-array) TMA warp-specialized
// GEMM whose TMA descriptors describe the operands' whole buffers and whose
// tile coordinates are shifted, on the device, by the windows' origins.  No
// pointer kernel runs before it and no descriptor is rewritten on the
// device, so a call is one launch; the ptr-array kernel it replaces is
// slower per tile and needs its pointer kernel's launch ahead of it
// (docs/design.md).
//
// Only where the TMA bounds of the whole buffer are also the window's:
// loads may run past a window (those rows and columns only feed outputs that
// are never stored) except along K, where they would be summed, and stores
// must not.  So (the planner's rule, DirectChoice in ffi/planner.cc): a
// window's K extent is a multiple of the K tile or reaches its buffer's
// edge, and D's extents are multiples of the output tile or span their
// buffer's dims.  Everything else takes the ptr-array kernels
// (kernels/sm90_gemm.h).  Alignment as for every SM90 path.
#ifndef JAX_DYNOFF_KERNELS_SM90_DIRECT_H_
#define JAX_DYNOFF_KERNELS_SM90_DIRECT_H_

#include <string>
#include <type_traits>

#include "kernels/sm90_gemm.h"
#include "kernels/sm90_window_epilogue.h"

namespace jax_dynoff {
namespace kernels {

// A ptr-array tile (sm90_gemm.h) with CUTLASS's non-array schedules: the
// direct twin of that tile, same tile and cluster shape.
template <class PtrArrayConfig, class Kernel, class Epilogue>
struct Sm90NonArray {
  using KernelSchedule = Kernel;
  using EpilogueSchedule = Epilogue;
  using TileShape = typename PtrArrayConfig::TileShape;
  using ClusterShape = typename PtrArrayConfig::ClusterShape;
};

// The large tile, cooperative: the fastest direct tile once the output has
// several waves of tiles (level with or ahead of the wide one;
// docs/design.md).
using Sm90DirectLargeConfig =
    Sm90NonArray<Sm90LargeConfig,
                 cutlass::gemm::KernelTmaWarpSpecializedCooperative,
                 cutlass::epilogue::TmaWarpSpecializedCooperative>;

// The same tile transposed (each consumer warp group a 64 x 256 slab, so
// every wgmma is m64n256: less shared-memory traffic per MAC), B shared by
// a cluster of two along M, as cuBLAS's choice at these sizes: faster than
// the large tile where the output is one wave of tiles, and the 1x2
// cluster was never faster than 2x1 (benchmarks/sm90_tiles; docs/design.md).
struct Sm90DirectWideConfig {
  using KernelSchedule = cutlass::gemm::KernelTmaWarpSpecializedCooperative;
  using EpilogueSchedule = cutlass::epilogue::TmaWarpSpecializedCooperative;
  using TileShape = cute::Shape<cute::_128, cute::_256, cute::_64>;
  using ClusterShape = cute::Shape<cute::_2, cute::_1, cute::_1>;
};

// The ptr-array path's smaller tiles (chosen by plan.py's wave model for
// problems with few large tiles), ping-pong: a call planned for one of them
// runs its direct twin where its windows suit it, without the pointer
// kernel's launch ahead.
template <class PtrArrayConfig>
using Sm90DirectPingpong =
    Sm90NonArray<PtrArrayConfig, cutlass::gemm::KernelTmaWarpSpecializedPingpong,
                 cutlass::epilogue::TmaWarpSpecialized>;
using Sm90DirectMediumConfig = Sm90DirectPingpong<Sm90MediumConfig>;
using Sm90DirectSmallConfig = Sm90DirectPingpong<Sm90SmallConfig>;
using Sm90DirectTinyConfig = Sm90DirectPingpong<Sm90TinyConfig>;

// Skinny problems (few output tiles, long K: stacked-weight layers at m =
// 16 or 128 with n = k = 4096): the medium tile, cooperative, on CUTLASS's
// stream-K scheduler in split-K mode.  The handler's split_k CTAs share each
// output tile along K and reduce their float32 accumulators in the workspace
// in a fixed order (deterministic), the last one running the epilogue; so a
// layer of 32 tiles streams B with 4x the SMs, in one launch (plus the
// scheduler's memset of its barriers).  The cooperative schedule is the only
// one CUTLASS pairs with stream-K; its 128-row tile wastes MMA work at
// m = 16, which the problem (bound by streaming B) can afford.
struct Sm90DirectSplitKConfig
    : Sm90NonArray<Sm90MediumConfig,
                   cutlass::gemm::KernelTmaWarpSpecializedCooperative,
                   cutlass::epilogue::TmaWarpSpecializedCooperative> {
  using TileScheduler = cutlass::gemm::StreamKScheduler;
};
// plan.h sizes its workspace (host-only code, without CuTe) from these.
static_assert(cute::size<0>(Sm90DirectSplitKConfig::TileShape{}) ==
                      kDirectSplitKTileM &&
                  cute::size<1>(Sm90DirectSplitKConfig::TileShape{}) ==
                      kDirectSplitKTileN,
              "kDirectSplitKTileM/N (plan.h) must be the split-K tile");

// A config's tile scheduler: its TileScheduler where it names one, else
// CUTLASS's default (persistent, data-parallel).
template <class Config, class = void>
struct SchedulerOf {
  using type = void;
};
template <class Config>
struct SchedulerOf<Config, std::void_t<typename Config::TileScheduler>> {
  using type = typename Config::TileScheduler;
};

// CUTLASS's mainloop with its TMA descriptors over the whole A and B buffers
// and its tiles shifted to the windows (computed once per CTA, by the
// producer warp, in load_init).  A window's rows are its buffer's rows as
// stored: along M for A and along K for B, or the other way round for a
// transposed operand (TA: A stored k x m; TB: B stored n x k).
template <class Base, bool TA = false, bool TB = false>
struct DirectMainloop : Base {
  struct Arguments : Base::Arguments {
    DirectWindow a_win, b_win;
  };
  struct Params : Base::Params {
    DirectWindow a_win, b_win;
  };

  template <class ProblemShape>
  static Params to_underlying_arguments(ProblemShape const&,
                                        Arguments const& args, void*) {
    using namespace cute;
    using ClusterShape = typename Base::DispatchPolicy::ClusterShape;
    auto ptr_a =
        reinterpret_cast<typename Base::InternalElementA const*>(args.ptr_A);
    auto ptr_b =
        reinterpret_cast<typename Base::InternalElementB const*>(args.ptr_B);
    // A is (m, k, l) and B (n, k, l) in CUTLASS's indexing: a buffer's
    // stored (rows, cols) are (m, k) for A, (k, m) for a transposed A;
    // (k, n) for B, (n, k) for a transposed B.
    const DirectWindow &wa = args.a_win, &wb = args.b_win;
    Tensor a = make_tensor(
        ptr_a, make_layout(TA ? make_shape(wa.cols, wa.rows, wa.layers)
                              : make_shape(wa.rows, wa.cols, wa.layers),
                           args.dA));
    Tensor b = make_tensor(
        ptr_b, make_layout(TB ? make_shape(wb.rows, wb.cols, wb.layers)
                              : make_shape(wb.cols, wb.rows, wb.layers),
                           args.dB));
    Params p;
    p.tma_load_a = make_tma_copy_A_sm90(
        typename Base::GmemTiledCopyA{}, a,
        typename Base::SmemLayoutA{}(_, _, cute::Int<0>{}),
        typename Base::TileShape{}, ClusterShape{});
    p.tma_load_b = make_tma_copy_B_sm90(
        typename Base::GmemTiledCopyB{}, b,
        typename Base::SmemLayoutB{}(_, _, cute::Int<0>{}),
        typename Base::TileShape{}, ClusterShape{});
    p.tma_transaction_bytes = Base::TmaTransactionBytes;
    p.tma_transaction_bytes_mk = Base::TmaTransactionBytesMK;
    p.tma_transaction_bytes_nk = Base::TmaTransactionBytesNK;
    p.a_win = args.a_win;
    p.b_win = args.b_win;
    return p;
  }

  template <class ProblemShape_MNKL>
  CUTLASS_DEVICE auto load_init(ProblemShape_MNKL const& problem_shape_MNKL,
                                Params const& params) const {
    using namespace cute;
    using X = Underscore;
    auto [M, N, K, L] = problem_shape_MNKL;
    // (row, layer) of each window's first element; its row is along m (A)
    // or k (B), the other way round for a transposed operand.
    const int2 a_at = params.a_win.Locate();
    const int2 b_at = params.b_win.Locate();
    Tensor mA_mkl = domain_offset(
        TA ? make_coord(0, a_at.x, a_at.y) : make_coord(a_at.x, 0, a_at.y),
        params.tma_load_a.get_tma_tensor(make_shape(M, K, L)));
    Tensor mB_nkl = domain_offset(
        TB ? make_coord(b_at.x, 0, b_at.y) : make_coord(0, b_at.x, b_at.y),
        params.tma_load_b.get_tma_tensor(make_shape(N, K, L)));
    Tensor gA_mkl = local_tile(mA_mkl, typename Base::TileShape{},
                               make_coord(_, _, _), Step<_1, X, _1>{});
    Tensor gB_nkl = local_tile(mB_nkl, typename Base::TileShape{},
                               make_coord(_, _, _), Step<X, _1, _1>{});
    return cute::make_tuple(gA_mkl, gB_nkl);
  }
};

// The arguments of a direct kernel `Gemm` (a DirectMainloop and a
// WindowEpilogue; this file's and sm90_direct_tf32.h's): each buffer's
// strides are rows of ld elements and layers of its window's rows; the
// mainloop's A' and B' are the launch's A and B, or with kSwapAB its B and A
// (the TF32 kernel's D^T = B^T A^T: problem (n, m, k)); C and D the launch's;
// the tile order of TileShape.
template <typename Gemm, typename TileShape, bool kSwapAB>
typename Gemm::Arguments DirectArgs(const DirectLaunch& l) {
  using Kernel = typename Gemm::GemmKernel;
  const auto strides = [](auto stride, int64_t ld, const DirectWindow& w) {
    return MakeStride<decltype(stride)>(ld, ld * w.rows);
  };
  const void* base_a = kSwapAB ? l.base_b : l.base_a;
  const void* base_b = kSwapAB ? l.base_a : l.base_b;
  const int64_t lda = kSwapAB ? l.ldb : l.lda, ldb = kSwapAB ? l.lda : l.ldb;
  const DirectWindow& a = kSwapAB ? l.b : l.a;
  const DirectWindow& b = kSwapAB ? l.a : l.b;
  const int m = kSwapAB ? l.n : l.m, n = kSwapAB ? l.m : l.n;
  typename Kernel::CollectiveMainloop::Arguments mainloop{};
  mainloop.ptr_A = static_cast<decltype(mainloop.ptr_A)>(base_a);
  mainloop.dA = strides(typename Kernel::StrideA{}, lda, a);
  mainloop.ptr_B = static_cast<decltype(mainloop.ptr_B)>(base_b);
  mainloop.dB = strides(typename Kernel::StrideB{}, ldb, b);
  mainloop.a_win = a;
  mainloop.b_win = b;
  typename Kernel::CollectiveEpilogue::Arguments epilogue{};
  epilogue.thread.alpha = l.alpha;
  epilogue.thread.beta = l.beta;
  epilogue.ptr_C = static_cast<decltype(epilogue.ptr_C)>(l.base_c);
  epilogue.dC = strides(typename Kernel::StrideC{}, l.ldc, l.c);
  epilogue.ptr_D = static_cast<decltype(epilogue.ptr_D)>(l.base_d);
  epilogue.dD = strides(typename Kernel::StrideC{}, l.ldd, l.d);
  epilogue.c_win = l.c;
  epilogue.d_win = l.d;
  cutlass::KernelHardwareInfo hw;
  hw.device_id = l.device;
  hw.sm_count = l.sm_count;
  typename Gemm::Arguments args{cutlass::gemm::GemmUniversalMode::kGemm,
                                {m, n, l.k, 1}, mainloop, epilogue, hw};
  SetTileOrder<TileShape>(args, m, n, 1, l.sm_count);
  return args;
}

// A row-major (m x k), B row-major (k x n), C and D row-major, 16-bit in,
// float32 accumulation, C and D of ElementOut (the input's, or float32);
// TA: A stored k x m (column-major m x k), TB: B stored n x k.
template <typename Config, typename Element, typename ElementOut,
          bool TA = false, bool TB = false>
struct Sm90DirectGemm {
  using RM = cutlass::layout::RowMajor;
  using LayoutA = std::conditional_t<TA, cutlass::layout::ColumnMajor, RM>;
  using LayoutB = std::conditional_t<TB, cutlass::layout::ColumnMajor, RM>;
  static constexpr int kAlign = 128 / cutlass::sizeof_bits<Element>::value;
  static constexpr int kAlignOut =
      128 / cutlass::sizeof_bits<ElementOut>::value;

  using CollectiveEpilogue = WindowEpilogue<
      typename cutlass::epilogue::collective::CollectiveBuilder<
          cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp,
          typename Config::TileShape, typename Config::ClusterShape,
          cutlass::epilogue::collective::EpilogueTileAuto, float, float,
          ElementOut, RM, kAlignOut, ElementOut, RM, kAlignOut,
          typename Config::EpilogueSchedule>::CollectiveOp>;

  using CollectiveMainloop = DirectMainloop<
      typename cutlass::gemm::collective::CollectiveBuilder<
          cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, Element,
          LayoutA, kAlign, Element, LayoutB, kAlign, float,
          typename Config::TileShape,
          typename Config::ClusterShape,
          cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(
              sizeof(typename CollectiveEpilogue::SharedStorage))>,
          typename Config::KernelSchedule>::CollectiveOp,
      TA, TB>;

  using GemmKernel = cutlass::gemm::kernel::GemmUniversal<
      cute::Shape<int, int, int, int>, CollectiveMainloop, CollectiveEpilogue,
      typename SchedulerOf<Config>::type>;
  using Gemm = cutlass::gemm::device::GemmUniversalAdapter<GemmKernel>;
  static constexpr bool kSplitK =
      std::is_same_v<typename SchedulerOf<Config>::type,
                     cutlass::gemm::StreamKScheduler>;

  static typename Gemm::Arguments Args(const DirectLaunch& l) {
    auto args = DirectArgs<Gemm, typename Config::TileShape, false>(l);
    if constexpr (kSplitK) {
      // No swizzle: its rounding of the tile grid would grow the workspace
      // past what the plan reserved (DirectSplitKWorkspace in plan.h).
      args.scheduler.max_swizzle_size = 1;
      args.scheduler.splits = l.split_k;
      using Mode = decltype(args.scheduler.decomposition_mode);
      args.scheduler.decomposition_mode = Mode::SplitK;
      using Reduction = decltype(args.scheduler.reduction_mode);
      args.scheduler.reduction_mode = l.deterministic
                                          ? Reduction::Deterministic
                                          : Reduction::Nondeterministic;
    }
    return args;
  }

  static size_t Workspace(const DirectLaunch& l) {
    return Gemm::get_workspace_size(Args(l));
  }

  static std::string Run(const DirectLaunch& l) {
    return RunSm90Gemm<Gemm>("direct SM90 GEMM", Args(l), l.workspace,
                             l.stream, l.device);
  }

  static std::string Prepare(const DirectLaunch& l, PreparedLaunch* out) {
    return PrepareSm90Gemm<Gemm>("direct SM90 GEMM", Args(l), l.workspace,
                                 l.stream, l.device, out);
  }
  // The split-K tile's scheduler zeroes its barriers on every call.
  static constexpr auto kPrepare = kSplitK ? nullptr : &Prepare;
};

}  // namespace kernels
}  // namespace jax_dynoff

// One line per kernel, which the build generates from its line in the
// kernel catalogue (ffi/kernels/catalogue.py):
//   JAX_DYNOFF_SM90_DIRECT_KERNEL(kSm90DirectLargeBf16NN,
//                                 Sm90DirectLargeConfig, cutlass::bfloat16_t,
//                                 cutlass::bfloat16_t)
// (..._T: the same with A and / or B transposed.)
#define JAX_DYNOFF_SM90_DIRECT_KERNEL_T(NAME, CONFIG, IN, OUT, TA, TB)       \
  namespace jax_dynoff {                                                     \
  namespace kernels {                                                        \
  using NAME##_t = Sm90DirectGemm<CONFIG, IN, OUT, TA, TB>;                  \
  extern const DirectKernelEntry NAME = {#NAME, &NAME##_t::Workspace,        \
                                         &NAME##_t::Run, NAME##_t::kPrepare};\
  }                                                                          \
  }
#define JAX_DYNOFF_SM90_DIRECT_KERNEL(NAME, CONFIG, IN, OUT) \
  JAX_DYNOFF_SM90_DIRECT_KERNEL_T(NAME, CONFIG, IN, OUT, false, false)

#endif  // JAX_DYNOFF_KERNELS_SM90_DIRECT_H_
