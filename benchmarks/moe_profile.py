"""The 64-expert moe forward under a kernel profiler (H200): each case runs
its GEMM kernel exactly once, so that `ncu` (filtered to the GEMM kernels)
reports one launch per case, beside the case's floors: FLOPs / 790 TFLOP/s
and the bytes it must move / 4.3 TB/s (the tokens, every expert weight
that has a row, the result).
Cases, on (16384 tokens, 2048 -> 2048, bfloat16): a dense jnp.dot of the
same FLOPs (cuBLAS), the library's plain gemm on it, and ragged_dot over 64
experts with skewed sizes (the bench's), uniform sizes (64 x 256) and one
group holding every row.
Usage (on the GPU machine):
  XLA_FLAGS=--xla_gpu_autotune_level=0 ncu -k regex:"device_kernel|nvjet" \
    --section SpeedOfLight --section MemoryWorkloadAnalysis \
    python3 benchmarks/moe_profile.py
"""

import jax
import jax.numpy as jnp
import numpy as np

import jax_dynoff as dyn
from jax_dynoff import bench

PEAK_FLOPS, PEAK_BYTES = 790e12, 4.3e12


def main():
  E, T, d, f = 64, 16384, 2048, 2048
  x, w, _, _ = bench.moe_operands(E, T, d, f, jnp.bfloat16, 1)
  one = np.zeros(E, np.int32)
  one[0] = T
  sizes = {"skewed": bench.moe_sizes(E, T, 1),
           "uniform": np.full(E, T // E, np.int32), "one group": one}
  item = x.dtype.itemsize
  flops = 2.0 * T * d * f
  dense_bytes = (T * d + d * f + T * f) * item
  cases = [("dense jnp.dot (cuBLAS)", jax.jit(jnp.dot), (x, w[0]), dense_bytes),
           ("dense, library gemm", jax.jit(dyn.gemm), (x, w[0]), dense_bytes)]
  for name, s in sizes.items():
    experts = int(np.count_nonzero(s))
    cases.append((f"ragged_dot {name} ({experts} experts)",
                  jax.jit(dyn.ragged_dot), (x, w, jnp.asarray(s)),
                  (T * d + experts * d * f + T * f) * item))
  print(f"{'case':36s} {'FLOP floor':>11s} {'byte floor':>11s}")
  for name, fn, args, nbytes in cases:
    # One run each: the profiler sees this case's kernels once.
    jax.block_until_ready(fn(*args))
    print(f"{name:36s} {flops / PEAK_FLOPS * 1e6:8.1f} us "
          f"{nbytes / PEAK_BYTES * 1e6:8.1f} us  ({nbytes / 1e6:.0f} MB)",
          flush=True)


if __name__ == "__main__":
  main()
