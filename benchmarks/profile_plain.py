"""Kernel-level view of one `plain` bench case (ours and jnp.dot), for
`nsys profile --stats=true python benchmarks/profile_plain.py M N K`: which
kernels each loop iteration launches besides the GEMM, and their times."""
import sys

import jax.numpy as jnp

import bench  # benchmarks/bench.py, beside this script

m, n, k = (int(v) for v in sys.argv[1:4]) if len(sys.argv) > 3 else (128, 4096, 4096)
row = bench.plain(m, n, k, jnp.bfloat16, 50, 2)
bench.print_row(row)
