#!/usr/bin/env bash
# Builds vs_regular (see its header); cuBLAS comes from the nvidia-cublas
# wheel of jax's CUDA plugin when present, else that column is left out.
set -euo pipefail
cd "$(dirname "$0")"
CUT=$(python3 -c "import cutlass_library; print(cutlass_library.source_path)")
FLAGS="-std=c++17 -O3 -DNDEBUG --expt-relaxed-constexpr -diag-suppress=940,2473 \
  -gencode=arch=compute_90a,code=sm_90a -I../../ffi -I$CUT/include \
  -I$CUT/tools/util/include"
CUBLAS=$(python3 -c "import nvidia.cublas as c; print(list(c.__path__)[0])" 2>/dev/null || true)
if [ -n "$CUBLAS" ] && [ -f "$CUBLAS/include/cublas_v2.h" ]; then
  lib=$(ls "$CUBLAS"/lib/libcublas.so* | head -1)
  FLAGS="$FLAGS -DWITH_CUBLAS -I$CUBLAS/include $lib -Xlinker -rpath=$CUBLAS/lib"
fi
nvcc $FLAGS vs_regular.cu -lcuda -o vs_regular
