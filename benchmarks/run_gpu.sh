#!/usr/bin/env bash
# One command for any GPU machine, offline: build jax_dynoff from a folder of
# wheels, run the whole test suite on the GPU (GPU tests included), then the
# side-by-side benchmark at XLA's default flags, with body graphs
# (cuda_graph_flags()) and with whole-loop graphs.  Usage:
#   benchmarks/run_gpu.sh [RESULTS_DIR]        (default: $OUT or ./gpu_results)
# Needs: python3 with jax[cuda], nanobind, scikit-build-core, pytest and
# hypothesis; the nvidia-cutlass wheel in ./.whl (pip download --no-deps -d
# .whl nvidia-cutlass==4.2.0.0 on a machine with network).
# Env: JOBS (build parallelism); WHEEL (install this wheel, built from the
# same source, instead of building); TESTS (test paths relative to the repo: one
# pytest run; default: the whole suite in 8 parallel shards on the one GPU,
# which mostly overlaps XLA compile time); PYTEST_ARGS (extra pytest args);
# SKIP_TESTS, SKIP_BENCH, SKIP_BENCH_TESTS (the bench's own tests); BENCH_ARGS (e.g. "--scenarios plain,stacked");
# PACK=1 ends by packing every file in RESULTS_DIR into RESULTS_DIR/results.tgz
# (and removing them), for a machine that returns only a few files;
# DIAG=1 adds the kernel-level diagnostics after the benchmark: the profiler
# timeline (benchmarks/timeline.py, whole-loop graphs), the ptr-array vs regular
# CUTLASS comparison (benchmarks/sm90_tiles/vs_regular, built alongside the
# library), the launch-cost and host-cost microbenchmarks
# (benchmarks/launch) and the sustained-load clocks (benchmarks/sustained.py).
# PROBES=1 adds the standalone CUDA probes after the tests (no JAX in them;
# each built here with nvcc, then run): the small-group forward and
# weight-gradient kernels checked against float32 and timed against their
# floors (benchmarks/small_groups_fwd, small_k_grad), what a skinny call
# costs before its first byte and what an L2 prefetch of the next layer
# buys (benchmarks/skinny/variants.cu --floors), where the shipped skinny
# kernel's time goes phase by phase (benchmarks/skinny/phases.cu), each
# logged to probe_<dir>_<file>[_<arg>].txt (PROBE_RUNS, ;-separated
# "source args" entries, replaces that list: e.g. "skinny/variants --deep"
# or "skinny/stream"), and the grouped tiles on
# MoE layers (the sm90_tiles grouped sweep: candidates matching PROBE_TILES,
# default "lib_|_2x1", on grouped_cases.py --peers PROBE_PEERS, default
# qwen3_30b_down,qwen3_30b_up,mixtral_up).
# The build directory (build/gpu) is reused when it survives between calls.
set -uo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
res=${1:-${OUT:-$repo/gpu_results}}
mkdir -p "$res"
cd "$repo"
status=0
step() { echo; echo "=== $* ($(date +%T))"; }
export PYTHONFAULTHANDLER=1 PYTHONUNBUFFERED=1

step "device"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv
python3 -c "import jax; print('jax', jax.__version__, jax.devices())"
# (No commit id here: a copied working tree may carry a stale .git.)

step "install CUTLASS headers (offline) and build"
python3 -m pip install -q --no-index --no-deps .whl/nvidia_cutlass-*.whl || exit 1
if [ -n "${DIAG:-}" ]; then  # needs only the headers: overlaps the build
  (benchmarks/sm90_tiles/build_vs_regular.sh > "$res/vs_regular_build.log" 2>&1 &&
   nvcc -O3 -std=c++17 -gencode=arch=compute_90,code=sm_90 \
     benchmarks/launch/param_size.cu -o benchmarks/launch/param_size \
     >> "$res/vs_regular_build.log" 2>&1 &&
   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a \
     benchmarks/launch/host_cost.cu -o benchmarks/launch/host_cost \
     >> "$res/vs_regular_build.log" 2>&1) & diag_build=$!
