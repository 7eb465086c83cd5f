"""The skinny path's two tiles side by side in the sweep's loops, and the
tile the call runs with the skinny path off: the data behind the planner's
tile rule (ffi/plan.h SkinnyTileChoice).

For each (m, n, k) of a grid (m <= 16, the skinny path) and each pattern
of sweep.OPTS_PATTERNS asked for, one process compiles a loop of the
sweep's cell per choice of CHOICES -- ours with
KernelOptions(skinny_tile="wide"), with "narrow", and with skinny=False
(the tiny path's tile, cluster-K where planned: "off") -- and XLA's own
loop; checks each of ours against XLA's; times them in turn
(bench.take_turns, the order reversed every other round, median); and
records microseconds per GEMM call of each, the planner's tile for the
cell and which choice was fastest.  The summary per K and n (the rule's
inputs): the cells each choice wins, the geometric mean of wide / narrow
and of off / the faster tile, so the crossovers read off it.

    python benchmarks/skinny_tiles.py OUT.json [--m 1,8,16]
        [--n 512,1024,2048,4096] [--k 256,512,768,1024,1536,2048,4096]
        [--patterns table,stacked,kv] [--settings body,default]
        [--dtype bfloat16] [--repeats 3] [--window 0.1] [--quick]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import statistics
import sys
import time

import jax
import jax.numpy as jnp

import bench  # benchmarks/bench.py, beside this script
import sweep  # benchmarks/sweep.py: the patterns and their checks
from jax_dynoff import plan as plan_lib
from jax_dynoff.options import KernelOptions

# The choices timed per cell, each as the options that force it.
CHOICES = {"wide": KernelOptions(skinny_tile="wide"),
           "narrow": KernelOptions(skinny_tile="narrow"),
           "off": KernelOptions(skinny=False)}


def _ints(text: str) -> tuple[int, ...]:
  return tuple(int(v) for v in text.split(","))


def measure(pattern, setting, dtype, m, n, k, repeats, window, quick) -> dict:
  """One cell: ours at each choice and XLA's loop, checked, then timed in
  turn."""
  gpu = jax.default_backend() == "gpu"
  build = sweep.BUILDERS[pattern]
  pats = [build(m, n, k, jnp.dtype(dtype), quick, o)
          for o in CHOICES.values()]
  loops = [p.ours for p in pats] + [pats[0].xla]
  for loop in loops:
    loop.compiler_options = sweep.SETTINGS[setting]
  iters = sweep._outer_iters(pats[0], dtype, gpu)  # pylint: disable=protected-access
  compiled = [bench.compile_loop(l, iters) for l in loops]
  want = compiled[-1][0](*compiled[-1][1])
  errs = [sweep._rel_err(f(*a), want) for f, a in compiled[:-1]]  # pylint: disable=protected-access
  times = bench.take_turns(
      [bench._timed(f, a) for f, a in compiled],  # pylint: disable=protected-access
      repeats, window if gpu else 0.0)
  us = [1e6 * statistics.median(t) / iters / pats[0].calls for t in times]
  # The planner's tile for each GEMM of the body with the options left at
  # their defaults (stacked's two GEMMs have K = k and K = n): the traced
  # specs of the first loop, the forced tile taken out.
  ours = pats[0].ours
  planned = [plan_lib.skinny_tile(dataclasses.replace(s, opts=KernelOptions()))
             for s in plan_lib.traced_specs(lambda *a: ours.body(0, *a),
                                            ours.carry, *ours.consts)]
  times_us = dict(zip(CHOICES, us))
  tile = min(("wide", "narrow"), key=times_us.get)
  return dict(pattern=pattern, setting=setting, dtype=dtype, m=m, n=n, k=k,
              **{f"{c}_us": t for c, t in times_us.items()}, xla_us=us[-1],
              wide_over_narrow=times_us["wide"] / times_us["narrow"],
              off_over_tile=times_us["off"] / times_us[tile],
              faster=tile, fastest=min(times_us, key=times_us.get),
              planned=planned, max_rel_err=max(errs),
              ok=max(errs) < sweep.TOLERANCE)


def summarize(cells: list[dict]) -> list[dict]:
  """Per pattern, setting, K and n (the rule's two inputs): the cells each
  tile wins (over m), the geometric mean of wide / narrow (> 1: narrow
  faster) and of off / the faster tile (< 1: the skinny path off faster),
  the cells where off is fastest, and the planned tile's time against the
  faster one's."""
  out = []
  keys = sorted({(c["pattern"], c["setting"], c["k"], c["n"]) for c in cells})
  for p, s, k, n in keys:
    cs = [c for c in cells
          if (c["pattern"], c["setting"], c["k"], c["n"]) == (p, s, k, n)]
    def gm(key):
      return math.exp(sum(math.log(c[key]) for c in cs) / len(cs))
    # Where every GEMM of the body plans one tile: its time against the
    # faster tile's (1: the rule chose the faster).
    lost = [min(c["wide_us"], c["narrow_us"]) / c[c["planned"][0] + "_us"]
            for c in cs if len(set(c["planned"])) == 1]
    out.append(dict(pattern=p, setting=s, k=k, n=n, cells=len(cs),
                    narrow_wins=sum(c["faster"] == "narrow" for c in cs),
                    wide_over_narrow_geomean=gm("wide_over_narrow"),
                    off_over_tile_geomean=gm("off_over_tile"),
                    off_wins=sum(c["fastest"] == "off" for c in cs),
                    planned_vs_best_min=min(lost) if lost else None))
  return out


def main(argv=None) -> int:
  ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  ap.add_argument("out")
  ap.add_argument("--m", type=_ints, default=(1, 8, 16))
  ap.add_argument("--n", type=_ints, default=(512, 1024, 2048, 4096))
  ap.add_argument("--k", type=_ints,
                  default=(256, 512, 768, 1024, 1536, 2048, 4096))
  ap.add_argument("--patterns", default="table")
  ap.add_argument("--settings", default="body")
  ap.add_argument("--dtype", default="bfloat16")
  ap.add_argument("--repeats", type=int, default=3)
  ap.add_argument("--window", type=float, default=0.1)
  ap.add_argument("--budget-s", type=float, default=math.inf)
  ap.add_argument("--quick", action="store_true")
  a = ap.parse_args(argv)
  for p in a.patterns.split(","):
    if p not in sweep.OPTS_PATTERNS:
      ap.error(f"pattern {p!r}: want one of {sweep.OPTS_PATTERNS}")
  for s in a.settings.split(","):
    if s not in sweep.SETTINGS:
      ap.error(f"setting {s!r}: want one of {tuple(sweep.SETTINGS)}")
  if any(m > 16 for m in a.m):
    ap.error("m <= 16: the skinny path")
  t0 = time.perf_counter()
  cells = []
  todo = [(p, s, m, n, k) for p in a.patterns.split(",")
          for s in a.settings.split(",") for m in a.m for n in a.n
          for k in a.k]
  for j, (p, s, m, n, k) in enumerate(todo):
    if time.perf_counter() - t0 > a.budget_s:
      print(f"budget spent: {len(todo) - j} cells not run", flush=True)
      break
    c = measure(p, s, a.dtype, m, n, k, a.repeats, a.window, a.quick)
    cells.append(c)
    print(f"[{j + 1}/{len(todo)} {time.perf_counter() - t0:5.0f} s] {p:7} "
          f"{s:7} {m:2}x{n}x{k}: wide {c['wide_us']:6.2f} narrow "
          f"{c['narrow_us']:6.2f} off {c['off_us']:6.2f} xla "
          f"{c['xla_us']:6.2f} us/call, planned {c['planned']}, fastest "
          f"{c['fastest']}"
          + ("" if c["ok"] else f" ERROR rel err {c['max_rel_err']:.3g}"),
          flush=True)
  summary = summarize(cells) if cells else []
  for r in summary:
    print(f"{r['pattern']:7} {r['setting']:7} k={r['k']:5} n={r['n']:5}: "
          f"narrow faster "
          f"in {r['narrow_wins']}/{r['cells']}, wide/narrow geomean "
          f"{r['wide_over_narrow_geomean']:.3f}, off fastest in "
          f"{r['off_wins']}/{r['cells']}, off/tile geomean "
          f"{r['off_over_tile_geomean']:.3f}, planned/best min "
          f"{r['planned_vs_best_min']}")
  with open(a.out, "w") as f:
    json.dump(dict(
        **bench.run_record("benchmarks/skinny_tiles.py", argv),
        cells=cells, summary=summary), f, indent=1)
  return 0 if all(c["ok"] for c in cells) else 1


if __name__ == "__main__":
  sys.exit(main())
