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
# m x n x k, cluster m x n): no cluster; a K tile of 32 (twice the stages);
# the 256x128 and 128x128 cooperative tiles for reference.
cfgs=(
 "SWEEP_GROUPED_LIB lib_wide Sm90GroupedWideConfig"
 "SWEEP_GROUPED_LIB lib_medium Sm90GroupedMediumConfig"
 "SWEEP_GROUPED_CFG coop_128x256x64_1x1 $C $CE 128 256 64 1 1"
 "SWEEP_GROUPED_CFG coop_128x256x32_1x2 $C $CE 128 256 32 1 2"
 "SWEEP_GROUPED_CFG coop_256x128x64_1x2 $C $CE 256 128 64 1 2"
 "SWEEP_GROUPED_CFG coop_128x128x64_1x2 $C $CE 128 128 64 1 2"
)
rm -f gcfg_*.cu gcfg_*.cu.o
names=()
for c in "${cfgs[@]}"; do
  set -- $c
  echo "$2" | grep -qE "$pattern" || continue
  macro=$1; name=$2; shift 2
  echo "#include \"grouped.h\"
$macro($name, $(echo "$@" | sed 's/ /, /g'))" > "gcfg_$name.cu"
  names+=("$name")
done
{
  echo '#include "grouped.h"'
  echo 'namespace sweep {'
  for n in "${names[@]}"; do echo "extern const GroupedEntry $n;"; done
  echo 'const GroupedEntry* kGrouped[] = {'
  for n in "${names[@]}"; do echo "  &$n,"; done
  echo '};'
  echo "const int kNumGrouped = ${#names[@]};"
  echo '}'
} > grouped_registry.h
source ./cublas_flags.sh
CUT=$(python3 -c "import cutlass_library; print(cutlass_library.source_path)")
FLAGS="-std=c++17 -O3 -DNDEBUG --expt-relaxed-constexpr -diag-suppress=940,2473 \
  -gencode=arch=compute_90a,code=sm_90a -I../../ffi -I$CUT/include \
  -I$CUT/tools/util/include -I$(dirname $(which nvcc))/../include/cccl"
ls gcfg_*.cu | xargs -P "$(nproc)" -I{} sh -c "nvcc $FLAGS -c {} -o {}.o"
nvcc $FLAGS $CUBLAS_CFLAGS -c grouped_main.cu -o grouped_main.cu.o || {
  echo "grouped_main.cu failed with the cuBLAS column: building without it"
  CUBLAS_LIBS=""; nvcc $FLAGS -c grouped_main.cu -o grouped_main.cu.o; }
nvcc -gencode=arch=compute_90a,code=sm_90a gcfg_*.o grouped_main.cu.o \
  -o grouped_sweep -lcuda $CUBLAS_LIBS