fi
t0=$(date +%s)
if [ -n "${WHEEL:-}" ]; then  # a wheel this source built earlier
  python3 -m pip install -q --no-deps --force-reinstall "$WHEEL" || exit 1
  echo "installed $WHEEL"
else
  CMAKE_BUILD_PARALLEL_LEVEL=${JOBS:-$(nproc)} JAX_DYNOFF_CUDA=ON \
    python3 -m pip install --no-build-isolation --no-deps -v \
    -C build-dir=build/gpu . > "$res/build.log" 2>&1 \
    || { tail -60 "$res/build.log"; exit 1; }
  echo "build took $(( $(date +%s) - t0 )) s"
  grep -E "ptxas|warning" "$res/build.log" | head -20
fi

run_pytest() {  # name, then pytest arguments (paths relative to the repo)
  local name=$1; shift
  (cd /tmp && python3 -m pytest -q -p no:cacheprovider "$@" ${PYTEST_ARGS:-}) \
    > "$res/pytest_$name.log" 2>&1
}

if [ -z "${SKIP_TESTS:-}" ]; then
  step "tests on the GPU"
  # From /tmp so that the installed package is imported.
  if [ -n "${TESTS:-}" ]; then
    run_pytest main $(for t in $TESTS; do echo "$repo/$t"; done) || status=1
  else
    # Eight processes share the GPU (a ninth of its memory each), then the
    # sanitizers' one runs alone (it allocates on demand).  No XLA
    # autotuning: it only picks among correct GEMM algorithms for the
    # reference, and it dominated the compile time of the kernel tests.
    export XLA_PYTHON_CLIENT_MEM_FRACTION=0.11 XLA_FLAGS="--xla_gpu_autotune_level=0"
    t=$repo/tests
    run_pytest kernels_ref "$t/test_gpu_kernels.py" \
      -k "match_reference and not split_k" & p1=$!
    run_pytest kernels "$t/test_gpu_kernels.py" \
      -k "not match_reference and not split_k and not sanitizers_clean" & p2=$!
    # (-k applies to both files: name the graphs module, or it is dropped.)
    run_pytest splitk_graphs "$t/test_gpu_kernels.py" \
      -k "split_k or gpu_graphs" "$t/test_gpu_graphs.py" & p3=$!
    run_pytest semantics "$t/test_semantics.py" & p4=$!
    # The bench's own tests run its --quick scenarios at full size on a GPU
    # (minutes): a shard of their own.
    # (SKIP_BENCH_TESTS=1 leaves them out.)
    if [ -z "${SKIP_BENCH_TESTS:-}" ]; then
      run_pytest bench "$t/test_bench.py" & p6=$!
    else
      p6=
    fi
    run_pytest ragged_sharding "$t/test_ragged.py" \
      "$t/test_ragged_reference.py" "$t/test_sharding.py" & p7=$!
    # The other files, alternately into two shards (one "rest" shard ran
    # past 500 s on an H200; the two halves took 100 and 90 s).
    rest=($(ls "$t"/test_*.py | grep -v -e test_gpu_kernels -e test_gpu_graphs \
      -e test_semantics -e test_bench -e test_ragged -e test_sharding))
    rest_a=(); rest_b=()
    for i in "${!rest[@]}"; do
      if (( i % 2 )); then rest_a+=("${rest[$i]}"); else rest_b+=("${rest[$i]}"); fi
    done
    run_pytest rest_a "${rest_a[@]}" & p5=$!
    run_pytest rest_b "${rest_b[@]}" & p8=$!
    for p in $p1 $p2 $p3 $p4 $p5 $p6 $p7 $p8; do wait "$p" || status=1; done
    # compute-sanitizer alone (memcheck, racecheck, synccheck over one warm
    # compile cache): a minute or two on an idle H200, over 350 s beside
    # the shards above.
    run_pytest sanitizers "$t/test_gpu_kernels.py" -k sanitizers_clean || status=1
    unset XLA_PYTHON_CLIENT_MEM_FRACTION XLA_FLAGS
  fi
  for f in "$res"/pytest_*.log; do
    echo "--- $(basename "$f"): $(tail -1 "$f")"
    grep -E "^(FAILED|ERROR)" "$f" | head -20
  done
