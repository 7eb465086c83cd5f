#!/usr/bin/env bash
# Builds the grouped sweep (grouped.h, grouped_main.cu) in parallel, one nvcc
# per candidate; on the GPU machine, with the library installed (for the
# cases):
#   benchmarks/sm90_tiles/build_grouped.sh [PATTERN] &&
#   python3 benchmarks/sm90_tiles/grouped_cases.py > /tmp/cases.txt &&
#   benchmarks/sm90_tiles/grouped_sweep /tmp/cases.txt
# PATTERN (grep -E on the names below) picks the candidates.
set -euo pipefail
cd "$(dirname "$0")"
pattern=${1:-.}
C=KernelPtrArrayTmaWarpSpecializedCooperative; CE=PtrArrayTmaWarpSpecializedCooperative
P=KernelPtrArrayTmaWarpSpecializedPingpong; PE=PtrArrayTmaWarpSpecializedPingpong
# Each: the library's tiles, then the candidates beside the wide one (tile
# m x n x k, cluster m x n): with the 1x2 cluster; a K tile of 32 (twice
# the stages); the 256x128 and 128x128 cooperative tiles for reference.
# The 2x1 clusters pair two row tiles of one expert under the same weight
# tile, which TMA multicasts to both: half the weight reads from L2 per
# tile, for an item's rows padded to two tiles (the scheduler rounds each
# item's tiles up to the cluster).  Short-K layers (Qwen3's 768 -> 2048: 12
# k-blocks a tile) move ~0.4-0.6 MB into an SM per tile for 25-50 MFLOP,
# so the L2 side may bound them; ping_128x128x64_2x1 is CUTLASS example
# 57's own ping-pong configuration.
cfgs=(
 "SWEEP_GROUPED_LIB lib_wide Sm90GroupedWideConfig"
 "SWEEP_GROUPED_LIB lib_medium Sm90GroupedMediumConfig"
 "SWEEP_GROUPED_CFG coop_128x256x64_1x2 $C $CE 128 256 64 1 2"
 "SWEEP_GROUPED_CFG coop_128x256x32_1x2 $C $CE 128 256 32 1 2"
 "SWEEP_GROUPED_CFG coop_256x128x64_1x2 $C $CE 256 128 64 1 2"
 "SWEEP_GROUPED_CFG coop_128x128x64_1x2 $C $CE 128 128 64 1 2"
 "SWEEP_GROUPED_CFG coop_128x256x64_2x1 $C $CE 128 256 64 2 1"
 "SWEEP_GROUPED_CFG coop_128x128x64_2x1 $C $CE 128 128 64 2 1"
 "SWEEP_GROUPED_CFG ping_128x128x64_2x1 $P $PE 128 128 64 2 1"
)
source ./sweep_build.sh
write_candidates grouped.h gcfg "$pattern" "${cfgs[@]}"
write_registry grouped_registry.h grouped.h GroupedEntry kGrouped kNumGrouped
build_sweep gcfg grouped_main.cu grouped_sweep
