#!/usr/bin/env bash
# Builds the sweep in parallel (one nvcc per configuration); run on the GPU
# machine: benchmarks/sm90_tiles/build.sh && benchmarks/sm90_tiles/sweep
set -euo pipefail
cd "$(dirname "$0")"
./gen.sh
CUT=$(python3 -c "import cutlass_library; print(cutlass_library.source_path)")
FLAGS="-std=c++17 -O3 -DNDEBUG --expt-relaxed-constexpr -gencode=arch=compute_90a,code=sm_90a \
  -I../../ffi -I$CUT/include -I$CUT/tools/util/include -I$(dirname $(which nvcc))/../include/cccl"
ls cfg_*.cu main.cu | xargs -P "$(nproc)" -I{} sh -c "nvcc $FLAGS -c {} -o {}.o"
nvcc -gencode=arch=compute_90a,code=sm_90a *.o -o sweep -lcuda
