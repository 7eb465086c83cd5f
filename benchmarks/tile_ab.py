"""Kernel choices side by side on the `plain` scenario's loops (A and D at
device offsets), against jnp.dot, in one process: which kernel a rule should
pick, measured rather than guessed (not part of the test suite).

    python benchmarks/tile_ab.py [--dtype D] [--trans T] [--window S]
        [--repeats R] M,N,K:CHOICE,CHOICE ...

Each argument: a shape and the kernels to force on it, each CHOICE one of
- a direct tile (KernelOptions(direct_tile=...), with the SM90 tile of the
  tile's path), e.g. `tiny`, `small_m`;
- `ptr-TILE`: the ptr-array kernel on SM90 tile TILE (KernelOptions(tile=
  TILE, direct=False)), e.g. `ptr-medium` (float32: `ptr-large`,
  `ptr-medium`);
- `auto`: the planner's own choice.
e.g. `256,4096,4096:tiny,small_m` or, with `--trans nt`,
`2048,4096,4096:medium,ptr-medium`.  Prints, per shape, microseconds per
call of each choice and of XLA (`jnp.dot`, the same transposes),
device-timed by the bench's sustained, interleaved windows
(bench.time_loops).
"""

from __future__ import annotations

import argparse

import jax.numpy as jnp

import jax_dynoff as dyn
import bench
from jax_dynoff import plan

DTYPES = {"bf16": jnp.bfloat16, "f16": jnp.float16, "f32": jnp.float32}
TRANS = {"nn": (False, False), "nt": (False, True), "tn": (True, False)}


def options(choice: str):
  """The KernelOptions that force `choice` (None: the planner's)."""
  if choice == "auto":
    return None
  if choice.startswith("ptr-"):
    return dyn.KernelOptions(tile=choice.removeprefix("ptr-"), direct=False)
  return dyn.KernelOptions(
      tile=plan.DIRECT_TILE_PATHS[choice].removeprefix("sm90_"),
      direct_tile=choice)


def main(argv=None):
  p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  p.add_argument("cases", nargs="+")
  p.add_argument("--dtype", choices=DTYPES, default="bf16")
  p.add_argument("--trans", choices=TRANS, default="nn")
  p.add_argument("--window", type=float, default=0.5)
  p.add_argument("--repeats", type=int, default=3)
  args = p.parse_args(argv)
  bench.WINDOW_S = args.window
  dt, trans = DTYPES[args.dtype], TRANS[args.trans]
  for case in args.cases:
    shape, choices = case.split(":")
    m, n, k = (int(v) for v in shape.split(","))
    choices = choices.split(",")
    loops = [bench.plain_loops(m, n, k, dt, options(c), trans=trans)["ours"]
             for c in choices]
    loops.append(bench.plain_loops(m, n, k, dt, trans=trans)["xla"])
    iters = bench._iters(2.0 * m * n * k, True)  # pylint: disable=protected-access
    times = bench.time_loops(loops, iters, args.repeats)
    xla = times[-1]
    cells = [f"{c} {ms * 1e3:7.2f} us ({xla / ms:4.2f}x)"
             for c, ms in zip(choices, times)]
    print(f"{m}x{n}x{k} {args.dtype} {args.trans}: " + ", ".join(cells) +
          f", xla {xla * 1e3:7.2f} us", flush=True)


if __name__ == "__main__":
  main()
