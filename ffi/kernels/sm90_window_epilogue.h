// The direct SM90 kernels' epilogue: CUTLASS 4.2's TMA warp-specialized
// epilogue, unchanged, given TMA atoms of our own that know where the window
// lies in its buffer.
//
// CUTLASS's epilogue builds its C and D TMA descriptors over the problem
// (M, N, L) at ptr_C / ptr_D, and indexes its tiles from (0, 0, 0).  The
// direct kernels' windows start at offsets held in device memory, so the
// descriptors cannot start at the window (the host never sees the offsets)
// and are built over the whole buffers instead; the shift to the window's
// origin is applied where the epilogue asks its TMA atom for the coordinate
// tensor (`get_tma_tensor`), which is a member of the atom's Copy_Traits.
// So:
//  - SM90_TMA_LOAD_WINDOW / SM90_TMA_STORE_WINDOW are CUTLASS's TMA load and
//    store with a DirectWindow; their Copy_Traits derive from CUTLASS's and
//    shift `get_tma_tensor` by the window's (row, layer), located on the
//    device from the offsets (DirectWindow::Locate, kernels/launch.h).
//  - WindowEpilogue<Builder's epilogue> is that epilogue with its G2S / S2G
//    copy ops rebound to those (CollectiveEpilogue's own template
//    parameters), whose to_underlying_arguments builds the descriptors over
//    the buffers and hands each atom its window, and whose `store` sends a
//    tile that lies wholly past the window (the tile scheduler rounds its
//    grid up to whole clusters and swizzle groups; CUTLASS relies on the TMA
//    bounds to drop those stores, and ours are the buffer's) to the layer
//    one past the buffer's last, where TMA writes nothing.
// Everything else (pipelines, fusion, shared memory) is CUTLASS's class as
// is: WindowEpilogue adds no device code of its own beyond those lines.
//
// kTransposed: the epilogue's (M, N) are the buffer's (columns, rows), i.e.
// it writes D^T as a column-major matrix, which is the row-major D window
// itself.  The float32 direct kernels compute D^T = B^T A^T
// (kernels/sm90_direct_tf32.h says why); their window's first row is then
// along the epilogue's N.
#ifndef JAX_DYNOFF_KERNELS_SM90_WINDOW_EPILOGUE_H_
#define JAX_DYNOFF_KERNELS_SM90_WINDOW_EPILOGUE_H_

#include <utility>

#include "cute/atom/copy_traits_sm90_tma.hpp"
#include "cutlass/epilogue/collective/collective_epilogue.hpp"
#include "kernels/launch.h"

namespace jax_dynoff {
namespace kernels {

// CUTLASS's TMA load and store, told apart by type so that their traits
// (below) can carry the window; kTransposed: the buffer indexed as its
// transpose (see above).
template <bool kTransposed>
struct SM90_TMA_LOAD_WINDOW_T : cute::SM90_TMA_LOAD {};
template <bool kTransposed>
struct SM90_TMA_STORE_WINDOW_T : cute::SM90_TMA_STORE {};
using SM90_TMA_LOAD_WINDOW = SM90_TMA_LOAD_WINDOW_T<false>;
using SM90_TMA_STORE_WINDOW = SM90_TMA_STORE_WINDOW_T<false>;

// CUTLASS's traits for `Op` plus the window: the coordinate tensor starts
// at the window's origin in the buffer the descriptor describes.
template <class Op, class NumBitsPerTMA, class AuxParams, bool kTransposed>
struct WindowTmaTraits : cute::Copy_Traits<Op, NumBitsPerTMA, AuxParams> {
  using Base = cute::Copy_Traits<Op, NumBitsPerTMA, AuxParams>;
  DirectWindow window{};

  WindowTmaTraits() = default;
  // How cute::make_tma_copy constructs a TMA atom's traits.
  CUTE_HOST_DEVICE WindowTmaTraits(cute::TmaDescriptor const& desc,
                                   AuxParams const& aux)
      : Base{desc, aux} {}

