#!/usr/bin/env bash
# Builds vs_regular (see its header); cuBLAS column: cublas_flags.sh.
set -euo pipefail
cd "$(dirname "$0")"
CUT=$(python3 -c "import cutlass_library; print(cutlass_library.source_path)")
FLAGS="-std=c++17 -O3 -DNDEBUG --expt-relaxed-constexpr -diag-suppress=940,2473 \
  -gencode=arch=compute_90a,code=sm_90a -I../../ffi -I$CUT/include \
  -I$CUT/tools/util/include"
source ./cublas_flags.sh
nvcc $FLAGS $CUBLAS_CFLAGS $CUBLAS_LIBS vs_regular.cu -lcuda -o vs_regular
