"""Where the skinny kernel's row blocks beat the SM90 tiles: stacked layers
`x = x @ W[i]` (m x n x n, bf16) for a range of m and n, each way of
running them timed on the device inside one whole-loop CUDA graph (so the
kernels, not the host's launches, set the time): the planner's default,
the skinny kernel forced (`KernelOptions(tile="skinny")`: 16-row blocks up
to m = 16, 64-row blocks above), the SM90 tiles forced, and XLA's loop.

    python benchmarks/skinny_rows.py [--quick] [--ways=default,skinny] [M,N ...]

Prints us per layer for each and which is fastest; the planner's rule for
the skinny path (ffi/planner.cc) comes from this table.
"""

from __future__ import annotations

import sys

import jax
import jax.numpy as jnp

import jax_dynoff as dyn
from jax_dynoff import bench

SHAPES = [(16, 1024), (32, 1024), (64, 1024), (128, 1024), (256, 1024),
          (16, 4096), (32, 4096), (64, 4096), (128, 4096), (256, 4096)]
WAYS = {"default": None, "skinny": dyn.KernelOptions(tile="skinny"),
        "tiny": dyn.KernelOptions(tile="tiny", skinny=False),
        "small_m": dyn.KernelOptions(tile="small_m", skinny=False),
        "medium": dyn.KernelOptions(tile="medium", skinny=False)}


def main(argv):
  quick = "--quick" in argv
  shapes = [tuple(int(v) for v in a.split(",")) for a in argv
            if not a.startswith("--")] or SHAPES
  ways = next((a.split("=", 1)[1].split(",") for a in argv
               if a.startswith("--ways=")), list(WAYS))
  bench.WINDOW_S = 0.2 if quick else 0.5
  graphs = dyn.cuda_graph_options()
  L = 16
  print(f"jax {jax.__version__}, {jax.devices()[0].device_kind}; us per "
        f"layer, whole-loop graphs, L = {L}")
  print(f"{'m':>5} {'n':>5} " + " ".join(f"{w:>8}" for w in ways) +
        f" {'xla':>8}  fastest  (default plan)")
  for m, n in shapes:
    loops, names = [], []
    for way in ways:
      opts = WAYS[way]
      pair = bench.stacked_loops(L, m, n, jnp.bfloat16, opts)
      loops.append(bench.Loop(pair["ours"].body, pair["ours"].carry,
                              pair["ours"].consts, graphs))
      names.append(way)
    xla = pair["xla"]
    loops.append(bench.Loop(xla.body, xla.carry, xla.consts, graphs))
    names.append("xla")
    ms = bench.time_loops(loops, 10, 2 if quick else 3)
    us = {nm: t * 1e3 / L for nm, t in zip(names, ms)}
    best = min(us, key=us.get)
    plan = dyn.explain(lambda x, w: dyn.gemm(x, dyn.window(w, (0, 0, 0),
                                                            (n, n))),
                       jnp.zeros((m, n), jnp.bfloat16),
                       jnp.zeros((1, n, n), jnp.bfloat16))[0]
    print(f"{m:>5} {n:>5} " + " ".join(f"{us[w]:8.2f}" for w in ways) +
          f" {us['xla']:8.2f}  {best:8} ({plan.split(' ')[0]})", flush=True)


if __name__ == "__main__":
  main(sys.argv[1:])
