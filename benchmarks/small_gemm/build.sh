#!/usr/bin/env bash
# Builds `probe` (probe.cu): one nvcc per candidate translation unit, in
# parallel.  CUTLASS from the nvidia-cutlass wheel (CUTLASS_DIR overrides).
set -euo pipefail
cd "$(dirname "$0")"
CUT=${CUTLASS_DIR:-$(python3 -c "import cutlass_library, os; print(os.path.join(os.path.dirname(cutlass_library.__file__), 'source'))")}
flags=(-std=c++17 -O3 -DNDEBUG --expt-relaxed-constexpr -diag-suppress=940,2473
       -gencode=arch=compute_90a,code=sm_90a -I ../../ffi -I "$CUT/include"
       -I "$CUT/tools/util/include" -DJAX_DYNOFF_WITH_SM90)
obj=$(mktemp -d)
pids=()
for f in probe.cu cand_*.cu registry.cu; do
  nvcc "${flags[@]}" -c "$f" -o "$obj/${f%.cu}.o" & pids+=($!)
done
for p in "${pids[@]}"; do wait "$p"; done
nvcc -gencode=arch=compute_90a,code=sm_90a "$obj"/*.o -o probe
rm -rf "$obj"
echo built probe
