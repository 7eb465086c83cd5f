"""The acceptance sweep for small GEMMs in loops: jax_dynoff against XLA's
own loop over a grid of shapes, per loop pattern, dtype and graph setting.

A bench of a few shapes hides losses; this measures a grid over m in
M_VALUES and n, k in NK_VALUES (non-square pairs included; `--cells C`
samples C cells per pattern, NAMED_CELLS among them, so that every value of
m, n and k appears, `sample_grid`; `--full` runs the whole product, 324
cells) for five patterns, each a jitted outer `fori_loop` around an inner
loop of L GEMM calls, every operand an argument (never a constant of the
program) and random, never zeros:

  table     L = 48 GEMMs (m x n x k): A's rows at `table[i] * m` of one
            buffer, D written at `i * m` of another (XLA: dynamic_slice +
            dot + dynamic_update_slice)
  stacked   a chain through stacked weights, two GEMMs a layer, L = 8
            layers: h = x @ W1[i] (k -> n), x = h @ W2[i] (n -> k); the
            weights are read in place (XLA: dynamic_index_in_dim + dot)
  cond      L = 24 steps, `lax.cond` on a table picks one of two GEMMs
            x @ W[i] written at rows from two tables (one with alpha = -1)
  kv        KV-cache writes: 8 layers x 4 positions, x (m tokens x k) @
            W[layer] into cache[layer, pos[s // 8] : + m, :]
  backward  jax.grad wrt x and W of a loss over L = 8 windowed (m x k)
            slices of x at `table[i] * m`, each times W, against a fixed
            cotangent (dX and dW per slice; the loss is linear, so the
            forward's value goes unused.  With W a whole array both
            products are XLA's dots under the default
            KernelOptions.xla_cotangent_dot, so ours runs no jax_dynoff
            kernel there)

and, by name only (`--patterns table_nt`), table_nt: the table loop with
the weight stored (n, k), x @ W^T, the skinny path with B transposed.

at XLA's default flags ("default") and with each loop body one CUDA graph
("body": graphs.BODY_GRAPHS, what `cuda_graph_flags()` sets), both in one
process through per-compile options.  Each side is compiled once
(`bench.compile_loop`) and that executable is checked, timed and traced.
Before timing, ours is checked against XLA's loop on the same inputs (the
largest relative error over the outputs, below TOLERANCE; a mismatch is
printed as an ERROR, recorded, and makes the exit status 1).  Timing
mirrors `bench.time_loops`: each call of the compiled outer loop blocks,
the two sides take turns (the order reversed every other round),
`--repeats` rounds of `--window` seconds each (`bench.sustained`; one call
on a CPU), median; the outer trip count makes a call a few milliseconds on
a GPU.  One profiler trace per side gives the kernels, the device busy
time and the command-buffer (CUDA graph) launches per inner iteration
(None without a GPU).

Per cell sweep.json records: ours_us_per_call / xla_us_per_call (time per
GEMM call, calls_per_iter calls per outer iteration), ratio = XLA / ours
(> 1: ours faster), L (inner trip count), ours_ / xla_kernels_per_iter,
ours_ / xla_busy_us_per_iter, ours_ / xla_graphs_per_iter (1: the body
is one graph; 0: XLA launches its thunks one by one), flops and bytes
(per outer iteration, the fewest bytes), floor_us (per call: max(flops / 790 TFLOP/s, bytes / 4.3
TB/s), bench.PEAK_*), roofline_pct, tbps (weights read per second by ours:
stacked, cond, kv), max_rel_err, ok.

Run time: on an H200 a cell (both sides) took 1.8-2.0 s at the default
window (compiling, checking, 6 windows of 0.1 s and two traces: table,
stacked and cond, bfloat16, 138 cells in 263 s), so the default run, 5
patterns x 18 cells x 2 dtypes x 2 settings = 360 cells, should take about
13 minutes (an estimate: kv and backward were not in that run, and
backward's programs compile longer); `--budget-s` stops starting cells.

    python benchmarks/sweep.py OUT_DIR [--cells C | --full] [--no-named]
        [--m 1,8 --n 512 --k 768] [--patterns table,stacked,cond,kv,backward]
        [--dtypes bfloat16,float16] [--settings default,body] [--repeats R]
        [--window S] [--budget-s T] [--quick] [--loop-graph-pads P]
    python benchmarks/sweep.py OUT_DIR --from-json sweep.json   (maps only)

Writes OUT_DIR/sweep.json (the cells, the skipped ones, and a summary per
pattern, setting and dtype: min and geometric mean of the ratio, worst
cell, cells below 1, stacked's slowest weight stream at m <= 16 and K * N
>= 2048^2, the median graph launches per iteration of each side) and one
heat map per pattern and setting, OUT_DIR/sweep_{pattern}_{setting}.png
(m down, the sampled (n, k) pairs across, bfloat16 and float16 side by
side), and prints the summary last.
`--quick` shortens the inner loops and, where --m / --n / --k are not
given, takes QUICK_GRID's tiny shapes (the CPU test).
`--loop-graph-pads P` gives ours' calls KernelOptions(loop_graph_pads=P)
(the patterns of OPTS_PATTERNS only; each cell records it, None for the
library's default): what the pads cost where the body is a graph anyway
is the same cells run with 0 and without, on one machine.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import statistics
import sys
import time
from typing import Callable, Optional

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

import jax_dynoff as dyn
import bench  # benchmarks/bench.py, beside this script
from jax_dynoff.graphs import BODY_GRAPHS

M_VALUES = (1, 8, 16, 32, 64, 96, 128, 256, 512)
NK_VALUES = (512, 768, 1024, 1536, 2048, 4096)
# Cells every sample starts from (they count towards --cells): the shapes
# users reported losing at, and cells of the stacked target (m <= 16,
# K * N >= 2048^2), so that its figure is never missing from a sample.
NAMED_CELLS = ((96, 1536, 768), (8, 2048, 2048), (16, 4096, 4096),
               (256, 2048, 2048), (512, 2048, 2048))
PATTERNS = ("table", "stacked", "cond", "kv", "backward")
SETTINGS = {"default": None, "body": BODY_GRAPHS}
DTYPES = ("bfloat16", "float16")
# --quick's grid where no --m / --n / --k is given: tiny shapes that a CPU
# runs in a fraction of a second per cell.
QUICK_GRID = {"m": (8,), "n": (64,), "k": (64,)}
# ||ours - xla|| / ||xla|| allowed per output array: both round to 16 bits,
# and the chains (stacked: 16 GEMMs, each rounded) round their intermediate
# results differently; an H200 run measured at most 1.2e-2 (stacked, bf16).
TOLERANCE = 3e-2


def sample_grid(cells: int, ms, ns, ks, include=(), seed: int = 0
                ) -> list[tuple]:
  """`cells` (m, n, k) triples of the product ms x ns x ks, deterministic.
  The triples of `include` that lie in the product come first; then, one
  at a time, the m value with the fewest cells so far (the first in `ms` on
  a tie) takes the (n, k) pair, in a seeded random order, that brings the
  most n and k values not yet covered, then a pair not yet used.  Every m
  value appears once cells >= len(include) + len(ms), every n and k value
  once cells >= len(include) + max(len(ns), len(ks)); with the default
  grid and NAMED_CELLS (5 m values already) once cells >= 9.  The m values
  get equal shares, give or take one, where `include` does not tip them.
  Sorted by (m, n, k); the whole product when cells >= its size."""
  full = [(m, n, k) for m in ms for n in ns for k in ks]
  if cells >= len(full):
    return full
  picked = list(dict.fromkeys(c for c in include if c in full))[:cells]
  rng = np.random.default_rng(seed)
  pairs = [(n, k) for n in ns for k in ks]
  pairs = [pairs[i] for i in rng.permutation(len(pairs))]
  while len(picked) < cells:
    seen_n = {c[1] for c in picked}
    seen_k = {c[2] for c in picked}
    used = {c[1:] for c in picked}
    count = {m: sum(c[0] == m for c in picked) for m in ms}
    for m in sorted(ms, key=lambda m: count[m]):  # stable: ms order on ties
      free = [p for p in pairs if (m,) + p not in picked]
      if free:
        break
    n, k = max(free, key=lambda p: ((p[0] not in seen_n) + (p[1] not in seen_k),
                                     p not in used))
    picked.append((m, n, k))
  return sorted(picked)


@dataclasses.dataclass
class Pattern:
  """The two loops of one cell (bodies `(j, carry, *consts)` of the outer
  loop) and what one outer iteration does."""
  ours: bench.Loop
  xla: bench.Loop
  inner: int        # inner iterations per outer iteration
  calls: int        # GEMM calls per outer iteration
  flops: float      # per outer iteration
  bytes: float      # fewest bytes per outer iteration
  weight_bytes: float = 0.0  # weights streamed per outer iteration


def _rand(key, shape, dtype, scale=1.0):
  return bench._rand(key, shape, dtype, scale)  # pylint: disable=protected-access


def table_pattern(m, n, k, dtype, quick=False, opts=None,
                  transpose_b=False) -> Pattern:
  """transpose_b: the weight stored (n, k), x @ W^T (table_nt)."""
  L = 4 if quick else 48
  kx, kw, kb = jax.random.split(jax.random.key(m * 31 + n + k), 3)
  x = _rand(kx, (L * m, k), dtype)
  w = _rand(kw, (n, k) if transpose_b else (k, n), dtype, math.sqrt(3.0 / k))
  buf = _rand(kb, (L * m, n), dtype)
  table = jnp.asarray(np.random.default_rng(m).permutation(L), jnp.int32)

  def ours(j, buf, x, w, table):
    def body(i, buf):
      return dyn.gemm(dyn.window(x, (table[i] * m, 0), (m, k)), w,
                      out=dyn.window(buf, (i * m, 0), (m, n)),
                      transpose_b=transpose_b, opts=opts)
    return lax.fori_loop(0, L, body, buf)

  def xla(j, buf, x, w, table):
    def body(i, buf):
      xi = lax.dynamic_slice(x, (table[i] * m, 0), (m, k))
      y = jnp.dot(xi, w.T if transpose_b else w, preferred_element_type=dtype)
      return lax.dynamic_update_slice(buf, y, (i * m, 0))
    return lax.fori_loop(0, L, body, buf)

  e = jnp.dtype(dtype).itemsize
  consts = (x, w, table)
  return Pattern(bench.Loop(ours, buf, consts), bench.Loop(xla, buf, consts),
                 L, L, 2.0 * L * m * n * k,
                 float((L * m * k + k * n + L * m * n) * e))


def stacked_pattern(m, n, k, dtype, quick=False, opts=None) -> Pattern:
  L = 2 if quick else 8
  kx, k1, k2 = jax.random.split(jax.random.key(m * 37 + n + k), 3)
  x0 = _rand(kx, (m, k), dtype)
  w1 = _rand(k1, (L, k, n), dtype, math.sqrt(3.0 / k))
  w2 = _rand(k2, (L, n, k), dtype, math.sqrt(3.0 / n))

  def ours(j, x, x0, w1, w2):
    x0, _ = lax.optimization_barrier((x0, j))  # each call from x0 again
    def body(i, x):
      h = dyn.gemm(x, dyn.window(w1, (i, 0, 0), (k, n)), opts=opts)
      return dyn.gemm(h, dyn.window(w2, (i, 0, 0), (n, k)), opts=opts)
    return lax.fori_loop(0, L, body, x0)

  def xla(j, x, x0, w1, w2):
    x0, _ = lax.optimization_barrier((x0, j))
    def body(i, x):
      h = jnp.dot(x, lax.dynamic_index_in_dim(w1, i, keepdims=False),
                  preferred_element_type=dtype)
      return jnp.dot(h, lax.dynamic_index_in_dim(w2, i, keepdims=False),
                     preferred_element_type=dtype)
    return lax.fori_loop(0, L, body, x0)

  e = jnp.dtype(dtype).itemsize
  consts = (x0, w1, w2)
  wbytes = float(2 * L * k * n * e)
  return Pattern(bench.Loop(ours, x0, consts), bench.Loop(xla, x0, consts),
                 L, 2 * L, 4.0 * L * m * n * k,
                 wbytes + 4 * L * m * (n + k) * e, wbytes)


def cond_pattern(m, n, k, dtype, quick=False) -> Pattern:
  L = 4 if quick else 24
  loops = bench.cond_loops(L, m, n, dtype, k=k)  # the bench's cond loops
  e = jnp.dtype(dtype).itemsize
  return Pattern(loops["ours"], loops["xla"], L, L, 2.0 * L * m * n * k,
                 float(L * (k * n + m * n) * e + m * k * e),
                 float(L * k * n * e))


def kv_pattern(m, n, k, dtype, quick=False, opts=None) -> Pattern:
  layers, steps = (2, 2) if quick else (8, 4)
  kx, kw, kc = jax.random.split(jax.random.key(m * 43 + n + k), 3)
  x = _rand(kx, (m, k), dtype)
  w = _rand(kw, (layers, k, n), dtype, math.sqrt(3.0 / k))
  cache = _rand(kc, (layers, steps * m, n), dtype)
  pos = jnp.asarray(np.arange(steps) * m, jnp.int32)
  L = steps * layers

  def ours(j, cache, x, w, pos):
    def body(s, cache):
      layer, p = s % layers, pos[s // layers]
      return dyn.gemm(x, dyn.window(w, (layer, 0, 0), (k, n)),
                      out=dyn.window(cache, (layer, p, 0), (m, n)), opts=opts)
    return lax.fori_loop(0, L, body, cache)

  def xla(j, cache, x, w, pos):
    def body(s, cache):
      layer, p = s % layers, pos[s // layers]
      wl = lax.dynamic_index_in_dim(w, layer, keepdims=False)
      y = jnp.dot(x, wl, preferred_element_type=dtype)
      return lax.dynamic_update_slice(cache, y[None], (layer, p, 0))
    return lax.fori_loop(0, L, body, cache)

  e = jnp.dtype(dtype).itemsize
  consts = (x, w, pos)
  return Pattern(bench.Loop(ours, cache, consts),
                 bench.Loop(xla, cache, consts), L, L, 2.0 * L * m * n * k,
                 float(L * (k * n + m * n) * e), float(L * k * n * e))


def backward_pattern(m, n, k, dtype, quick=False) -> Pattern:
  L = 2 if quick else 8
  kx, kw, kg = jax.random.split(jax.random.key(m * 47 + n + k), 3)
  x = _rand(kx, (L * m, k), dtype)
  w = _rand(kw, (k, n), dtype, math.sqrt(3.0 / k))
  g = _rand(kg, (L, m, n), jnp.float32)
  table = jnp.asarray(np.random.default_rng(m + 1).permutation(L), jnp.int32)

  def loss_of(slice_dot):
    def loss(x, w, g, table):
      def body(i, acc):
        y = slice_dot(x, w, table[i] * m)
        return acc + jnp.sum(y.astype(jnp.float32) * g[i])
      return lax.fori_loop(0, L, body, jnp.float32(0))
    return loss

  ours_loss = loss_of(lambda x, w, r: dyn.gemm(
      dyn.window(x, (r, 0), (m, k)), w))
  xla_loss = loss_of(lambda x, w, r: jnp.dot(
      lax.dynamic_slice(x, (r, 0), (m, k)), w, preferred_element_type=dtype))

  def outer(loss):
    def step(j, carry, x, w, g, table):
      x, w, _ = lax.optimization_barrier((x, w, j))
      return jax.grad(loss, argnums=(0, 1))(x, w, g, table)
    return step

  e = jnp.dtype(dtype).itemsize
  consts = (x, w, g, table)
  carry = (jnp.zeros_like(x), jnp.zeros_like(w))
  return Pattern(bench.Loop(outer(ours_loss), carry, consts),
                 bench.Loop(outer(xla_loss), carry, consts), L, 3 * L,
                 6.0 * L * m * n * k,
                 float((2 * L * m * k + 2 * k * n + L * m * n) * e))


def table_nt_pattern(m, n, k, dtype, quick=False, opts=None) -> Pattern:
  """The table loop with the weight stored (n, k) (a PyTorch-style
  Linear's layout), x @ W^T: the skinny path with B transposed, which no
  pattern of the default five runs (the backward's gradient products are
  XLA's dots, KernelOptions.xla_cotangent_dot).  Not in PATTERNS: asked
  for by name (--patterns table_nt)."""
  return table_pattern(m, n, k, dtype, quick, opts, transpose_b=True)


# Patterns whose builder takes `opts` (KernelOptions for ours' calls:
# benchmarks/skinny_tiles.py forces the skinny tile through it).
OPTS_PATTERNS = ("table", "stacked", "kv", "table_nt")

BUILDERS: dict[str, Callable[..., Pattern]] = {
    "table": table_pattern, "stacked": stacked_pattern, "cond": cond_pattern,
    "kv": kv_pattern, "backward": backward_pattern,
    "table_nt": table_nt_pattern}


def _trace(f, args) -> tuple[Optional[int], Optional[float], Optional[int]]:
  """(kernels, device busy microseconds, command-buffer launches) of one
  call of the compiled `f`, from a profiler trace (bench.trace_events);
  (None, None, None) without a GPU.  Busy time per iteration against the
  measured time tells a loop bound by the host from one bound by its
  kernels; graph launches per iteration tell a body XLA made one graph of
  (one an iteration) from one it launches thunk by thunk (none: at XLA's
  defaults a body of fewer than five thunks)."""
  if jax.default_backend() != "gpu":
    return None, None, None
  host, device = bench.trace_events(f, args)
  graphs = sum(bench.is_graph_launch(name) for name, _ in host)
  return len(device), float(sum(device)), graphs


def _rel_err(got, want) -> float:
  """The largest ||got - want|| / ||want|| over the output arrays (each on
  its own: backward's dX and dW differ in scale, and one norm over both
  would hide an error in the smaller)."""
  errs = []
  for a, b in zip(jax.tree.leaves(got), jax.tree.leaves(want)):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    num, den = float(np.linalg.norm(a - b)), float(np.linalg.norm(b))
    errs.append(num / den if den > 0 else (0.0 if num == 0 else math.inf))
  return max(errs)


def _outer_iters(p: Pattern, dtype: str, gpu: bool) -> int:
  """Outer iterations per timed call: a few milliseconds of work on a GPU
  (at least ~8 us per GEMM call, a host launch), 1 on CPU."""
  if not gpu:
    return 1
  est = max(bench.floor_s(p.flops, p.bytes, dtype), p.calls * 8e-6)
  return max(2, min(50, int(3e-3 / est)))


def measure(pattern: str, setting: str, dtype: str, m: int, n: int, k: int,
            repeats: int, window: float, quick: bool,
            loop_graph_pads: Optional[int] = None) -> dict:
  """One cell: check, time (interleaved) and trace both sides; ours' calls
  with KernelOptions(loop_graph_pads=...) where it is given (a pattern of
  OPTS_PATTERNS)."""
  gpu = jax.default_backend() == "gpu"
  extra = {}
  if loop_graph_pads is not None:
    extra["opts"] = dyn.KernelOptions(loop_graph_pads=loop_graph_pads)
  p = BUILDERS[pattern](m, n, k, jnp.dtype(dtype), quick, **extra)
  for loop in (p.ours, p.xla):
    loop.compiler_options = SETTINGS[setting]
  iters = _outer_iters(p, dtype, gpu)
  compiled = [bench.compile_loop(l, iters) for l in (p.ours, p.xla)]
  # Correctness first, same inputs: every outer iteration computes the
  # same values from the operands (the carry is overwritten, or only keeps
  # the work alive), so the two loops' results compare after any count.
  err = _rel_err(*(f(*a) for f, a in compiled))
  ok = bool(err < TOLERANCE)
  times = bench.take_turns(
      [bench._timed(f, a) for f, a in compiled],  # pylint: disable=protected-access
      repeats, window if gpu else 0.0)
  t_ours, t_xla = (statistics.median(t) / iters for t in times)  # s / outer
  (ko, bo, go), (kx, bx, gx) = (_trace(f, a) for f, a in compiled)
  per_inner = iters * p.inner

  def per(v):
    return None if v is None else v / per_inner

  floor_s = bench.floor_s(p.flops, p.bytes, dtype)
  cell = dict(
      pattern=pattern, setting=setting, dtype=dtype, m=m, n=n, k=k,
      L=p.inner, calls_per_iter=p.calls, outer_iters=iters,
      ours_us_per_call=1e6 * t_ours / p.calls,
      xla_us_per_call=1e6 * t_xla / p.calls, ratio=t_xla / t_ours,
      ours_kernels_per_iter=per(ko), xla_kernels_per_iter=per(kx),
      ours_busy_us_per_iter=per(bo), xla_busy_us_per_iter=per(bx),
      ours_graphs_per_iter=per(go), xla_graphs_per_iter=per(gx),
      flops=p.flops, bytes=p.bytes, floor_us=1e6 * floor_s / p.calls,
      roofline_pct=100 * floor_s / t_ours, max_rel_err=err, ok=ok,
      loop_graph_pads=loop_graph_pads)
  if p.weight_bytes:
    cell["tbps"] = p.weight_bytes / t_ours / 1e12
  return cell


def summarize(cells: list[dict]) -> list[dict]:
  """Min and geometric mean of the ratio per (pattern, setting, dtype),
  with the worst cell, the cells below 1 and, for `stacked`, the weight
  stream of m <= 16 with K * N >= 2048^2 (its target's cells)."""
  groups: dict[tuple, list[dict]] = {}
  for c in cells:
    groups.setdefault((c["pattern"], c["setting"], c["dtype"]), []).append(c)
  out = []
  def order(key):
    pattern, setting, dtype = key
    return tuple(seq.index(v) if v in seq else len(seq) for seq, v in (
        (PATTERNS, pattern), (tuple(SETTINGS), setting), (DTYPES, dtype))) + key
  for (pattern, setting, dtype), cs in sorted(groups.items(),
                                              key=lambda g: order(g[0])):
    ratios = [c["ratio"] for c in cs]
    worst = min(cs, key=lambda c: c["ratio"])
    row = dict(pattern=pattern, setting=setting, dtype=dtype, cells=len(cs),
               min_ratio=min(ratios),
               geomean_ratio=math.exp(statistics.fmean(map(math.log, ratios))),
               below_1=sum(r < 1.0 for r in ratios),
               worst_cell=f"{worst['m']}x{worst['n']}x{worst['k']}",
               mismatches=sum(not c["ok"] for c in cs))
    kern = [(c["ours_kernels_per_iter"], c["xla_kernels_per_iter"]) for c in cs
            if c["ours_kernels_per_iter"] is not None]
    if kern:
      row["ours_kernels_per_iter_max"] = max(o for o, _ in kern)
      row["more_kernels_than_xla"] = sum(o > x + 1e-9 for o, x in kern)
    graphs = [(c["ours_graphs_per_iter"], c["xla_graphs_per_iter"])
              for c in cs if c.get("ours_graphs_per_iter") is not None]
    if graphs:  # 1: the body is one graph; 0: launched thunk by thunk
      row["ours_graphs_per_iter_median"] = statistics.median(
          o for o, _ in graphs)
      row["xla_graphs_per_iter_median"] = statistics.median(
          x for _, x in graphs)
    if pattern == "stacked":
      stream = [c["tbps"] for c in cs
                if c["m"] <= 16 and c["n"] * c["k"] >= 2048 * 2048]
      row["stream_tbps_min"] = min(stream) if stream else None
    out.append(row)
  return out


def draw(cells: list[dict], out_dir: str) -> list[str]:
  """One heat map per (pattern, setting): m down, the (n, k) pairs across,
  colour the ratio (green: ours faster), one panel per dtype on one colour
  scale; a cell that failed its check is marked "(bad)"."""
  import matplotlib  # pylint: disable=g-import-not-at-top
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top
  from matplotlib.colors import TwoSlopeNorm  # pylint: disable=g-import-not-at-top
  paths = []
  keys = sorted({(c["pattern"], c["setting"]) for c in cells},
                key=lambda ps: (PATTERNS.index(ps[0]) if ps[0] in PATTERNS
                                else 99, ps[1]))
  for pattern, setting in keys:
    cs = [c for c in cells if (c["pattern"], c["setting"]) == (pattern,
                                                                setting)]
    dtypes = [d for d in DTYPES if any(c["dtype"] == d for c in cs)]
    ms = sorted({c["m"] for c in cs})
    nks = sorted({(c["n"], c["k"]) for c in cs})
    ratios = [c["ratio"] for c in cs]
    # One scale for the figure, at least 0.5 to 2 (a loss and a gain of 2x
    # equally far from the centre), so that the dtypes' panels compare.
    norm = TwoSlopeNorm(vmin=min(0.5, min(ratios) - 1e-3), vcenter=1.0,
                        vmax=max(2.0, max(ratios) + 1e-3))
    fig, axes = plt.subplots(
        1, len(dtypes), squeeze=False,
        figsize=(max(6.0, 0.55 * len(nks) + 2) * len(dtypes),
                 0.45 * len(ms) + 2.2))
    for ax, dtype in zip(axes[0], dtypes):
      grid = np.full((len(ms), len(nks)), np.nan)
      bad = set()
      for c in cs:
        if c["dtype"] == dtype:
          at = (ms.index(c["m"]), nks.index((c["n"], c["k"])))
          grid[at] = c["ratio"]
          if not c["ok"]:
            bad.add(at)
      vals = grid[np.isfinite(grid)]
      im = ax.imshow(grid, cmap="RdYlGn", aspect="auto", norm=norm)
      for (r, col), v in np.ndenumerate(grid):
        if np.isfinite(v):
          dark = abs(float(norm(v)) - 0.5) > 0.35  # the colormap's ends
          ax.text(col, r, f"{v:.2f}" + ("\n(bad)" if (r, col) in bad else ""),
                  ha="center", va="center", fontsize=7,
                  color="white" if dark else "black")
      ax.set_xticks(range(len(nks)), [f"{n}x{k}" for n, k in nks],
                    rotation=60, fontsize=7)
      ax.set_yticks(range(len(ms)), [str(m) for m in ms], fontsize=8)
      ax.set_xlabel("n x k")
      ax.set_ylabel("m")
      geo = math.exp(statistics.fmean(np.log(vals))) if vals.size else math.nan
      ax.set_title(f"{pattern}, {setting}, {dtype}: min {vals.min():.2f}, "
                   f"geomean {geo:.2f}", fontsize=9)
      fig.colorbar(im, ax=ax, label="XLA loop / jax_dynoff")
    fig.tight_layout()
    path = os.path.join(out_dir, f"sweep_{pattern}_{setting}.png")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    paths.append(path)
  return paths


def print_summary(summary: list[dict]) -> None:
  print(f"{'pattern':9} {'setting':8} {'dtype':9} {'cells':>5} {'min':>6} "
        f"{'geomean':>7} {'<1':>3} {'worst':>14} {'kern>xla':>8} "
        f"{'TB/s m<=16':>10} {'graphs/it':>9}")
  for s in summary:
    tb = s.get("stream_tbps_min")
    go, gx = (s.get(f"{side}_graphs_per_iter_median") for side in ("ours", "xla"))
    graphs = "-" if go is None else f"{go:.1f}/{gx:.1f}"
    print(f"{s['pattern']:9} {s['setting']:8} {s['dtype']:9} {s['cells']:5d} "
          f"{s['min_ratio']:6.2f} {s['geomean_ratio']:7.2f} "
          f"{s['below_1']:3d} {s['worst_cell']:>14} "
          f"{s.get('more_kernels_than_xla', '-')!s:>8} "
          f"{'-' if tb is None else f'{tb:.2f}':>10} {graphs:>9}")


def _ints(text: str) -> tuple[int, ...]:
  return tuple(int(v) for v in text.split(",") if v)


# Cell fields an earlier version of this script wrote under other names;
# --from-json reads either.
_OLD_NAMES = {"inner_iters": "L", "calls_per_outer": "calls_per_iter",
              "floor_us_per_call": "floor_us", "weights_tbps": "tbps"}


def _upgrade(cell: dict) -> dict:
  return {_OLD_NAMES.get(key, key): v for key, v in cell.items()}


def _fmt(v: Optional[float]) -> str:
  return "-" if v is None else f"{v:.2f}"


def main(argv=None) -> int:
  ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  ap.add_argument("out_dir")
  ap.add_argument("--cells", type=int, default=18,
                  help="sampled (m, n, k) cells per pattern, NAMED_CELLS "
                  "included")
  ap.add_argument("--full", action="store_true", help="the whole product")
  ap.add_argument("--m", type=_ints, help="m values (default M_VALUES)")
  ap.add_argument("--n", type=_ints, help="n values (default NK_VALUES)")
  ap.add_argument("--k", type=_ints, help="k values (default NK_VALUES)")
  ap.add_argument("--patterns", default=",".join(PATTERNS))
  ap.add_argument("--dtypes", default=",".join(DTYPES))
  ap.add_argument("--settings", default=",".join(SETTINGS))
  ap.add_argument("--repeats", type=int, default=3)
  ap.add_argument("--window", type=float, default=0.1,
                  help="seconds per side per round (GPU; one call on CPU)")
  ap.add_argument("--budget-s", type=float, default=math.inf,
                  help="start no new cell after this many seconds")
  ap.add_argument("--quick", action="store_true",
                  help="short inner loops, and QUICK_GRID where --m / --n "
                  "/ --k are not given (CPU tests)")
  ap.add_argument("--no-named", action="store_true",
                  help="sample without NAMED_CELLS")
  ap.add_argument("--from-json", help="redraw and summarize this file only")
  ap.add_argument("--loop-graph-pads", type=int,
                  help="KernelOptions.loop_graph_pads for ours' calls "
                  f"(patterns {', '.join(OPTS_PATTERNS)}; default: the "
                  "library's)")
  a = ap.parse_args(argv)
  os.makedirs(a.out_dir, exist_ok=True)
  if a.from_json:
    with open(a.from_json) as f:
      cells = [_upgrade(c) for c in json.load(f)["cells"]]
    draw(cells, a.out_dir)
    print_summary(summarize(cells))
    return 0
  patterns = a.patterns.split(",")
  for p in patterns:
    if p not in BUILDERS:
      ap.error(f"unknown pattern {p!r}; known: {', '.join(BUILDERS)}")
    if a.loop_graph_pads is not None and p not in OPTS_PATTERNS:
      ap.error(f"--loop-graph-pads: pattern {p!r} takes no options; "
               f"want {', '.join(OPTS_PATTERNS)}")
  settings = a.settings.split(",")
  for s in settings:
    if s not in SETTINGS:
      ap.error(f"unknown setting {s!r}; known: {', '.join(SETTINGS)}")
  dtypes = a.dtypes.split(",")
  for d in dtypes:
    if d not in DTYPES:
      ap.error(f"unknown dtype {d!r}; known: {', '.join(DTYPES)}")
  defaults = QUICK_GRID if a.quick else {"m": M_VALUES, "n": NK_VALUES,
                                         "k": NK_VALUES}
  ms, ns, ks = (getattr(a, d) or defaults[d] for d in "mnk")
  grid = sample_grid(10 ** 9 if a.full else a.cells, ms, ns, ks,
                     () if a.no_named else NAMED_CELLS)
  t0 = time.perf_counter()
  cells, skipped = [], []
  todo = [(p, s, d, c) for d in dtypes for p in patterns for c in grid
          for s in settings]
  print(f"{len(grid)} cells per pattern, {len(todo)} in all", flush=True)
  for j, (p, s, d, (m, n, k)) in enumerate(todo):
    elapsed = time.perf_counter() - t0
    if elapsed > a.budget_s:
      skipped.append(dict(pattern=p, setting=s, dtype=d, m=m, n=n, k=k))
      continue
    c = measure(p, s, d, m, n, k, a.repeats, a.window, a.quick,
                a.loop_graph_pads)
    cells.append(c)
    took = time.perf_counter() - t0 - elapsed
    print(f"[{j + 1}/{len(todo)} {elapsed + took:6.0f} s, {took:4.1f} s] "
          f"{p:8} {s:7} {d:8} {m:4}x{n}x{k}: ours "
          f"{c['ours_us_per_call']:7.2f} xla {c['xla_us_per_call']:7.2f} "
          f"us/call ratio {c['ratio']:.2f} kernels/iter "
          f"{_fmt(c['ours_kernels_per_iter'])} / "
          f"{_fmt(c['xla_kernels_per_iter'])} graphs/iter "
          f"{_fmt(c['ours_graphs_per_iter'])} / "
          f"{_fmt(c['xla_graphs_per_iter'])}", flush=True)
    if not c["ok"]:
      print(f"ERROR: {p} {s} {d} {m}x{n}x{k}: ours does not match XLA's "
            f"loop, relative error {c['max_rel_err']:.3g} (tolerance "
            f"{TOLERANCE})", flush=True)
  summary = summarize(cells) if cells else []
  data = dict(
      **bench.run_record("benchmarks/sweep.py", argv),
      grid=dict(m=ms, n=ns, k=ks, cells=[list(c) for c in grid]),
      repeats=a.repeats, window_s=a.window, quick=a.quick, cells=cells,
      skipped=skipped, summary=summary)
  with open(os.path.join(a.out_dir, "sweep.json"), "w") as f:
    json.dump(data, f, indent=1)
  if cells:
    draw(cells, a.out_dir)
  if skipped:
    print(f"{len(skipped)} cells skipped (--budget-s {a.budget_s}), from "
          f"{skipped[0]['pattern']} {skipped[0]['setting']} "
          f"{skipped[0]['dtype']} on")
  if summary:
    print_summary(summary)
  bad = [c for c in cells if not c["ok"]]
  if bad:
    print(f"ERROR: {len(bad)} cells where ours does not match XLA's loop: "
          + ", ".join(f"{c['pattern']} {c['setting']} {c['dtype']} "
                      f"{c['m']}x{c['n']}x{c['k']}" for c in bad))
    return 1
  return 0


if __name__ == "__main__":
  sys.exit(main())
