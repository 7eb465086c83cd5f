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
# Each: the library's tiles, then the candidates beside the wide one (tile
# m x n x k, cluster m x n): with the 1x2 cluster; a K tile of 32 (twice
# the stages); the 256x128 and 128x128 cooperative tiles for reference.
cfgs=(
 "SWEEP_GROUPED_LIB lib_wide Sm90GroupedWideConfig"
 "SWEEP_GROUPED_LIB lib_medium Sm90GroupedMediumConfig"
 "SWEEP_GROUPED_CFG coop_128x256x64_1x2 $C $CE 128 256 64 1 2"
 "SWEEP_GROUPED_CFG coop_128x256x32_1x2 $C $CE 128 256 32 1 2"
 "SWEEP_GROUPED_CFG coop_256x128x64_1x2 $C $CE 256 128 64 1 2"
 "SWEEP_GROUPED_CFG coop_128x128x64_1x2 $C $CE 128 128 64 1 2"
)
source ./sweep_build.sh
write_candidates grouped.h gcfg "$pattern" "${cfgs[@]}"
write_registry grouped_registry.h grouped.h GroupedEntry kGrouped kNumGrouped
build_sweep gcfg grouped_main.cu grouped_sweep
