"""The 64-expert moe forward under a kernel profiler (H200): every case is
compiled and run once first (XLA's autotuning launches included), then each
runs exactly once between cuProfilerStart / cuProfilerStop, so that `ncu
--profile-from-start off` reports one GEMM launch per case.  Each case's
floors are printed beside: FLOPs / 790 TFLOP/s, and the bytes it must move
(the tokens, every expert weight that has a row, the result) / 4.3 TB/s.
Cases, on (16384 tokens, 2048 -> 2048, bfloat16): a dense jnp.dot of the
same FLOPs (what XLA runs for it), the library's plain gemm on it (planned,
and the direct wide tile: 128x256 like the grouped one), and ragged_dot
over 64 experts with skewed sizes (the bench's), uniform sizes (64 x 256)
and one group holding every row.
`--shape E,T,d,f` profiles another layer (Qwen3-30B-A3B's down projection:
128,32768,768,2048).
Usage (on the GPU machine; without XLA's preallocation, or ncu saves and
restores the whole preallocated device memory around every replay pass
and takes minutes per kernel; `--kernel-name-base demangled -k
regex:PtrArray` keeps the grouped kernel alone: by its function name
alone, every CUTLASS kernel is `device_kernel`, and `-k regex:PtrArray`
matches none):
  XLA_PYTHON_CLIENT_PREALLOCATE=false ncu --profile-from-start off \
    --section SpeedOfLight --section MemoryWorkloadAnalysis \
    python3 benchmarks/moe_profile.py
"""

import argparse

import jax
import jax.numpy as jnp
import numpy as np

import jax_dynoff as dyn
import bench  # benchmarks/bench.py, beside this script
from ncu_case import cuda_driver, profiled  # (benchmarks/ is on the path)

PEAK_FLOPS, PEAK_BYTES = 790e12, 4.3e12


def main(argv=None):
  ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  ap.add_argument("--shape", default="64,16384,2048,2048",
                  help="experts, tokens, model dim d, expert dim f "
                  "(x is tokens x d, each expert's weight d x f)")
  E, T, d, f = (int(v) for v in ap.parse_args(argv).shape.split(","))
  x, w, _, _ = bench.moe_operands(E, T, d, f, jnp.bfloat16, 1)
  probe = bench.moe_probe_sizes(E, T, 1)
  sizes = {name: probe[name] for name in ("skewed", "uniform", "one group")}
  item = x.dtype.itemsize
  flops = 2.0 * T * d * f
  dense_bytes = (T * d + d * f + T * f) * item
  wide = dyn.KernelOptions(direct_tile="wide")
  cases = [
      ("dense jnp.dot (XLA)", jax.jit(jnp.dot), (x, w[0]), dense_bytes),
      ("dense, library gemm", jax.jit(dyn.gemm), (x, w[0]), dense_bytes),
      ("dense, library gemm, wide", jax.jit(
          lambda a, b: dyn.gemm(a, b, opts=wide)), (x, w[0]), dense_bytes)]
  for name, s in sizes.items():
    experts = int(np.count_nonzero(s))
    cases.append((f"ragged_dot {name} ({experts} experts)",
                  jax.jit(dyn.ragged_dot), (x, w, jnp.asarray(s)),
                  (T * d + experts * d * f + T * f) * item))
  for _, fn, args, _ in cases:  # compile (and autotune) outside the range
    jax.block_until_ready(fn(*args))
  cu = cuda_driver()
  print(f"{'case':36s} {'FLOP floor':>11s} {'byte floor':>11s}")
  for name, fn, args, nbytes in cases:
    with profiled(cu):
      jax.block_until_ready(fn(*args))
    print(f"{name:36s} {flops / PEAK_FLOPS * 1e6:8.1f} us "
          f"{nbytes / PEAK_BYTES * 1e6:8.1f} us  ({nbytes / 1e6:.0f} MB)",
          flush=True)


if __name__ == "__main__":
  main()
