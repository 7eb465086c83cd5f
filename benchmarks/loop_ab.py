"""The `loop` scenario (L GEMMs m x n x n into row slices of one buffer at
offsets from a device table, in one fori_loop) with each kernel choice under
each graph setting, against XLA's loop, in one process (not part of the
test suite).

    python benchmarks/loop_ab.py [--shape L,m,n] [--repeats R] CHOICE ...

CHOICE: `auto` (the planner's) or a direct tile (`tiny`, `cluster_k`,
`small_m`, ...).  Per choice, microseconds per GEMM call of ours at the
process's XLA flags, with body graphs (graphs.BODY_GRAPHS: each iteration
one graph, the loop on the host), without command buffers, and unrolled by
8; then XLA's loop at the process's flags and with body graphs.
Device-timed by the bench's sustained, interleaved windows
(bench.time_loops).
"""

from __future__ import annotations

import argparse

import bench  # benchmarks/bench.py, beside this script



def main(argv=None):
  import os
  import sys
  sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
  from tile_ab import options  # pylint: disable=import-outside-toplevel

  p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  p.add_argument("choices", nargs="+")
  p.add_argument("--shape", default="64,128,1024")
  p.add_argument("--window", type=float, default=0.5)
  p.add_argument("--repeats", type=int, default=3)
  args = p.parse_args(argv)
  bench.WINDOW_S = args.window
  L, m, n = (int(v) for v in args.shape.split(","))
  kinds = ("ours", "ours_bodygraph", "ours_nograph", "ours_unroll8")
  loops, names = [], []
  for c in args.choices:
    variants = bench.small_loop_loops(L, m, n, options(c))
    for k in kinds:
      loops.append(variants[k])
      names.append(f"{c}:{k.removeprefix('ours_') if k != 'ours' else 'flags'}")
  variants = bench.small_loop_loops(L, m, n)
  for k in ("xla", "xla_bodygraph"):
    loops.append(variants[k])
    names.append(k)
  times = bench.time_loops(loops, 20, args.repeats)
  xla, xla_body = times[-2], times[-1]
  print(f"loop L{L} {m}x{n}x{n} bf16, us per GEMM call "
        f"(ratio = XLA's loop at the same setting / ours):")
  for name, ms in zip(names, times):
    ref = xla_body if name.endswith(":bodygraph") else xla
    tail = "" if name.startswith("xla") else f"  ({ref / ms:4.2f}x)"
    print(f"  {name:24s} {ms * 1e3 / L:7.2f} us{tail}", flush=True)


if __name__ == "__main__":
  main()
