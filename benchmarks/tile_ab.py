"""Direct tiles side by side on the `plain` scenario's loops (A and D at
device offsets), against jnp.dot, in one process: which tile a rule should
pick, measured rather than guessed (not part of the test suite).

    python benchmarks/tile_ab.py [--window S] [--repeats R] M,N,K:TILE,TILE ...

Each argument: a bfloat16 shape and the direct tiles to force on it
(KernelOptions(direct_tile=...), with the SM90 tile of the tile's path), e.g.
`128,4096,4096:tiny,tiny_pair`.  Prints, per shape, microseconds per call of
each tile and of XLA (`jnp.dot`), device-timed by the bench's sustained,
interleaved windows (jax_dynoff.bench.time_loops).
"""

from __future__ import annotations

import argparse

import jax.numpy as jnp

import jax_dynoff as dyn
from jax_dynoff import bench, plan


def main(argv=None):
  p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  p.add_argument("cases", nargs="+")
  p.add_argument("--window", type=float, default=0.5)
  p.add_argument("--repeats", type=int, default=3)
  args = p.parse_args(argv)
  bench.WINDOW_S = args.window
  for case in args.cases:
    shape, tiles = case.split(":")
    m, n, k = (int(v) for v in shape.split(","))
    tiles = tiles.split(",")
    loops = []
    for t in tiles:
      opts = dyn.KernelOptions(
          tile=plan.DIRECT_TILE_PATHS[t].removeprefix("sm90_"), direct_tile=t)
      loops.append(bench.plain_loops(m, n, k, jnp.bfloat16, opts)["ours"])
    loops.append(bench.plain_loops(m, n, k, jnp.bfloat16)["xla"])
    iters = bench._iters(2.0 * m * n * k, True)  # pylint: disable=protected-access
    times = bench.time_loops(loops, iters, args.repeats)
    xla = times[-1]
    cells = [f"{t} {ms * 1e3:7.2f} us ({xla / ms:4.2f}x)"
             for t, ms in zip(tiles, times)]
    print(f"{m}x{n}x{k} bf16: " + ", ".join(cells) +
          f", xla {xla * 1e3:7.2f} us", flush=True)


if __name__ == "__main__":
  main()
