#!/usr/bin/env bash
# One card, two versions of the kernels: each standalone CUDA probe built
# against an older copy of ffi/ (BASE_FFI) and against this tree's ffi/,
# then run back to back, this tree's first, so that the pair shares the
# card, its clocks and its thermal state.  The probes check their kernels
# against float32 before they time them, so both builds are checked.
# Usage:
#   benchmarks/ab_probes.sh BASE_FFI OUT_DIR "probe args;probe args;..."
# where probe is a source under benchmarks/ without .cu, e.g.
#   benchmarks/ab_probes.sh .ab/ffi $OUT \
#     "skinny/variants --hot;skinny/variants --wide;small_groups_fwd/probe --configs"
# BASE_FFI comes from git where git works:
#   mkdir -p .ab && git archive <commit> ffi | tar x -C .ab
# Logs: OUT_DIR/<probe>_<arg>_{new,base}.txt, packed into OUT_DIR/ab.tgz
# (the originals removed) when PACK=1.  Needs nvcc for sm_90a.
set -uo pipefail
[ $# -eq 3 ] || { sed -n 2,16p "$0"; exit 2; }
repo=$(cd "$(dirname "$0")/.." && pwd)
base=$(cd "$1" && pwd) || exit 2
out=$2
mkdir -p "$out"
cd "$repo"
flags="-O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a"
status=0
IFS=';' read -r -a runs <<< "$3"
declare -A built=()
pids=()
for run in "${runs[@]}"; do  # build every probe twice, in parallel
  set -- $run
  p=$1
  [ -n "${built[$p]:-}" ] && continue
  built[$p]=1
  exe=/tmp/ab_${p//\//_}
  nvcc $flags -I ffi "benchmarks/$p.cu" -o "${exe}_new" > "${exe}_new.log" 2>&1 & pids+=($!)
  nvcc $flags -I "$base" "benchmarks/$p.cu" -o "${exe}_base" > "${exe}_base.log" 2>&1 & pids+=($!)
done
for pid in "${pids[@]}"; do wait "$pid" || status=1; done
for run in "${runs[@]}"; do
  set -- $run
  p=$1; shift
  exe=/tmp/ab_${p//\//_}
  name=${p//\//_}${1:+_${1#--}}
  for v in new base; do
    if [ -x "${exe}_$v" ]; then
      "${exe}_$v" "$@" > "$out/${name}_$v.txt" 2>&1 || status=1
    else
      cp "${exe}_$v.log" "$out/${name}_$v.txt"; status=1
    fi
    echo "--- $name $v: $(tail -1 "$out/${name}_$v.txt")"
  done
done
if [ -n "${PACK:-}" ]; then
  (cd "$out" && files=$(ls *_new.txt *_base.txt 2>/dev/null) && [ -n "$files" ] &&
   tar czf ab.tgz $files && rm -f $files) || status=1
fi
exit $status
