#!/usr/bin/env bash
# Builds the sweep in parallel (one nvcc per configuration); run on the GPU
# machine:  benchmarks/sm90_tiles/build.sh [PATTERN] && benchmarks/sm90_tiles/sweep [M ...]
# PATTERN (grep -E on the configuration names, gen.sh) picks the candidates,
# e.g. "^direct_" for the direct kernel's.
set -euo pipefail
cd "$(dirname "$0")"
./gen.sh "${1:-.}"
source ./sweep_build.sh
build_sweep cfg main.cu sweep
