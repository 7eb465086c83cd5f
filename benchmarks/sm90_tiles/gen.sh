#!/usr/bin/env bash
# Writes one translation unit per candidate configuration.
cd "$(dirname "$0")"
C=KernelPtrArrayTmaWarpSpecializedCooperative; CE=PtrArrayTmaWarpSpecializedCooperative
P=KernelPtrArrayTmaWarpSpecializedPingpong; PE=PtrArrayTmaWarpSpecializedPingpong
cfgs=(
 "coop_256x128_1x2 $C $CE 256 128 1 2"
 "coop_256x128_2x1 $C $CE 256 128 2 1"
 "coop_128x256_1x2 $C $CE 128 256 1 2"
 "coop_128x256_2x1 $C $CE 128 256 2 1"
 "coop_128x128_2x1 $C $CE 128 128 2 1"
 "ping_128x128_1x1 $P $PE 128 128 1 1"
 "ping_64x128_1x1 $P $PE 64 128 1 1"
 "ping_64x64_1x1 $P $PE 64 64 1 1"
)
names=()
for c in "${cfgs[@]}"; do
  set -- $c
  echo "#include \"tiles.h\"
SWEEP_CFG($1, $2, $3, $4, $5, $6, $7)" > "cfg_$1.cu"
  names+=("$1")
done
{
  echo '#include "tiles.h"'
  echo 'namespace sweep {'
  for n in "${names[@]}"; do echo "extern const Entry $n;"; done
  echo 'const Entry* kAll[] = {'
  for n in "${names[@]}"; do echo "  &$n,"; done
  echo '};'
  echo "const int kNum = ${#names[@]};"
  echo '}'
} > registry.h
