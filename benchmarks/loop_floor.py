"""What one iteration of a loop driven from the host costs, by what its body
holds, in one process (not part of the test suite).

At XLA's default flags a body of fewer than 5 thunks is no command buffer:
XLA enqueues its thunks one by one from the host, every iteration (with a
known trip count it does not wait for the device).  A loop whose device
work is shorter than those launches runs at the host's pace.  This times,
at the process's XLA flags, with body graphs (graphs.BODY_GRAPHS) and with
whole-loop graphs (graphs.WHOLE_LOOP_GRAPHS):

  xla_chain   y = jnp.dot(y, w) in an inner loop of L: XLA's GEMM
              kernels (at 128x1024x1024 a split-K Triton GEMM and its
              reduction) and the loop counter
  ours_chain  y = gemm(y, w) in an inner loop of L: XLA's copy of the
              carry (the call cannot write the operand it reads), our
              custom call and the loop counter
  ours_loop   the bench's `loop` scenario (gemm into a row window at a
              table offset, W[i] a window): our call and the counter
  xla_loop    XLA's loop of the same scenario (dynamic_index + dot +
              dynamic_update_slice)
  ours_while, xla_while
              the same two with the inner loop's bound an argument: a trip
              count XLA cannot know, so the host waits for the predicate
              every iteration unless the whole loop is one graph

all with L GEMMs of m x n x n (bfloat16), and for each the device events
per inner iteration and the median host time of the events that come once
per inner iteration (one profiler trace: a thunk's event, and its kernel
launch's event named after the kernel).  Each runs 20 outer iterations of
its inner loop of L, as the bench does.  The trace puts our call's thunk
beside XLA's counter thunk in the same loop: where they cost the host the
same, a body of one call and a counter cannot go faster than two thunk
launches at these flags.

    python benchmarks/loop_floor.py [--shape L,m,n] [--repeats R]
        [--variants ours_loop,xla_loop] [--settings defaults,body,whole]
        [--no-trace]
"""

from __future__ import annotations

import argparse
import collections
import statistics

import jax
import jax.numpy as jnp
from jax import lax

import jax_dynoff as dyn
import bench  # benchmarks/bench.py, beside this script
from jax_dynoff.graphs import BODY_GRAPHS, WHOLE_LOOP_GRAPHS


def chain_loops(L: int, m: int, n: int) -> dict:
  kx, kw = jax.random.split(jax.random.key(m + n))
  y = bench._rand(kx, (m, n), jnp.bfloat16)  # pylint: disable=protected-access
  w = bench._rand(kw, (n, n), jnp.bfloat16,  # pylint: disable=protected-access
                  1.0 / n ** 0.5)

  # Each an inner loop of L GEMMs, as the bench's `loop` scenario is.
  def xla(j, y, w):
    del j
    return lax.fori_loop(0, L, lambda i, y: jnp.dot(
        y, w, preferred_element_type=jnp.float32).astype(y.dtype), y)

  def ours(j, y, w):
    del j
    return lax.fori_loop(0, L, lambda i, y: dyn.gemm(y, w), y)

  return {"xla_chain": bench.Loop(xla, y, (w,)),
          "ours_chain": bench.Loop(ours, y, (w,))}


def while_loops(L: int, m: int, n: int) -> dict:
  """The `loop` scenario's two sides with a trip count XLA cannot know
  (bench.small_loop_loops with traced_bound): at XLA's defaults and with
  body graphs XLA copies the predicate to the host and waits for it every
  iteration; only a whole-loop graph keeps that on the device."""
  small = bench.small_loop_loops(L, m, n, traced_bound=True)
  return {"ours_while": small["ours"], "xla_while": small["xla"]}


def per_iteration_events(loop: bench.Loop, outer: int, L: int):
  """(device events per inner iteration, [(host event, count per inner
  iteration, median us)] of the host events seen once per inner iteration
  or more), from one profiler trace of `outer` x L iterations."""
  f, args = bench.compile_loop(loop, outer)
  host, device = bench._host_events(f, args)  # pylint: disable=protected-access
  iters = outer * L
  by_name = collections.defaultdict(list)
  for name, d in host:
    by_name[name].append(d)
  rows = [(name, len(ds) / iters, statistics.median(ds))
          for name, ds in by_name.items() if len(ds) >= iters]
  rows.sort(key=lambda r: -r[2])
  return device / iters, rows


def main(argv=None):
  p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  p.add_argument("--shape", default="64,128,1024", help="L,m,n")
  p.add_argument("--repeats", type=int, default=5)
  p.add_argument("--variants", default=None,
                 help="comma-separated subset of the variants (default: all)")
  p.add_argument("--settings", default="defaults,body,whole",
                 help="comma-separated subset of defaults (the process's "
                 "flags), body, whole")
  p.add_argument("--no-trace", dest="trace", action="store_false",
                 help="times only, no profiler trace per variant")
  a = p.parse_args(argv)
  L, m, n = (int(v) for v in a.shape.split(","))
  bench.WINDOW_S = 0.5
  small = bench.small_loop_loops(L, m, n)
  loops = dict(chain_loops(L, m, n))
  outer = 20
  loops["ours_loop"] = small["ours"]
  loops["xla_loop"] = small["xla"]
  loops.update(while_loops(L, m, n))
  if a.variants:
    loops = {k: loops[k] for k in a.variants.split(",")}
  names = list(loops)
  settings = {"defaults": ("process flags", None),
              "body": ("body graphs", BODY_GRAPHS),
              "whole": ("whole-loop graphs", WHOLE_LOOP_GRAPHS)}
  for setting, options in (settings[k] for k in a.settings.split(",")):
    variants = [bench.Loop(l.body, l.carry, l.consts, options)
                for l in loops.values()]
    times = bench.time_loops(variants, outer, a.repeats)
    print(f"== {setting}: L={L} {m}x{n}x{n} bfloat16, us per inner iteration "
          f"(median of {a.repeats} interleaved windows)")
    for name, t in zip(names, times):
      print(f"{name:12s} {t * 1e3 / L:8.2f}")
    for name, l in zip(names, variants if a.trace else ()):
      dev, rows = per_iteration_events(l, outer, L)
      print(f"  {name}: {dev:.2f} device events per iteration; host events "
            "per iteration (count, median us):")
      for ev, count, med in rows[:8]:
        print(f"    {count:5.2f}x {med:8.2f}  {ev[:90]}")


if __name__ == "__main__":
  main()
