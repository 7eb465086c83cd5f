"""The acceptance sweep for small GEMMs in loops: jax_dynoff against XLA's
own loop over a grid of shapes, per loop pattern, dtype and graph setting.

A bench of a few shapes hides losses; this measures a grid over m in
M_VALUES and n, k in NK_VALUES (non-square pairs included; `--cells`
samples it so that every value of m, n and k appears, `--full` runs the
whole product) for five patterns, each a jitted outer `fori_loop` around
an inner loop of L GEMM calls:

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
            cotangent (forward, dX and dW GEMMs per slice)

at XLA's default flags ("default") and with each loop body one CUDA graph
("body": graphs.BODY_GRAPHS, what `cuda_graph_flags()` sets), both in one
process through per-compile options.  Per cell: the time per GEMM call of
each side, device-timed (each call of the compiled outer loop blocks; the
two sides take turns, `--repeats` rounds of `--window` seconds, median),
the ratio XLA / ours (> 1: ours is faster), and from one profiler trace per
side the kernels and the device busy time per inner iteration.  Before
timing, ours is checked against XLA's result on the same random data.

    python benchmarks/sweep.py OUT_DIR [--cells C | --full] [--m 1,8 --n 512
        --k 768] [--patterns table,stacked,...] [--dtypes bfloat16,float16]
        [--settings default,body] [--repeats R] [--window S] [--budget-s T]
        [--quick]
    python benchmarks/sweep.py OUT_DIR --from-json sweep.json   (maps only)

Writes OUT_DIR/sweep.json (cells and a summary per pattern, setting and
dtype: min and geometric mean of the ratio) and one heat map per pattern
and setting, OUT_DIR/sweep_{pattern}_{setting}.png.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import glob
import json
import math
import os
import statistics
import sys
import tempfile
import time
from typing import Callable, Optional

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

import jax_dynoff as dyn
from jax_dynoff import bench
from jax_dynoff.graphs import BODY_GRAPHS

M_VALUES = (1, 8, 16, 32, 64, 96, 128, 256, 512)
NK_VALUES = (512, 768, 1024, 1536, 2048, 4096)
# Cells every sampled sweep adds: the shapes users reported losing at, and
# the stacked target's (m <= 16, K * N >= 2048^2).
NAMED_CELLS = ((96, 1536, 768), (8, 2048, 2048), (16, 4096, 4096),
               (256, 2048, 2048), (512, 2048, 2048))
PATTERNS = ("table", "stacked", "cond", "kv", "backward")
SETTINGS = {"default": None, "body": BODY_GRAPHS}
DTYPES = ("bfloat16", "float16")
# ||ours - xla|| / ||xla|| allowed: both round to 16 bits (and round
# intermediate results differently in the chains).
TOLERANCE = 3e-2


def sample_grid(cells: int, ms, ns, ks, seed: int = 0) -> list[tuple]:
  """`cells` (m, n, k) triples of the product ms x ns x ks, deterministic:
  the m values take turns (each gets cells / len(ms), give or take one),
  and each turn takes the (n, k) pair, in a seeded random order, that
  brings the most n and k values not yet covered, then pairs not yet used:
  every value of m, n and k appears once cells >= max(len(ms), len(ns),
  len(ks)).  Sorted by (m, n, k)."""
  full = [(m, n, k) for m in ms for n in ns for k in ks]
  if cells >= len(full):
    return full
  rng = np.random.default_rng(seed)
  pairs = [(n, k) for n in ns for k in ks]
  pairs = [pairs[i] for i in rng.permutation(len(pairs))]
  seen_n, seen_k, used = set(), set(), set()
  picked = []
  for j in range(cells):
    m = ms[j % len(ms)]
    n, k = max((p for p in pairs if (m,) + p not in picked),
               key=lambda p: ((p[0] not in seen_n) + (p[1] not in seen_k),
                              p not in used))
    picked.append((m, n, k))
    seen_n.add(n)
    seen_k.add(k)
    used.add((n, k))
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


def table_pattern(m, n, k, dtype, quick=False) -> Pattern:
  L = 4 if quick else 48
  kx, kw, kb = jax.random.split(jax.random.key(m * 31 + n + k), 3)
  x = _rand(kx, (L * m, k), dtype)
  w = _rand(kw, (k, n), dtype, math.sqrt(3.0 / k))
  buf = _rand(kb, (L * m, n), dtype)
  table = jnp.asarray(np.random.default_rng(m).permutation(L), jnp.int32)

  def ours(j, buf, x, w, table):
    def body(i, buf):
      return dyn.gemm(dyn.window(x, (table[i] * m, 0), (m, k)), w,
                      out=dyn.window(buf, (i * m, 0), (m, n)))
    return lax.fori_loop(0, L, body, buf)

  def xla(j, buf, x, w, table):
    def body(i, buf):
      xi = lax.dynamic_slice(x, (table[i] * m, 0), (m, k))
      y = jnp.dot(xi, w, preferred_element_type=dtype)
      return lax.dynamic_update_slice(buf, y, (i * m, 0))
    return lax.fori_loop(0, L, body, buf)

  e = jnp.dtype(dtype).itemsize
  consts = (x, w, table)
  return Pattern(bench.Loop(ours, buf, consts), bench.Loop(xla, buf, consts),
                 L, L, 2.0 * L * m * n * k,
                 float((L * m * k + k * n + L * m * n) * e))


def stacked_pattern(m, n, k, dtype, quick=False) -> Pattern:
  L = 2 if quick else 8
  kx, k1, k2 = jax.random.split(jax.random.key(m * 37 + n + k), 3)
  x0 = _rand(kx, (m, k), dtype)
  w1 = _rand(k1, (L, k, n), dtype, math.sqrt(3.0 / k))
  w2 = _rand(k2, (L, n, k), dtype, math.sqrt(3.0 / n))

  def ours(j, x, x0, w1, w2):
    x0, _ = lax.optimization_barrier((x0, j))  # each call from x0 again
    def body(i, x):
      h = dyn.gemm(x, dyn.window(w1, (i, 0, 0), (k, n)))
      return dyn.gemm(h, dyn.window(w2, (i, 0, 0), (n, k)))
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
  kx, kw, kb = jax.random.split(jax.random.key(m * 41 + n + k), 3)
  x = _rand(kx, (m, k), dtype)
  w = _rand(kw, (L, k, n), dtype, math.sqrt(3.0 / k))
  buf = _rand(kb, (2 * L * m, n), dtype)
  rng = np.random.default_rng(7)
  rows_a = jnp.asarray(rng.permutation(L) * m, jnp.int32)
  rows_b = jnp.asarray(L * m + rng.permutation(L) * m, jnp.int32)
  pred = jnp.asarray(rng.integers(0, 2, L), jnp.int32)

  def ours(j, buf, x, w, rows_a, rows_b, pred):
    def body(i, buf):
      wi = dyn.window(w, (i, 0, 0), (k, n))
      return lax.cond(
          pred[i] > 0,
          lambda b: dyn.gemm(x, wi, out=dyn.window(b, (rows_a[i], 0), (m, n))),
          lambda b: dyn.gemm(x, wi, out=dyn.window(b, (rows_b[i], 0), (m, n)),
                             alpha=-1.0),
          buf)
    return lax.fori_loop(0, L, body, buf)

  def xla(j, buf, x, w, rows_a, rows_b, pred):
    def body(i, buf):
      wi = lax.dynamic_index_in_dim(w, i, keepdims=False)
      return lax.cond(
          pred[i] > 0,
          lambda b: lax.dynamic_update_slice(
              b, jnp.dot(x, wi, preferred_element_type=dtype), (rows_a[i], 0)),
          lambda b: lax.dynamic_update_slice(
              b, -jnp.dot(x, wi, preferred_element_type=dtype),
              (rows_b[i], 0)),
          buf)
    return lax.fori_loop(0, L, body, buf)

  e = jnp.dtype(dtype).itemsize
  consts = (x, w, rows_a, rows_b, pred)
  return Pattern(bench.Loop(ours, buf, consts), bench.Loop(xla, buf, consts),
                 L, L, 2.0 * L * m * n * k,
                 float(L * (k * n + m * n) * e + m * k * e),
                 float(L * k * n * e))


def kv_pattern(m, n, k, dtype, quick=False) -> Pattern:
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
                      out=dyn.window(cache, (layer, p, 0), (m, n)))
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


BUILDERS: dict[str, Callable[..., Pattern]] = {
    "table": table_pattern, "stacked": stacked_pattern, "cond": cond_pattern,
    "kv": kv_pattern, "backward": backward_pattern}


def _trace(f, args) -> tuple[Optional[int], Optional[float]]:
  """(kernels, device busy microseconds) of one call of the compiled `f`,
  from a profiler trace; (None, None) without a GPU."""
  if jax.default_backend() != "gpu":
    return None, None
  from jax.profiler import ProfileData  # pylint: disable=g-import-not-at-top
  jax.block_until_ready(f(*args))
  d = tempfile.mkdtemp(prefix="jax_dynoff_sweep_")
  jax.profiler.start_trace(d)
  jax.block_until_ready(f(*args))
  jax.profiler.stop_trace()
  path = glob.glob(f"{d}/**/*.xplane.pb", recursive=True)[0]
  count, busy = 0, 0.0
  for plane in ProfileData.from_file(path).planes:
    if not plane.name.startswith("/device:GPU"):
      continue
    for line in plane.lines:
      if line.name.startswith("Stream"):
        for e in line.events:
          count += 1
          busy += e.duration_ns / 1e3
  return count, busy


def _rel_err(got, want) -> float:
  got = [np.asarray(v, np.float64) for v in jax.tree.leaves(got)]
  want = [np.asarray(v, np.float64) for v in jax.tree.leaves(want)]
  num = math.sqrt(sum(float(np.sum((a - b) ** 2)) for a, b in zip(got, want)))
  den = math.sqrt(sum(float(np.sum(b ** 2)) for b in want))
  return num / den if den > 0 else (0.0 if num == 0 else math.inf)


def _outer_iters(p: Pattern, dtype: str, gpu: bool) -> int:
  """Outer iterations per timed call: a few milliseconds of work on a GPU
  (at least ~8 us per GEMM call, a host launch), 1 on CPU."""
  if not gpu:
    return 1
  est = max(p.flops / (bench.PEAK_TFLOPS[dtype] * 1e12),
            p.bytes / (bench.PEAK_TBPS * 1e12), p.calls * 8e-6)
  return max(2, min(50, int(3e-3 / est)))


def measure(pattern: str, setting: str, dtype: str, m: int, n: int, k: int,
            repeats: int, window: float, quick: bool) -> dict:
  """One cell: check, time (interleaved) and trace both sides."""
  gpu = jax.default_backend() == "gpu"
  p = BUILDERS[pattern](m, n, k, jnp.dtype(dtype), quick)
  for loop in (p.ours, p.xla):
    loop.compiler_options = SETTINGS[setting]
  iters = _outer_iters(p, dtype, gpu)
  compiled = [bench.compile_loop(l, iters) for l in (p.ours, p.xla)]
  # Correctness first, same inputs: every outer iteration computes the
  # same values from the operands (the carry is overwritten, or only keeps
  # the work alive), so the two loops' results compare after any count.
  err = _rel_err(*(f(*a) for f, a in compiled))
  ok = bool(err < TOLERANCE)
  runners = [bench._timed(f, a) for f, a in compiled]  # pylint: disable=protected-access
  times: list[list[float]] = [[], []]
  for r in range(repeats):
    order = (0, 1) if r % 2 == 0 else (1, 0)
    for s in order:
      times[s].append(bench.sustained(runners[s], window if gpu else 0.0))
  t_ours, t_xla = (statistics.median(t) / iters for t in times)  # s / outer
  (ko, bo), (kx, bx) = (_trace(f, a) for f, a in compiled)
  per_inner = iters * p.inner

  def per(v):
    return None if v is None else v / per_inner

  floor_s = max(p.flops / (bench.PEAK_TFLOPS[dtype] * 1e12),
                p.bytes / (bench.PEAK_TBPS * 1e12))
  cell = dict(
      pattern=pattern, setting=setting, dtype=dtype, m=m, n=n, k=k,
      inner_iters=p.inner, calls_per_outer=p.calls, outer_iters=iters,
      ours_us_per_call=1e6 * t_ours / p.calls,
      xla_us_per_call=1e6 * t_xla / p.calls, ratio=t_xla / t_ours,
      ours_kernels_per_iter=per(ko), xla_kernels_per_iter=per(kx),
      ours_busy_us_per_iter=per(bo), xla_busy_us_per_iter=per(bx),
      flops=p.flops, bytes=p.bytes, floor_us_per_call=1e6 * floor_s / p.calls,
      roofline_pct=100 * floor_s / t_ours, max_rel_err=err, ok=ok)
  if p.weight_bytes:
    cell["weights_tbps"] = p.weight_bytes / t_ours / 1e12
  return cell


def summarize(cells: list[dict]) -> list[dict]:
  """Min and geometric mean of the ratio per (pattern, setting, dtype),
  with the worst cell, the cells below 1 and, for `stacked`, the weight
  stream of m <= 16 with K * N >= 2048^2 (its target's cells)."""
  groups: dict[tuple, list[dict]] = {}
  for c in cells:
    groups.setdefault((c["pattern"], c["setting"], c["dtype"]), []).append(c)
  out = []
  for (pattern, setting, dtype), cs in sorted(groups.items()):
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
    if pattern == "stacked":
      stream = [c["weights_tbps"] for c in cs
                if c["m"] <= 16 and c["n"] * c["k"] >= 2048 * 2048]
      row["stream_tbps_min"] = min(stream) if stream else None
    out.append(row)
  return out


def draw(cells: list[dict], out_dir: str) -> list[str]:
  """One heat map per (pattern, setting): m down, the (n, k) pairs across,
  colour the ratio (green: ours faster), one panel per dtype."""
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
    fig, axes = plt.subplots(
        1, len(dtypes), squeeze=False,
        figsize=(max(6.0, 0.55 * len(nks) + 2) * len(dtypes),
                 0.45 * len(ms) + 2.2))
    for ax, dtype in zip(axes[0], dtypes):
      grid = np.full((len(ms), len(nks)), np.nan)
      for c in cs:
        if c["dtype"] == dtype:
          grid[ms.index(c["m"]), nks.index((c["n"], c["k"]))] = c["ratio"]
      vals = grid[np.isfinite(grid)]
      lo = min(0.5, float(vals.min()) - 1e-3)
      hi = max(2.0, float(vals.max()) + 1e-3)
      im = ax.imshow(grid, cmap="RdYlGn", aspect="auto",
                     norm=TwoSlopeNorm(vmin=lo, vcenter=1.0, vmax=hi))
      for (r, col), v in np.ndenumerate(grid):
        if np.isfinite(v):
          ax.text(col, r, f"{v:.2f}", ha="center", va="center", fontsize=7)
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
        f"{'TB/s m<=16':>10}")
  for s in summary:
    tb = s.get("stream_tbps_min")
    print(f"{s['pattern']:9} {s['setting']:8} {s['dtype']:9} {s['cells']:5d} "
          f"{s['min_ratio']:6.2f} {s['geomean_ratio']:7.2f} "
          f"{s['below_1']:3d} {s['worst_cell']:>14} "
          f"{s.get('more_kernels_than_xla', '-')!s:>8} "
          f"{'-' if tb is None else f'{tb:.2f}':>10}")


