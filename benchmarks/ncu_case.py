"""One side of one bench case, compiled once and called a few times, for a
kernel profiler (`ncu`) to pick launches from:

    ncu --kernel-name regex:device_kernel --launch-skip 40 --launch-count 2 \\
        python benchmarks/ncu_case.py stacked 32 16 4096 ours

Cases: `plain M N K` and `stacked L M N` (bf16, or the dtype of a leading
`--dtype D`; float32 at default precision), side `ours` or `xla`; one
loop iteration per call (a stacked call is L GEMMs), 3 calls after one
warm-up.  Set XLA_FLAGS=--xla_gpu_autotune_level=0 so that XLA's compile
does not launch its own candidate kernels."""
import sys

import jax
import jax.numpy as jnp

from jax_dynoff import bench


def main(argv):
  dtype = jnp.bfloat16
  if argv[0] == "--dtype":
    dtype = jnp.dtype(argv[1])
    argv = argv[2:]
  case, *dims, side = argv
  dims = [int(d) for d in dims]
  if case == "plain":
    loops = bench.plain_loops(*dims, dtype)
  elif case == "stacked":
    loops = bench.stacked_loops(*dims, dtype)
  else:
    raise SystemExit(f"unknown case {case!r}")
  f, args = bench.compile_loop(loops[side], 1)
  for _ in range(4):
    jax.block_until_ready(f(*args))


if __name__ == "__main__":
  main(sys.argv[1:])
