#!/usr/bin/env bash
# One command for any GPU machine, offline: build jax_dynoff from a folder of
# wheels, run the whole test suite on the GPU (GPU tests included), then the
# side-by-side benchmark.  Usage:
#   benchmarks/run_gpu.sh [RESULTS_DIR]        (default: $OUT or ./gpu_results)
# Needs: python3 with jax[cuda], nanobind, scikit-build-core, pytest and
# hypothesis; the nvidia-cutlass wheel in ./.whl (pip download --no-deps -d
# .whl nvidia-cutlass==4.2.0.0 on a machine with network).
# Env: JOBS (build parallelism), TESTS (test paths relative to the repo,
# default: tests), PYTEST_ARGS (extra pytest args), SKIP_BENCH.
set -uo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
res=${1:-${OUT:-$repo/gpu_results}}
mkdir -p "$res"
cd "$repo"
status=0
step() { echo; echo "=== $* ($(date +%T))"; }

step "device"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm --format=csv
python3 -c "import jax; print('jax', jax.__version__, jax.devices())"

step "install CUTLASS headers (offline) and build"
python3 -m pip install -q --no-index --no-deps .whl/nvidia_cutlass-*.whl || exit 1
t0=$(date +%s)
CMAKE_BUILD_PARALLEL_LEVEL=${JOBS:-$(nproc)} JAX_DYNOFF_CUDA=ON \
  python3 -m pip install --no-build-isolation --no-deps -v . > "$res/build.log" 2>&1 \
  || { tail -60 "$res/build.log"; exit 1; }
echo "build took $(( $(date +%s) - t0 )) s"
grep -E "ptxas|warning" "$res/build.log" | head -20

step "tests on the GPU"
# From outside the repo so that the installed package is imported.
(cd /tmp && python3 -m pytest -q -p no:cacheprovider \
   $(for t in ${TESTS:-tests}; do echo "$repo/$t"; done) ${PYTEST_ARGS:-}) 2>&1 | tee "$res/pytest.log" | tail -40
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1

if [ -z "${SKIP_BENCH:-}" ]; then
  step "benchmark"
  (cd /tmp && python3 -m jax_dynoff.bench "$res" && \
     python3 -m jax_dynoff.bench --graphs "$res") 2>&1 | tee "$res/bench.log" || status=1
fi
exit $status