fi

if [ -n "${PROBES:-}" ]; then
  step "probes"
  pflags="-O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I ffi"
  # Each: the probe's source under benchmarks/, then its arguments (a
  # source is built once a run, here, for every run of it).  PROBE_RUNS
  # (;-separated) replaces the default list, e.g.
  # "skinny/variants --deep;skinny/stream": the no-split tile and its loads,
  # answered on an H100 (benchmarks/results/2026-12-07-h100-d66a018).
  declare -A built=()
  IFS=';' read -r -a runs <<< "${PROBE_RUNS:-small_groups_fwd/probe;small_k_grad/probe;skinny/variants --floors;skinny/phases}"
  for run in "${runs[@]}"; do
    set -- $run
    p=$1; shift
    src=${p//\//_}
    name=$src${1:+_${1#--}}
    exe=/tmp/probe_$src
    if [ -z "${built[$p]:-}" ]; then
      rm -f "$exe"
      nvcc $pflags "benchmarks/$p.cu" -o "$exe" > "$res/probe_$name.txt" 2>&1
      built[$p]=1
    fi
    if [ -x "$exe" ]; then
      "$exe" "$@" >> "$res/probe_$name.txt" 2>&1 || status=1
    else
      status=1
    fi
    echo "--- probe $name: $(tail -1 "$res/probe_$name.txt")"
  done
  if benchmarks/sm90_tiles/build_grouped.sh "${PROBE_TILES:-lib_|_2x1}" \
       > "$res/grouped_sweep.txt" 2>&1 &&
     (cd /tmp && python3 "$repo/benchmarks/sm90_tiles/grouped_cases.py" \
       --peers "${PROBE_PEERS:-qwen3_30b_down,qwen3_30b_up,mixtral_up}" \
       > /tmp/grouped_cases.txt) 2>> "$res/grouped_sweep.txt"; then
    benchmarks/sm90_tiles/grouped_sweep /tmp/grouped_cases.txt \
      >> "$res/grouped_sweep.txt" 2>&1 || status=1
  else
    status=1
  fi
  echo "--- grouped sweep: $(tail -1 "$res/grouped_sweep.txt")"
fi

if [ -z "${SKIP_BENCH:-}" ]; then
  step "benchmark"
  (cd /tmp && python3 "$repo/benchmarks/bench.py" ${BENCH_ARGS:-} "$res" && \
     python3 "$repo/benchmarks/bench.py" --body-graphs ${BENCH_ARGS:-} "$res" && \
     python3 "$repo/benchmarks/bench.py" --graphs ${BENCH_ARGS:-} "$res") 2>&1 \
     | grep -v -E "^(W|I)[0-9]{4} " | tee "$res/bench.log" || status=1
fi
if [ -n "${DIAG:-}" ]; then
  step "diagnostics"
  gf=$(cd /tmp && python3 -c "import jax_dynoff as d; print(d.cuda_graph_flags(whole_loops=True))")
  (cd /tmp && XLA_FLAGS="$gf" python3 "$repo/benchmarks/timeline.py") 2>&1 \
    | grep -v -E "^(W|I)[0-9]{4} " | tee "$res/timeline_graphs.txt"
  (cd /tmp && python3 "$repo/benchmarks/sustained.py" --seconds 2 --rounds 2 \
     plain 4096 4096 4096 loop) 2>&1 | grep -v -E "^(W|I)[0-9]{4} " \
     | tee "$res/sustained.txt"
  if wait $diag_build; then
    benchmarks/sm90_tiles/vs_regular | tee "$res/vs_regular.txt"
    benchmarks/launch/param_size | tee "$res/param_size.txt"
    benchmarks/launch/host_cost | tee "$res/host_cost.txt"
  else
    tail -20 "$res/vs_regular_build.log"; status=1
  fi
fi
if [ -n "${PACK:-}" ]; then
  (cd "$res" && files=$(find . -type f ! -name results.tgz) &&
   [ -n "$files" ] && tar czf results.tgz $files && rm -f $files) || status=1
fi
exit $status
