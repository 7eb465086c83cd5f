"""Where one sweep cell's loop iteration goes, ours beside XLA's.

The sweep (`sweep.py`) records per cell the ratio, the kernels and the
device busy time per inner iteration; a losing cell then needs its
timeline: which kernels each side runs, the idle gaps and what the device
waited for, and the host's events per GEMM call (thunks, launches, graph
launches, the predicate copies of a `cond`).  This builds the cell exactly
as the sweep does (`sweep.BUILDERS`, the same operands, the same per-compile
XLA options), then traces one call of each side (`timeline.trace`) and
prints, per side, `timeline.summarize` (kernels, busy fraction, idle per
iteration), `timeline.call_report` (the call's wall time outside the device
span, the host's heaviest events) and `timeline.per_call_host` (host events
that come once or more per GEMM call, with their count and duration).
Profiled host times are about twice the unprofiled ones (CUPTI's callbacks
on every launch); compare the two sides with each other, not with the
sweep's wall times.

    python benchmarks/cell_timeline.py PATTERN SETTING MxNxK [MxNxK ...]
        [--dtype bfloat16] [--iters N] [--warmup S] [--quick]

PATTERN is one of sweep.BUILDERS (table_nt too), SETTING one of
sweep.SETTINGS (default: XLA's flags; body: each loop body one CUDA
graph).  --iters: outer iterations in the traced call (default 4);
--warmup: seconds of calls before each trace (default 0.5 on a GPU).
"""

from __future__ import annotations

import argparse
import sys

import jax
import jax.numpy as jnp

import bench  # benchmarks/bench.py, beside this script
import sweep
import timeline


def parse_shape(text: str) -> tuple[int, int, int]:
  """'MxNxK' as (m, n, k), each a positive integer."""
  parts = text.lower().split("x")
  if len(parts) != 3 or not all(p.isdigit() and int(p) > 0 for p in parts):
    raise argparse.ArgumentTypeError(
        f"shape {text!r}: expected MxNxK with positive integers, e.g. 16x512x2048")
  m, n, k = (int(p) for p in parts)
  return m, n, k


def profile_cell(pattern: str, setting: str, dtype: str, shape, iters: int,
                 warmup_s: float, quick: bool = False) -> list[str]:
  """The report lines of one cell: per side its kernels and idle time per
  inner iteration and its host events per GEMM call."""
  m, n, k = shape
  p = sweep.BUILDERS[pattern](m, n, k, jnp.dtype(dtype), quick)
  lines = [f"{pattern} {setting} {dtype} {m}x{n}x{k}: {iters} outer x "
           f"{p.inner} inner iterations, {p.calls} GEMM calls an outer one"]
  calls = iters * p.calls
  for side, loop in (("ours", p.ours), ("xla", p.xla)):
    loop.compiler_options = sweep.SETTINGS[setting]
    f, args = bench.compile_loop(loop, iters)
    events, host, call = timeline.trace(f, args, warmup_s)
    if not events:
      lines.append(f"{side}: no device events in the trace (no GPU)")
      continue
    lines += timeline.summarize(side, events, iters * p.inner)
    lines += ["    " + l for l in timeline.call_report(events, host, call)]
    lines += ["    " + l for l in timeline.per_call_host(host, call, calls)]
  return lines


def main(argv=None) -> int:
  ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  ap.add_argument("pattern", choices=tuple(sweep.BUILDERS))
  ap.add_argument("setting", choices=tuple(sweep.SETTINGS))
  ap.add_argument("shapes", nargs="+", type=parse_shape, metavar="MxNxK")
  ap.add_argument("--dtype", default="bfloat16", choices=sweep.DTYPES)
  ap.add_argument("--iters", type=int, default=4)
  ap.add_argument("--warmup", type=float, default=None)
  ap.add_argument("--quick", action="store_true",
                  help="the sweep's short inner loops (CPU tests)")
  a = ap.parse_args(argv)
  if a.iters < 1:
    ap.error(f"--iters must be at least 1, got {a.iters}")
  warmup = a.warmup if a.warmup is not None else (
      0.5 if jax.default_backend() == "gpu" else 0.0)
  print(f"jax {jax.__version__}, {jax.devices()[0].device_kind}, warm-up "
        f"{warmup} s; per side: kernels and idle per inner iteration, host "
        "events per GEMM call (profiled)")
  for shape in a.shapes:
    for line in profile_cell(a.pattern, a.setting, a.dtype, shape, a.iters,
                             warmup, a.quick):
      print(line)
  return 0


if __name__ == "__main__":
  sys.exit(main())
