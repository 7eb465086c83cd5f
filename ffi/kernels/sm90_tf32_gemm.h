// The SM90 TF32 GEMM configurations (see sm90_tf32.h for why only A and B
// K-major are built): CUTLASS 3.x ptr-array TMA warp-specialized kernels
// with float32 A, B, C and D; the builder maps float operands to TF32
// wgmma, accumulation is float32.  Same Sm90Gemm wrapper (pointer arrays,
// strides, tile order) as the 16-bit kernels (sm90_gemm.h).  Compiled for
// sm_90a only.
//
// K tile 32: 32 float32 elements are the 128-byte rows of the widest
// shared-memory swizzle, as 64 16-bit elements are for the 16-bit tiles;
// the same M x N footprints as the 16-bit large and medium tiles, so the
// planner's wave model ranks them the same way.
#ifndef JAX_DYNOFF_KERNELS_SM90_TF32_GEMM_H_
#define JAX_DYNOFF_KERNELS_SM90_TF32_GEMM_H_

#include "kernels/sm90_gemm.h"
#include "kernels/sm90_tf32.h"

namespace jax_dynoff {
namespace kernels {

// Large problems: 256x128x32 cooperative (two consumer warp groups share one
// tile), cluster 1x2 (A multicast across the pair), as the 16-bit large tile.
struct Sm90Tf32LargeConfig {
  using KernelSchedule = cutlass::gemm::KernelPtrArrayTmaWarpSpecializedCooperative;
  using EpilogueSchedule = cutlass::epilogue::PtrArrayTmaWarpSpecializedCooperative;
  using TileShape = cute::Shape<cute::_256, cute::_128, cute::_32>;
  using ClusterShape = cute::Shape<cute::_1, cute::_2, cute::_1>;
};

// Small and medium problems: 128x128x32 ping-pong (twice the CTAs of the
// large tile; one warp group's epilogue hides behind the other's MMA).
struct Sm90Tf32MediumConfig {
  using KernelSchedule = cutlass::gemm::KernelPtrArrayTmaWarpSpecializedPingpong;
  using EpilogueSchedule = cutlass::epilogue::PtrArrayTmaWarpSpecializedPingpong;
  using TileShape = cute::Shape<cute::_128, cute::_128, cute::_32>;
  using ClusterShape = cute::Shape<cute::_1, cute::_1, cute::_1>;
};

// precision=HIGHEST (3xTF32 on the staged parts), accumulators promoted
// (PromotedMainloop in sm90_gemm.h): 128x128x32 cooperative, whatever tile
// the plan chose.  The promotion keeps a second accumulator in registers:
// the 256x128 tile's warp groups (128x128 each) spilled 984 bytes and ran
// 3xTF32 about four times slower than unpromoted (docs/design.md); this
// tile's (64x128 each) spill 36 bytes (ptxas -v).
struct Sm90Tf32HighestConfig {
  using KernelSchedule = cutlass::gemm::KernelPtrArrayTmaWarpSpecializedCooperative;
  using EpilogueSchedule = cutlass::epilogue::PtrArrayTmaWarpSpecializedCooperative;
  using TileShape = cute::Shape<cute::_128, cute::_128, cute::_32>;
  using ClusterShape = cute::Shape<cute::_1, cute::_1, cute::_1>;
};

}  // namespace kernels
}  // namespace jax_dynoff

// The HIGHEST (3xTF32) kernel: accumulators promoted to CUDA-core float32
// every k-tile.
#define JAX_DYNOFF_SM90_TF32_PROMOTED_KERNEL(NAME, CONFIG)                   \
  namespace jax_dynoff {                                                     \
  namespace kernels {                                                        \
  using NAME##_t = Sm90Gemm<CONFIG, float, float, cutlass::layout::RowMajor,  \
                            cutlass::layout::ColumnMajor, float, true>;     \
  extern const KernelEntry NAME = {#NAME, &NAME##_t::Workspace,              \
                                   &NAME##_t::Run};                          \
  }                                                                          \
  }

#endif  // JAX_DYNOFF_KERNELS_SM90_TF32_GEMM_H_
