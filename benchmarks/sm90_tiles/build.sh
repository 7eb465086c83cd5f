#!/usr/bin/env bash
# Builds the sweep in parallel (one nvcc per configuration); run on the GPU
# machine:  benchmarks/sm90_tiles/build.sh [PATTERN] && benchmarks/sm90_tiles/sweep [M ...]
# PATTERN (grep -E on the configuration names, gen.sh) picks the candidates,
# e.g. "^direct_" for the direct kernel's.
set -euo pipefail
cd "$(dirname "$0")"
./gen.sh "${1:-.}"
source ./cublas_flags.sh
CUT=$(python3 -c "import cutlass_library; print(cutlass_library.source_path)")
FLAGS="-std=c++17 -O3 -DNDEBUG --expt-relaxed-constexpr -diag-suppress=940,2473 \
  -gencode=arch=compute_90a,code=sm_90a -I../../ffi -I$CUT/include \
  -I$CUT/tools/util/include -I$(dirname $(which nvcc))/../include/cccl"
rm -f ./*.o
ls cfg_*.cu | xargs -P "$(nproc)" -I{} sh -c "nvcc $FLAGS -c {} -o {}.o"
nvcc $FLAGS $CUBLAS_CFLAGS -c main.cu -o main.cu.o || {
  echo "main.cu failed with the cuBLAS column: building without it"
  CUBLAS_LIBS=""; nvcc $FLAGS -c main.cu -o main.cu.o; }
nvcc -gencode=arch=compute_90a,code=sm_90a ./*.o -o sweep -lcuda $CUBLAS_LIBS
