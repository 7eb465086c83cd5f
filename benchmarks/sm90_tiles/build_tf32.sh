#!/usr/bin/env bash
# Builds the float32 sweep (tf32.h, tf32_main.cu), one nvcc per candidate
# in parallel; on the GPU machine, with the nvidia-cutlass wheel installed:
#   benchmarks/sm90_tiles/build_tf32.sh [PATTERN] &&
#   benchmarks/sm90_tiles/tf32_sweep [M ...]
# PATTERN (grep -E on the names below) picks the candidates.
set -euo pipefail
cd "$(dirname "$0")"
pattern=${1:-.}
C=KernelTmaWarpSpecializedCooperative; CE=TmaWarpSpecializedCooperative
P=KernelTmaWarpSpecializedPingpong; PE=TmaWarpSpecialized
# Tiles (n, m, k) and clusters (n, m) of the transposed problem, as in
# sm90_direct_tf32.h.  The library's two Configs, then: 256x128 (128 (m) x
# 256 (n) of D: each consumer warp group 128 x 128, as cuBLAS's bf16 choice
# at these sizes is 128 x 256 of D) with no cluster, the CTA pair along n
# (2x1: same m, so they share B' = A^T, A's tile), and along m (1x2:
# sharing A' = B^T, B's tile); the library's large tile
# with the pair along m, and along n (its cluster before the sweep showed
# no cluster faster); the medium tile cooperative
# with the pair along n; ping-pong with each warp group a 64 x 256 tile of
# its own (the large tile's m64n256 wgmmas, one group's float32 epilogue
# behind the other's MMA).  Stage counts are not a Config knob (the
# template fits as many as shared memory holds) and a K tile of 16, for
# more of them, fails CUTLASS's static_assert: the register-sourced loop
# needs more than 2 wgmma k-steps (8 each) per tile.  The last three give
# the epilogue a smaller tile than CUTLASS's 128 x 32 (its four float32
# stages of C take 64 KB, leaving the mainloop 3 stages; 128 x 16, the
# least CUTLASS takes for a cooperative epilogue (128 along n, a multiple
# of 16 along m), takes 32 KB),
# with and without a cluster: cuBLAS's TF32 kernel at
# these sizes (sm90_xmma_gemm_f32f32_tf32f32_f32_nn_n_tilesize128x256x32,
# cluster 2, 231 KB of shared memory) has the same tile.
cfgs=(
 "SWEEP_TF32_LIB lib_large Sm90DirectTf32LargeConfig"
 "SWEEP_TF32_LIB lib_medium Sm90DirectTf32MediumConfig"
 "SWEEP_TF32_CFG coop_256x128x32_1x1 $C $CE 256 128 32 1 1 0 0"
 "SWEEP_TF32_CFG coop_256x128x32_2x1 $C $CE 256 128 32 2 1 0 0"
 "SWEEP_TF32_CFG coop_256x128x32_1x2 $C $CE 256 128 32 1 2 0 0"
 "SWEEP_TF32_CFG coop_128x256x32_1x2 $C $CE 128 256 32 1 2 0 0"
 "SWEEP_TF32_CFG coop_128x256x32_2x1 $C $CE 128 256 32 2 1 0 0"
 "SWEEP_TF32_CFG coop_128x128x32_2x1 $C $CE 128 128 32 2 1 0 0"
 "SWEEP_TF32_CFG ping_64x256x32_2x1 $P $PE 64 256 32 2 1 0 0"
 "SWEEP_TF32_CFG coop_128x256x32_1x1_e128x16 $C $CE 128 256 32 1 1 128 16"
 "SWEEP_TF32_CFG coop_128x256x32_2x1_e128x16 $C $CE 128 256 32 2 1 128 16"
 "SWEEP_TF32_CFG coop_128x256x32_1x2_e128x16 $C $CE 128 256 32 1 2 128 16"
)
source ./sweep_build.sh
write_candidates tf32.h tcfg "$pattern" "${cfgs[@]}"
write_registry tf32_registry.h tf32.h Entry kTf32 kNumTf32
build_sweep tcfg tf32_main.cu tf32_sweep