  template <class GShape>
  CUTE_HOST_DEVICE auto get_tma_tensor(GShape const& g_shape) const {
    int2 at = make_int2(0, 0);
#if defined(__CUDA_ARCH__)
    at = window.Locate();
#endif
    // (row, column, layer), or (column, row, layer) transposed: the
    // window's first column is the base address.
    if constexpr (kTransposed)
      return cute::domain_offset(cute::make_coord(0, at.x, at.y),
                                 Base::get_tma_tensor(g_shape));
    else
      return cute::domain_offset(cute::make_coord(at.x, 0, at.y),
                                 Base::get_tma_tensor(g_shape));
  }
};

}  // namespace kernels
}  // namespace jax_dynoff

namespace cute {
template <bool kTransposed, class NumBitsPerTMA, class AuxParams>
struct Copy_Traits<jax_dynoff::kernels::SM90_TMA_LOAD_WINDOW_T<kTransposed>,
                   NumBitsPerTMA, AuxParams>
    : jax_dynoff::kernels::WindowTmaTraits<SM90_TMA_LOAD, NumBitsPerTMA,
                                           AuxParams, kTransposed> {
  using jax_dynoff::kernels::WindowTmaTraits<SM90_TMA_LOAD, NumBitsPerTMA,
                                             AuxParams,
                                             kTransposed>::WindowTmaTraits;
};
template <bool kTransposed, class NumBitsPerTMA, class AuxParams>
struct Copy_Traits<jax_dynoff::kernels::SM90_TMA_STORE_WINDOW_T<kTransposed>,
                   NumBitsPerTMA, AuxParams>
    : jax_dynoff::kernels::WindowTmaTraits<SM90_TMA_STORE, NumBitsPerTMA,
                                           AuxParams, kTransposed> {
  using Base = jax_dynoff::kernels::WindowTmaTraits<
      SM90_TMA_STORE, NumBitsPerTMA, AuxParams, kTransposed>;
  using Base::Base;

  // The store itself is CUTLASS's (the coordinates are already shifted).
  // Declared here because cute's generic copy_unpack would otherwise match
  // this type exactly and win over the base's.
  template <class TS, class SLayout, class TD, class DLayout>
  CUTE_HOST_DEVICE friend constexpr void copy_unpack(
      Copy_Traits const& traits, Tensor<TS, SLayout> const& src,
      Tensor<TD, DLayout>& dst) {
    copy_unpack(static_cast<Copy_Traits<SM90_TMA_STORE, NumBitsPerTMA,
                                        AuxParams> const&>(traits),
                src, dst);
  }
};
}  // namespace cute

