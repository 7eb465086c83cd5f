#!/usr/bin/env bash
# Writes one translation unit per candidate configuration whose name matches
# the pattern $1 (grep -E; default: all), and the registry of those.
cd "$(dirname "$0")"
pattern=${1:-.}
C=KernelPtrArrayTmaWarpSpecializedCooperative; CE=PtrArrayTmaWarpSpecializedCooperative
P=KernelPtrArrayTmaWarpSpecializedPingpong; PE=PtrArrayTmaWarpSpecializedPingpong
DC=KernelTmaWarpSpecializedCooperative; DCE=TmaWarpSpecializedCooperative
DP=KernelTmaWarpSpecializedPingpong; DPE=TmaWarpSpecialized
cfgs=(
 "SWEEP_CFG coop_256x128_1x2 $C $CE 256 128 1 2"
 "SWEEP_CFG coop_256x128_2x1 $C $CE 256 128 2 1"
 "SWEEP_CFG coop_128x256_1x2 $C $CE 128 256 1 2"
 "SWEEP_CFG coop_128x256_2x1 $C $CE 128 256 2 1"
 "SWEEP_CFG coop_128x128_2x1 $C $CE 128 128 2 1"
 "SWEEP_CFG ping_128x128_1x1 $P $PE 128 128 1 1"
 "SWEEP_CFG ping_64x128_1x1 $P $PE 64 128 1 1"
 "SWEEP_CFG ping_64x64_1x1 $P $PE 64 64 1 1"
 "SWEEP_DIRECT_CFG direct_coop_256x128_1x2 $DC $DCE 256 128 1 2"
 "SWEEP_DIRECT_CFG direct_coop_256x128_2x1 $DC $DCE 256 128 2 1"
 "SWEEP_DIRECT_CFG direct_coop_128x256_1x2 $DC $DCE 128 256 1 2"
 "SWEEP_DIRECT_CFG direct_coop_128x256_2x1 $DC $DCE 128 256 2 1"
 "SWEEP_DIRECT_CFG direct_ping_128x128_1x2 $DP $DPE 128 128 1 2"
 "SWEEP_DIRECT_CFG direct_ping_128x128_2x1 $DP $DPE 128 128 2 1"
)
source ./sweep_build.sh
write_candidates tiles.h cfg "$pattern" "${cfgs[@]}"
write_registry registry.h tiles.h Entry kAll kNum
