"""Bench loops under a sustained load, with the GPU's SM clock and power.

An H200 under dense GEMMs runs at its power limit, where the SM clock drops
by 10% or more within a second; a kernel's time then depends on its energy
per FLOP as much as on its cycles.  The bench's short interleaved rounds
and a profiler trace (which starts after an idle pause, at cold clocks) see
different clocks; this runs each side's compiled loop back to back for
`--seconds`, the sides taking turns for `--rounds`, and samples
`nvidia-smi` meanwhile (every 50 ms).

    python benchmarks/sustained.py [--seconds S] [--rounds R]
                                   [--dtype D] plain M N K | loop

plain: ours (the planner's choice), ours_large / ours_wide (the same loop
with the direct tile forced, KernelOptions(direct_tile=...), each compiled
apart; float32 has ours_large only, its direct kernel, which the planner
takes for m <= 4096), xla (jnp.dot), in the dtype of the last
`--dtype` before it (default bfloat16; float32 runs at default precision,
TF32 on both sides).
loop: the bench's 64 small GEMMs, ours and xla, each also compiled with
`xla_gpu_graph_min_graph_size=1` (*_mgs1): XLA forms no command buffer of
fewer thunks than that (default 5), and our loop body has four.

Prints one line per side and round (us per iteration over the window's
second half, median SM clock in MHz, power in W, temperature), then the
median over rounds per side.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import threading
import time

import jax
import jax.numpy as jnp

import jax_dynoff as dyn
import bench  # benchmarks/bench.py, beside this script


class GpuSampler:
  """nvidia-smi every 50 ms in a thread: (monotonic time, clock MHz, W, C)."""

  def __init__(self):
    self.samples = []
    self._p = subprocess.Popen(
        ["nvidia-smi", "--query-gpu=clocks.sm,power.draw,temperature.gpu",
         "--format=csv,noheader,nounits", "-lms", "50"],
        stdout=subprocess.PIPE, text=True)
    self._t = threading.Thread(target=self._read, daemon=True)
    self._t.start()

  def _read(self):
    for line in self._p.stdout:
      try:
        clock, power, temp = (float(v) for v in line.split(","))
      except ValueError:
        continue
      self.samples.append((time.monotonic(), clock, power, temp))

  def stop(self):
    self._p.terminate()


def window_stats(samples, t0, t1):
  """Median clock, power and temperature of the samples within [t0, t1]
  (None for each when there are none)."""
  inside = [s for s in samples if t0 <= s[0] <= t1]
  if not inside:
    return None, None, None
  return tuple(statistics.median(s[i] for s in inside) for i in (1, 2, 3))


def run_for(f, args, seconds, iters):
  """The bench's sustained window (`bench.sustained`) of the compiled loop:
  (us per iteration, (start, end) of the window's second half)."""
  stamps = []

  def once():
    t0 = time.monotonic()
    jax.block_until_ready(f(*args))
    stamps.append((t0, time.monotonic()))
    return stamps[-1][1] - t0

  us = bench.sustained(once, seconds) / iters * 1e6
  half = stamps[len(stamps) // 2:]
  return us, (half[0][0], half[-1][1])


def plain_side_loops(m, n, k, dtype=jnp.bfloat16):
  """The plain sides' loops: bench.plain_loops' two, and its `ours` with the
  direct tile forced to large / wide (float32: large) (on the same
  operands: each call of plain_loops draws the same ones)."""
  loops = bench.plain_loops(m, n, k, dtype)
  sides = {"ours": loops["ours"]}
  forced = ("large",) if jnp.dtype(dtype) == jnp.float32 else ("large", "wide")
  for tile in forced:
    sides["ours_" + tile] = bench.plain_loops(
        m, n, k, dtype, dyn.KernelOptions(direct_tile=tile))["ours"]
  sides["xla"] = loops["xla"]
  return sides


def plain_sides(m, n, k, iters, dtype=jnp.bfloat16):
  return {side: bench.compile_loop(loop, iters)
          for side, loop in plain_side_loops(m, n, k, dtype).items()}


def loop_sides(iters=4, L=64, m=128, n=1024):
  loops = bench.small_loop_loops(L, m, n)
  sides = {}
  for side in ("ours", "xla"):
    sides[side] = bench.compile_loop(loops[side], iters)
    mgs1 = bench.Loop(loops[side].body, loops[side].carry, loops[side].consts,
                      {"xla_gpu_graph_min_graph_size": "1"})
    sides[side + "_mgs1"] = bench.compile_loop(mgs1, iters)
  return sides


def main(argv):
  seconds, rounds, cases, dtype = 3.0, 2, [], jnp.dtype(jnp.bfloat16)
  while argv:
    a = argv.pop(0)
    if a == "--dtype":
      dtype = jnp.dtype(argv.pop(0))
    elif a == "--seconds":
      seconds = float(argv.pop(0))
    elif a == "--rounds":
      rounds = int(argv.pop(0))
    elif a == "plain":
      m, n, k = (int(argv.pop(0)) for _ in range(3))
      iters = bench._iters(2.0 * m * n * k, True)
      cases.append((f"plain {m}x{n}x{k} {dtype.name}",
                    plain_sides(m, n, k, iters, dtype), iters))
    elif a == "loop":
      cases.append(("loop L64 128x1024x1024 (per GEMM call)", loop_sides(),
                    4 * 64))
    else:
      raise SystemExit(f"unknown argument {a!r}")
  sampler = GpuSampler()
  print(f"jax {jax.__version__}, {jax.devices()[0]}, {seconds} s per side "
        f"and round, {rounds} rounds")
  try:
    for label, sides, iters in cases:
      per_side = {s: [] for s in sides}
      for r in range(rounds):
        for side, (f, args) in sides.items():
          jax.block_until_ready(f(*args))  # first-call costs outside
          us, (t0, t1) = run_for(f, args, seconds, iters)
          clock, power, temp = window_stats(sampler.samples, t0, t1)
          per_side[side].append(us)
          print(f"{label} round {r} {side:12s} {us:9.2f} us/iter  "
                f"SM {clock} MHz  {power} W  {temp} C", flush=True)
      for side, ts in per_side.items():
        print(f"{label} median {side:12s} {statistics.median(ts):9.2f} us/iter")
  finally:
    sampler.stop()


if __name__ == "__main__":
  main(sys.argv[1:] or ["plain", "4096", "4096", "4096"])