namespace jax_dynoff {
namespace kernels {

// The builder's epilogue with the window atoms as its C load and D store.
template <class Epilogue, bool kTransposed>
struct WithWindowAtoms;
template <bool kTransposed, class Policy, class CtaTile, class EpiTile,
          class ElementC, class StrideC, class ElementD, class StrideD,
          class Fusion, class CopyOpG2S, class SmemAtomC, class CopyOpS2R,
          class CopyOpS2G, class SmemAtomD, class CopyOpR2S, class CopyAtomC,
          class CopyOpR2R>
struct WithWindowAtoms<cutlass::epilogue::collective::CollectiveEpilogue<
                           Policy, CtaTile, EpiTile, ElementC, StrideC,
                           ElementD, StrideD, Fusion, CopyOpG2S, SmemAtomC,
                           CopyOpS2R, CopyOpS2G, SmemAtomD, CopyOpR2S,
                           CopyAtomC, CopyOpR2R>,
                       kTransposed> {
  static_assert(std::is_same_v<CopyOpG2S, cute::SM90_TMA_LOAD> &&
                    std::is_same_v<CopyOpS2G, cute::SM90_TMA_STORE>,
                "the direct kernels expect CUTLASS's plain TMA epilogue");
  using type = cutlass::epilogue::collective::CollectiveEpilogue<
      Policy, CtaTile, EpiTile, ElementC, StrideC, ElementD, StrideD, Fusion,
      SM90_TMA_LOAD_WINDOW_T<kTransposed>, SmemAtomC, CopyOpS2R,
      SM90_TMA_STORE_WINDOW_T<kTransposed>, SmemAtomD, CopyOpR2S, CopyAtomC,
      CopyOpR2R>;
};

template <class BuilderEpilogue, bool kTransposed = false>
class WindowEpilogue
    : public WithWindowAtoms<BuilderEpilogue, kTransposed>::type {
 public:
  using Base = typename WithWindowAtoms<BuilderEpilogue, kTransposed>::type;
  using Params = typename Base::Params;

  // ptr_C / ptr_D are the windows' first columns at row 0 of layer 0 of
  // their buffers, dC / dD the buffers' (row, 1, layer) strides ((1, row,
  // layer) transposed); the windows say the buffers' extents and where the
  // windows start.
  struct Arguments : Base::Arguments {
    DirectWindow c_win, d_win;
  };

  template <class ProblemShape>
  static Params to_underlying_arguments(ProblemShape const& problem_shape,
                                        Arguments const& args,
                                        void* workspace) {
    const auto K = cute::get<2>(cute::append<4>(problem_shape, 1));
    // CUTLASS's own construction, over a buffer's extents instead of the
    // problem's: once for C's buffer, once for D's (they may differ).
    auto over = [&](const DirectWindow& w) {
      return Base::to_underlying_arguments(
          kTransposed ? cute::make_shape(w.cols, w.rows, K, w.layers)
                      : cute::make_shape(w.rows, w.cols, K, w.layers),
          args, workspace);
    };
    Params p = over(args.d_win);
    p.thread = Base::FusionCallbacks::to_underlying_arguments(
        problem_shape, args.thread, workspace);
    if constexpr (!cute::is_void_v<typename Base::ElementC>) {
      p.tma_load_c = over(args.c_win).tma_load_c;
      p.tma_load_c.window = args.c_win;
    }
    p.tma_store_d.window = args.d_win;
    return p;
  }

  CUTLASS_DEVICE WindowEpilogue(Params const& params,
                                typename Base::TensorStorage& storage)
      : Base(params, storage), d_win_(&params.tma_store_d.window) {}

  // CUTLASS's store, with a tile wholly past the window sent out of the
  // buffer: layer (buffer's layers - window's first layer), which the D
  // atom shifts to the buffer's layer count.
  template <class LoadPipeline, class LoadState, class StorePipeline,
            class StoreState, class ProblemShapeMNKL, class TileShapeMNK,
            class TileCoordMNKL, class... Rest>
  CUTLASS_DEVICE auto store(LoadPipeline load_pipeline, LoadState load_state,
                            StorePipeline store_pipeline,
                            StoreState store_state,
                            ProblemShapeMNKL problem_shape_mnkl,
                            TileShapeMNK tile_shape_MNK,
                            TileCoordMNKL tile_coord_mnkl, Rest&&... rest) {
    auto [M, N, K, L] = problem_shape_mnkl;
    auto [m, n, k, l] = tile_coord_mnkl;
    using CtaTile = typename Base::CtaTileMNK;
    if (int64_t(m) * int64_t(cute::size<0>(CtaTile{})) >= int64_t(M) ||
        int64_t(n) * int64_t(cute::size<1>(CtaTile{})) >= int64_t(N)) {
      l = d_win_->layers - d_win_->Locate().y;
    }
    return Base::store(load_pipeline, load_state, store_pipeline, store_state,
                       problem_shape_mnkl, tile_shape_MNK,
                       cute::make_coord(m, n, k, l),
                       std::forward<Rest>(rest)...);
  }

 private:
  DirectWindow const* d_win_;
};

}  // namespace kernels
}  // namespace jax_dynoff

#endif  // JAX_DYNOFF_KERNELS_SM90_WINDOW_EPILOGUE_H_