def _ints(text: str) -> tuple[int, ...]:
  return tuple(int(v) for v in text.split(",") if v)


def main(argv=None) -> int:
  ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  ap.add_argument("out_dir")
  ap.add_argument("--cells", type=int, default=18,
                  help="sampled (m, n, k) cells per pattern")
  ap.add_argument("--full", action="store_true", help="the whole product")
  ap.add_argument("--m", type=_ints, default=M_VALUES)
  ap.add_argument("--n", type=_ints, default=NK_VALUES)
  ap.add_argument("--k", type=_ints, default=NK_VALUES)
  ap.add_argument("--patterns", default=",".join(PATTERNS))
  ap.add_argument("--dtypes", default=",".join(DTYPES))
  ap.add_argument("--settings", default=",".join(SETTINGS))
  ap.add_argument("--repeats", type=int, default=3)
  ap.add_argument("--window", type=float, default=0.1,
                  help="seconds per side per round (GPU)")
  ap.add_argument("--budget-s", type=float, default=math.inf,
                  help="start no new cell after this many seconds")
  ap.add_argument("--quick", action="store_true",
                  help="short inner loops (CPU tests)")
  ap.add_argument("--no-named", action="store_true",
                  help="the sample alone, without NAMED_CELLS")
  ap.add_argument("--from-json", help="redraw and summarize this file only")
  a = ap.parse_args(argv)
  os.makedirs(a.out_dir, exist_ok=True)
  if a.from_json:
    with open(a.from_json) as f:
      data = json.load(f)
    draw(data["cells"], a.out_dir)
    print_summary(summarize(data["cells"]))
    return 0
  patterns = a.patterns.split(",")
  for p in patterns:
    if p not in BUILDERS:
      ap.error(f"unknown pattern {p!r}; known: {', '.join(PATTERNS)}")
  settings = a.settings.split(",")
  for s in settings:
    if s not in SETTINGS:
      ap.error(f"unknown setting {s!r}; known: {', '.join(SETTINGS)}")
  dtypes = a.dtypes.split(",")
  grid = sample_grid(10 ** 9 if a.full else a.cells, a.m, a.n, a.k)
  if not a.full and not a.no_named:
    grid = sorted(set(grid) | {c for c in NAMED_CELLS if c[0] in a.m and
                               c[1] in a.n and c[2] in a.k})
  t0 = time.perf_counter()
  cells, skipped = [], []
  todo = [(p, s, d, c) for d in dtypes for p in patterns for c in grid
          for s in settings]
  for j, (p, s, d, (m, n, k)) in enumerate(todo):
    if time.perf_counter() - t0 > a.budget_s:
      skipped.append(dict(pattern=p, setting=s, dtype=d, m=m, n=n, k=k))
      continue
    c = measure(p, s, d, m, n, k, a.repeats, a.window, a.quick)
    cells.append(c)
    flag = "" if c["ok"] else f"  MISMATCH (rel err {c['max_rel_err']:.2e})"
    print(f"[{j + 1}/{len(todo)} {time.perf_counter() - t0:6.0f} s] {p:8} "
          f"{s:7} {d:8} {m:4}x{n}x{k}: ours {c['ours_us_per_call']:7.2f} "
          f"xla {c['xla_us_per_call']:7.2f} us/call ratio {c['ratio']:.2f} "
          f"kernels {c['ours_kernels_per_iter']} / {c['xla_kernels_per_iter']}"
          f"{flag}", flush=True)
  summary = summarize(cells) if cells else []
  data = dict(
      command="python benchmarks/sweep.py " + " ".join(
          sys.argv[1:] if argv is None else argv),
      date=datetime.datetime.now(datetime.timezone.utc).isoformat(
          timespec="seconds"),
      jax=jax.__version__, backend=jax.default_backend(),
      device=jax.devices()[0].device_kind,
      grid=dict(m=a.m, n=a.n, k=a.k, cells=[list(c) for c in grid]),
      repeats=a.repeats, window_s=a.window, cells=cells, skipped=skipped,
      summary=summary)
  with open(os.path.join(a.out_dir, "sweep.json"), "w") as f:
    json.dump(data, f, indent=1)
  if cells:
    draw(cells, a.out_dir)
    print_summary(summary)
  if skipped:
    print(f"{len(skipped)} cells skipped (--budget-s {a.budget_s})")
  bad = [c for c in cells if not c["ok"]]
  if bad:
    print(f"ERROR: {len(bad)} cells where ours does not match XLA's loop")
    return 1
  return 0


if __name__ == "__main__":
  sys.exit(main())
