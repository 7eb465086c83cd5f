"""jax_dynoff.ragged_dot's forward on one MoE layer, run a few times and
nothing else: the program to put under a profiler (ncu) to read the
grouped kernels as they run in a layer.  Group sizes as
benchmarks/moe_peers.py draws them (uniform, or skewed: a Dirichlet(0.3)
draw with empty groups).  Usage:
  python benchmarks/ragged_once.py EXPERTS ROWS K N [--groups uniform,skewed]
      [--repeats 2]
e.g., the decode layer of moe_peers.py's decode_e64 under ncu, its weights
cold as a layer streams them:
  XLA_FLAGS=--xla_gpu_autotune_level=0 ncu --cache-control all \
    -k regex:SmallGroupFwd python benchmarks/ragged_once.py 64 512 4096 4096
Prints each setting's group sizes.
"""

from __future__ import annotations

import argparse
import sys

import jax
import jax.numpy as jnp
import numpy as np

import jax_dynoff as dyn
import moe_peers  # benchmarks/moe_peers.py, beside this script


def main(argv=None) -> int:
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  for dim in ("experts", "rows", "k", "n"):
    ap.add_argument(dim, type=int)
  ap.add_argument("--groups", default="uniform,skewed")
  ap.add_argument("--repeats", type=int, default=2)
  a = ap.parse_args(argv)
  kx, kw = jax.random.split(jax.random.PRNGKey(0))
  x = jax.random.normal(kx, (a.rows, a.k), jnp.bfloat16)
  w = jax.random.normal(kw, (a.experts, a.k, a.n), jnp.bfloat16)
  f = jax.jit(dyn.ragged_dot)
  for kind in a.groups.split(","):
    g = moe_peers.group_sizes(kind, a.experts, a.rows)
    print(kind, np.asarray(g).tolist(), flush=True)
    for _ in range(a.repeats):
      f(x, w, jnp.asarray(g)).block_until_ready()
  return 0


if __name__ == "__main__":
  sys.exit(main())
