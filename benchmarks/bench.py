"""`python benchmarks/bench.py [OUT_DIR]`: jax_dynoff against XLA, side by side.

Every variant is timed the same way: `iters` repetitions inside one jitted
`fori_loop` (so launch gaps are the device's, not the host's), the whole
loop called back to back for a window of `WINDOW_S` seconds, the median call
of the window's second half divided by `iters`; the sides of a comparison
take turns, window by window, and each side's figure is the median over
`repeats` windows.  An H200 under dense GEMMs sits at its power limit: a
loop's clocks settle at its own equilibrium within a second, and a short
call inherits the clocks its predecessor left (benchmarks/sustained.py and
docs/design.md), so short alternating calls favour whichever
side draws more power; a sustained window measures what a program that
runs continuously gets.
Loop bodies depend on the loop index (through `lax.optimization_barrier`
where nothing else does), so XLA cannot hoist a GEMM out of the loop.

Scenarios (bf16 unless said; sizes are the GPU ones, CPU runs tiny ones):
- `plain`: one GEMM with A and D at non-zero offsets read from a device
  table, vs `jnp.dot` on the same shapes (2048^3, 4096^3, 8192^3,
  128x4096x4096; bf16, f16, f32; f32 also at precision=HIGHEST on both
  sides at the three cubes, case "... highest", not with --quick; bf16
  into a float32 result, preferred_element_type=float32 on both sides, at
  2048^3 and 128x4096x4096, case "... to float32");
- `slices`: L GEMMs written into row slices of one buffer in a fori_loop
  (L=16 m=512, L=64 m=128, L=16 m=4096; n = k = 4096), vs XLA's loop
  (dynamic_slice + jnp.dot + dynamic_update_slice) and vs one big GEMM of
  the same total size (`ideal_ms`);
- `stacked`: `x = x @ W[i]` over L layers of stacked weights read in place
  (L=32 m=16, L=32 m=128, L=16 m=2048), vs `x @ W[i]` in XLA; reported in
  TB/s of weights streamed;
- `cond`: `lax.cond` choosing one of two GEMMs that write at different
  device offsets, in a loop;
- `kv`: a KV-cache style write, per step `x @ W` into
  `cache[layer, pos:pos+t, :]`;
- `loop`: 64 GEMMs 128x1024x1024 into row slices at offsets from a device
  table, with command buffers on (one graph per loop under --graphs) and
  off, vs XLA's loop;
- `moe`: a mixture-of-experts expert GEMM, `ragged_dot` of (T, d) tokens in
  E skewed groups (`moe_sizes`) by (E, d, f) weights (E8 T8192 4096x4096,
  E64 T16384 2048x2048 with one empty group, E8 T32768 7168x2048; the
  first only with --quick), after a check of its result against
  lax.ragged_dot: rows `moe_fwd` (vs lax.ragged_dot), `moe_fwd_vs_dense`
  (vs one dense GEMM of the same FLOPs) and `moe_bwd` (the vjp wrt both
  operands, vs lax.ragged_dot's).

On a CPU the scenarios run at tiny sizes (a smoke run of the driver);
`--cpu-plain` instead times the `plain` scenario at 512^3, 1024^3 and 2048^3
in float32, bfloat16 and float16 against `jnp.dot`: the CPU handler's own
figures (it multiplies with OpenBLAS).

Writes OUT_DIR/bench.json (bench_graphs.json under --graphs,
bench_body_graphs.json under --body-graphs, bench_cpu.json under
--cpu-plain) and a plot, OUT_DIR/bench.png (bench_graphs.png,
bench_body_graphs.png, bench_cpu.png).
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import functools
import json
import os
import statistics
import sys
import time
from typing import Any, Callable, Optional, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

import jax_dynoff as dyn

# H200 ceilings: dense bf16/f16 as measured here (KINDS.md: 769-798), TF32
# at half of that, HBM copy bandwidth (reads + writes).
PEAK_TFLOPS = {"bfloat16": 790.0, "float16": 790.0, "float32": 395.0}
PEAK_TBPS = 4.3


def floor_s(flops: float, nbytes: float, dtype: str) -> float:
  """max(FLOPs / peak, bytes / bandwidth) in seconds: no version of the
  work runs much faster."""
  return max(flops / (PEAK_TFLOPS[dtype] * 1e12), nbytes / (PEAK_TBPS * 1e12))


@dataclasses.dataclass
class Row:
  """One measurement: jax_dynoff against XLA's way, in one process."""

  scenario: str
  case: str
  dtype: str
  ours_ms: float
  xla_ms: float
  flops: float
  bytes: float = 0.0            # the fewest bytes the work must move
  ideal_ms: Optional[float] = None  # e.g. one big GEMM of the same size
  # With --host: per GEMM call, each side's host time and device events
  # from one profiler trace (`host_profile`).
  host: Optional[dict] = None

  @property
  def ratio(self) -> float:
    """XLA time / jax_dynoff time: > 1 means jax_dynoff is faster."""
    return self.xla_ms / self.ours_ms

  @property
  def tflops(self) -> float:
    return self.flops / (self.ours_ms * 1e-3) / 1e12

  @property
  def tbps(self) -> float:
    return self.bytes / (self.ours_ms * 1e-3) / 1e12

  @property
  def floor_ms(self) -> float:
    """max(FLOPs / peak, bytes / bandwidth): no version runs much faster."""
    return 1e3 * floor_s(self.flops, self.bytes, self.dtype)

  def as_dict(self):
    d = dataclasses.asdict(self)
    d.update(ratio=self.ratio, tflops=self.tflops, tbps=self.tbps,
             floor_ms=self.floor_ms,
             roofline_pct=100 * self.floor_ms / self.ours_ms)
    return d


@dataclasses.dataclass
class Loop:
  """`carry = body(i, carry, *consts)` repeated in one jitted fori_loop."""
  body: Callable
  carry: Any
  consts: tuple = ()
  compiler_options: Optional[dict] = None


def compile_loop(loop: Loop, iters: int):
  """The jitted fori_loop of `iters` iterations of `loop`, compiled with its
  options, and the arguments to call it with.  The operands (`consts`) are
  arguments of the jitted loop, never closed over: a closed-over array
  would be baked into the program as a literal (a 1 GiB weight stack makes
  compilation take minutes)."""
  def run_loop(c, consts):
    return lax.fori_loop(0, iters, lambda i, c: loop.body(i, c, *consts), c)
  f = jax.jit(run_loop).lower(loop.carry, loop.consts).compile(
      compiler_options=loop.compiler_options)
  return f, (loop.carry, loop.consts)


# Seconds each side runs back to back per round (`run` sets it: 1 s on a
# GPU, 0.5 s with --quick, 0 on CPU, where one call after the warm-up is a
# window).
WINDOW_S = 0.0


def run_record(script: str, argv: Optional[Sequence[str]] = None) -> dict:
  """What a result file records of its run: the command line (`script`, a
  path from the repository root, and argv, sys.argv's tail by default), the
  UTC date, jax's version, the backend and the device."""
  args = sys.argv[1:] if argv is None else argv
  return dict(
      command=" ".join(["python", script, *args]),
      date=datetime.datetime.now(datetime.timezone.utc).isoformat(
          timespec="seconds"),
      jax=jax.__version__, backend=jax.default_backend(),
      device=jax.devices()[0].device_kind)


def _timed(f, args) -> Callable[[], float]:
  """One blocking call f(*args) (warmed up once now), in seconds."""
  jax.block_until_ready(f(*args))

  def once() -> float:
    t0 = time.perf_counter()
    jax.block_until_ready(f(*args))
    return time.perf_counter() - t0
  return once


def _runner(loop: Loop, iters: int) -> Callable[[], float]:
  """One blocking call of the compiled loop (warmed up), in seconds."""
  return _timed(*compile_loop(loop, iters))


def sustained(once: Callable[[], float], window_s: float) -> float:
  """Calls `once` back to back for `window_s` seconds (at least twice) and
  returns the median of the second half's calls: the clocks have settled by
  then at what this loop draws."""
  times = []
  t_end = time.perf_counter() + window_s
  while len(times) < 2 or time.perf_counter() < t_end:
    times.append(once())
  return statistics.median(times[len(times) // 2:])


# --host: profile each timed pair of loops once (`host_profile`); the
# scenario's Row picks the figures up through `_last_host`.
HOST = False
_last_host: Optional[dict] = None


def trace_events(fn, args):
  """Host and device events of one traced call of the compiled `fn`: (host
  [(name, dur_us)], device [dur_us] of the GPU streams' events: kernels and
  copies)."""
  import glob  # pylint: disable=g-import-not-at-top
  import tempfile  # pylint: disable=g-import-not-at-top
  from jax.profiler import ProfileData  # pylint: disable=g-import-not-at-top
  jax.block_until_ready(fn(*args))
  d = tempfile.mkdtemp(prefix="jax_dynoff_trace_")
  jax.profiler.start_trace(d)
  jax.block_until_ready(fn(*args))
  jax.profiler.stop_trace()
  path = glob.glob(f"{d}/**/*.xplane.pb", recursive=True)[0]
  host, device = [], []
  for plane in ProfileData.from_file(path).planes:
    for line in plane.lines:
      if plane.name.startswith("/device:GPU") and line.name.startswith(
          "Stream"):
        device += [e.duration_ns / 1e3 for e in line.events]
      elif plane.name.startswith("/host"):
        host += [(e.name, e.duration_ns / 1e3) for e in line.events]
  return host, device


def is_graph_launch(name: str) -> bool:
  """Whether a host event of a trace is one launch of a command buffer
  (XLA's CommandBufferThunk: `command_buffer_<id>`, once per execution;
  its `command_buffer::execute` / `::update` parts are not counted)."""
  return name.startswith("command_buffer_") and "::" not in name


def _host_events(fn, args):
  """(host [(name, dur_us)], device event count) of one traced call."""
  host, device = trace_events(fn, args)
  return host, len(device)


def host_profile(loop: Loop, iters: int, calls: int, ours: bool) -> dict:
  """One profiler trace of the compiled loop: per GEMM call (`calls` per
  iteration), the device events (kernels and copies) and the host time of
  the GEMM's thunk: ours, the `jax_dynoff_gemm` custom call's (handler
  included); XLA's, its loop body's command buffer where XLA made one (one
  per iteration: all of the body's host time), else its GEMM thunks'."""
  f, args = compile_loop(loop, iters)
  host, device = _host_events(f, args)
  n = iters * calls
  if ours:
    what = "jax_dynoff_gemm"
    times = [d for name, d in host if name.startswith(what)]
  else:
    what = "command_buffer"
    times = [d for name, d in host if is_graph_launch(name)]
    if len(times) < iters:
      what = "gemm/cublas thunks"
      times = [d for name, d in host
               if ("gemm" in name or "cublas" in name) and "::" not in name]
  return {"device_events_per_call": device / n,
          "host_us_median": statistics.median(times) if times else None,
          "host_events_per_call": len(times) / n, "host_of": what}


def take_turns(runners: Sequence[Callable[[], float]], repeats: int,
               window_s: float) -> list[list[float]]:
  """Each runner's `sustained` time, one window each in turn, `repeats`
  rounds, the order reversed every other round: [runner][round]."""
  times = [[] for _ in runners]
  for r in range(repeats):
    turns = list(zip(times, runners))
    for t, run in (turns if r % 2 == 0 else turns[::-1]):
      t.append(sustained(run, window_s))
  return times


def time_loops(loops: Sequence[Loop], iters: int, repeats: int,
               calls: int = 1, profile: tuple[int, int] = (0, 1)) -> list[float]:
  """Milliseconds per iteration of each loop, on device: the loops take
  turns, one window (`sustained`, WINDOW_S) each, `repeats` rounds, median
  per loop.  Interleaving puts every side of a comparison under the same
  conditions (an H200's clock drifts with its temperature by several
  percent within a minute); the order reverses every other round, so no
  side always follows the same one.  With --host (HOST), the loops at the
  indices `profile` (ours, XLA's) are traced once each as well: `calls`
  GEMM calls per iteration."""
  times = take_turns([_runner(l, iters) for l in loops], repeats, WINDOW_S)
  global _last_host
  _last_host = None
  if HOST and jax.default_backend() == "gpu":
    _last_host = {"ours": host_profile(loops[profile[0]], iters, calls, True),
                  "xla": host_profile(loops[profile[1]], iters, calls, False)}
  return [statistics.median(t) / iters * 1e3 for t in times]


def _rand(key, shape, dtype, scale=1.0):
  return (scale * jax.random.uniform(key, shape, jnp.float32, -1, 1)).astype(
      dtype)


def _esize(dtype) -> int:
  return jnp.dtype(dtype).itemsize


def _iters(flops: float, gpu: bool) -> int:
  """Enough repetitions for ~25 ms of GPU work; 2 on CPU."""
  return max(3, min(200, int(2e13 / flops))) if gpu else 2


# ---------------------------------------------------------------------------
# Scenarios


def plain_loops(m: int, n: int, k: int, dtype,
                opts: Optional[dyn.KernelOptions] = None,
                precision=None, trans=(False, False),
                out_dtype=None) -> dict[str, Loop]:
  """The `plain` scenario's two loops: A and D at non-zero device offsets
  (ours, its calls with `opts`) and jnp.dot on the same shapes (xla), both
  at `precision` (None: the default) and into `out_dtype` (None: dtype;
  preferred_element_type).  trans = (transpose_a, transpose_b): A stored
  k x m (its window at a row start along K) and B stored n x k."""
  ta, tb = trans
  out_dtype = dtype if out_dtype is None else out_dtype
  ka, kb, kd = jax.random.split(jax.random.key(m * 7 + n), 3)
  pad = 128
  a_big = _rand(ka, (k + pad, m) if ta else (m + pad, k), dtype)
  b = _rand(kb, (n, k) if tb else (k, n), dtype)
  d_big = _rand(kd, (m + pad, n), out_dtype)
  offs = jnp.asarray([64, 128], jnp.int32)   # aligned, non-zero, dynamic
  a = a_big[:k] if ta else a_big[:m]

  def ours(i, carry, a_big, b):
    d, offs = carry
    off = offs[i % 2]
    d = dyn.gemm(dyn.window(a_big, (off, 0), (k, m) if ta else (m, k)), b,
                 out=dyn.window(d, (offs[1 - i % 2], 0), (m, n)), opts=opts,
                 precision=precision, transpose_a=ta, transpose_b=tb,
                 preferred_element_type=out_dtype)
    return d, offs

  def xla(i, d, a, b):
    # The carry is the last product, so no iteration is dead code.
    aa, bb, _ = lax.optimization_barrier((a, b, i))
    return jnp.dot(aa.T if ta else aa, bb.T if tb else bb,
                   preferred_element_type=out_dtype, precision=precision)

  return {"ours": Loop(ours, (d_big, offs), (a_big, b)),
           "xla": Loop(xla, jnp.zeros((m, n), out_dtype), (a, b))}


def plain(m: int, n: int, k: int, dtype, iters: int, repeats: int) -> Row:
  """A and D at non-zero device offsets vs jnp.dot on the same shapes."""
  loops = plain_loops(m, n, k, dtype)
  t_ours, t_xla = time_loops([loops["ours"], loops["xla"]], iters, repeats)
  return Row("plain", f"{m}x{n}x{k}", jnp.dtype(dtype).name, t_ours, t_xla,
             2.0 * m * n * k, float((m * k + k * n + m * n) * _esize(dtype)))


def plain_f32_out(m: int, n: int, k: int, dtype, iters: int,
                  repeats: int) -> Row:
  """`plain` with 16-bit inputs into a float32 result on both sides
  (preferred_element_type=float32)."""
  loops = plain_loops(m, n, k, dtype, out_dtype=jnp.float32)
  t_ours, t_xla = time_loops([loops["ours"], loops["xla"]], iters, repeats)
  return Row("plain", f"{m}x{n}x{k} to float32", jnp.dtype(dtype).name,
             t_ours, t_xla, 2.0 * m * n * k,
             float((m * k + k * n) * _esize(dtype) + m * n * 4))


def plain_highest(m: int, n: int, k: int, dtype, iters: int,
                  repeats: int) -> Row:
  """`plain` at precision=HIGHEST on both sides (float32: our 3xTF32
  kernels against whatever XLA runs for a full-precision dot)."""
  loops = plain_loops(m, n, k, dtype, precision=lax.Precision.HIGHEST)
  t_ours, t_xla = time_loops([loops["ours"], loops["xla"]], iters, repeats)
  return Row("plain", f"{m}x{n}x{k} highest", jnp.dtype(dtype).name, t_ours,
             t_xla, 2.0 * m * n * k,
             float((m * k + k * n + m * n) * _esize(dtype)))


def cpu_plain(m: int, n: int, k: int, dtype, iters: int,
              repeats: int) -> Row:
  """The CPU rows: one jitted call per side, timed on the host (the CPU
  client runs a call to its end before it returns), the sides taking turns
  in windows (`sustained`): gemm with A and D at non-zero offsets against
  jnp.dot on the same shapes.  Not `plain`'s loop: on the CPU, XLA's
  product inside that loop ran at ~1.2 TFLOP/s on 2 cores, over three
  times the cores' peak (XLA does not redo it every iteration there), so
  the loop measured nothing on XLA's side."""
  del iters  # one call a turn
  ka, kb, kd = jax.random.split(jax.random.key(m * 7 + n), 3)
  pad = 128
  a_big = _rand(ka, (m + pad, k), dtype)
  b = _rand(kb, (k, n), dtype)
  d_big = _rand(kd, (m + pad, n), dtype)
  a = a_big[:m]
  ours = jax.jit(lambda a_big, b, d, o: dyn.gemm(
      dyn.window(a_big, (o, 0), (m, k)), b,
      out=dyn.window(d, (o + 64, 0), (m, n))))
  xla = jax.jit(lambda a, b: jnp.dot(a, b, preferred_element_type=dtype))
  sides = [(ours, (a_big, b, d_big, jnp.int32(64))), (xla, (a, b))]

  times = take_turns([_timed(f, args) for f, args in sides], repeats,
                     WINDOW_S)
  t_ours, t_xla = (statistics.median(t) * 1e3 for t in times)
  return Row("plain", f"{m}x{n}x{k}", jnp.dtype(dtype).name, t_ours, t_xla,
             2.0 * m * n * k, float((m * k + k * n + m * n) * _esize(dtype)))


def slices(L: int, m: int, n: int, dtype, iters: int, repeats: int) -> Row:
  """L GEMMs (m x n x n) written into row slices of one buffer."""
  kx, kw, kb = jax.random.split(jax.random.key(L * m), 3)
  x = _rand(kx, (L * m, n), dtype)
  w = _rand(kw, (n, n), dtype, 1.0 / np.sqrt(n))
  buf = _rand(kb, (L * m, n), dtype)
  rows = jnp.asarray(np.random.default_rng(L).permutation(L) * m, jnp.int32)

  def ours(j, carry, x, w):
    buf, rows = carry
    def body(i, buf):
      r = rows[i]
      return dyn.gemm(dyn.window(x, (r, 0), (m, n)), w,
                      out=dyn.window(buf, (r, 0), (m, n)))
    return lax.fori_loop(0, L, body, buf), rows

  def xla(j, carry, x, w):
    buf, rows = carry
    def body(i, buf):
      r = rows[i]
      xi = lax.dynamic_slice(x, (r, 0), (m, n))
      y = jnp.dot(xi, w, preferred_element_type=dtype)
      return lax.dynamic_update_slice(buf, y, (r, 0))
    return lax.fori_loop(0, L, body, buf), rows

  def ideal(j, y, x, w):
    xx, ww, _ = lax.optimization_barrier((x, w, j))
    return jnp.dot(xx, ww, preferred_element_type=dtype)

  t_ours, t_xla, t_ideal = time_loops(
      [Loop(ours, (buf, rows), (x, w)), Loop(xla, (buf, rows), (x, w)),
       Loop(ideal, jnp.zeros((L * m, n), dtype), (x, w))], iters, repeats,
      calls=L)
  e = _esize(dtype)
  return Row("slices", f"L{L}_m{m}_{n}x{n}", jnp.dtype(dtype).name, t_ours,
             t_xla, 2.0 * L * m * n * n, float((2 * L * m * n + n * n) * e),
             t_ideal)


def stacked_loops(L: int, m: int, n: int, dtype,
                  opts: Optional[dyn.KernelOptions] = None) -> dict[str, Loop]:
  """The `stacked` scenario's two loops: `x = x @ W[i]` over L stacked
  weight matrices, read in place (ours, its calls with `opts`) or sliced by
  XLA (xla)."""
  kx, kw = jax.random.split(jax.random.key(L + m), 2)
  x0 = _rand(kx, (m, n), dtype)
  w = _rand(kw, (L, n, n), dtype, 1.0 / np.sqrt(n))

  def ours(j, x, w):
    def body(i, x):
      return dyn.gemm(x, dyn.window(w, (i, 0, 0), (n, n)), opts=opts)
    return lax.fori_loop(0, L, body, x)

  def xla(j, x, w):
    def body(i, x):
      wi = lax.dynamic_index_in_dim(w, i, keepdims=False)
      return jnp.dot(x, wi, preferred_element_type=dtype)
    return lax.fori_loop(0, L, body, x)

  return {"ours": Loop(ours, x0, (w,)), "xla": Loop(xla, x0, (w,))}


def stacked(L: int, m: int, n: int, dtype, iters: int, repeats: int) -> Row:
  """`x = x @ W[i]` over L stacked weight matrices read in place."""
  loops = stacked_loops(L, m, n, dtype)
  t_ours, t_xla = time_loops([loops["ours"], loops["xla"]], iters, repeats,
                              calls=L)
  return Row("stacked", f"L{L}_m{m}_{n}x{n}", jnp.dtype(dtype).name, t_ours,
             t_xla, 2.0 * L * m * n * n, float(L * n * n * _esize(dtype)))


def cond_loops(L: int, m: int, n: int, dtype,
               k: Optional[int] = None) -> dict[str, Loop]:
  """The `cond` scenario's two loops: per step, lax.cond picks one of two
  GEMMs (m x n x k; k = n unless given) writing at other offsets."""
  k = n if k is None else k
  kx, kw, kb = jax.random.split(jax.random.key(3 * L + m), 3)
  x = _rand(kx, (m, k), dtype)
  w = _rand(kw, (L, k, n), dtype, 1.0 / np.sqrt(k))
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

  consts = (x, w, rows_a, rows_b, pred)
  return {"ours": Loop(ours, buf, consts), "xla": Loop(xla, buf, consts)}


def cond(L: int, m: int, n: int, dtype, iters: int, repeats: int) -> Row:
  """Per step, lax.cond picks one of two GEMMs writing at other offsets."""
  loops = cond_loops(L, m, n, dtype)
  t_ours, t_xla = time_loops([loops["ours"], loops["xla"]], iters, repeats,
                              calls=L)
  e = _esize(dtype)
  return Row("cond", f"L{L}_m{m}_{n}x{n}", jnp.dtype(dtype).name, t_ours,
             t_xla, 2.0 * L * m * n * n, float(L * (n * n + m * n) * e))


def kv(layers: int, steps: int, t: int, n: int, dtype, iters: int,
       repeats: int) -> Row:
  """Per step: `x @ W[layer]` into `cache[layer, pos:pos+t, :]`."""
  kx, kw, kc = jax.random.split(jax.random.key(layers * t), 3)
  seq = steps * t
  x = _rand(kx, (t, n), dtype)
  w = _rand(kw, (layers, n, n), dtype, 1.0 / np.sqrt(n))
  cache = _rand(kc, (layers, seq, n), dtype)
  pos = jnp.asarray(np.arange(steps) * t, jnp.int32)

  def ours(j, cache, x, w, pos):
    def body(s, cache):
      layer, p = s % layers, pos[s // layers % steps]
      return dyn.gemm(x, dyn.window(w, (layer, 0, 0), (n, n)),
                      out=dyn.window(cache, (layer, p, 0), (t, n)))
    return lax.fori_loop(0, steps * layers, body, cache)

  def xla(j, cache, x, w, pos):
    def body(s, cache):
      layer, p = s % layers, pos[s // layers % steps]
      wl = lax.dynamic_index_in_dim(w, layer, keepdims=False)
      y = jnp.dot(x, wl, preferred_element_type=dtype)
      return lax.dynamic_update_slice(cache, y[None], (layer, p, 0))
    return lax.fori_loop(0, steps * layers, body, cache)

  t_ours, t_xla = time_loops(
      [Loop(ours, cache, (x, w, pos)), Loop(xla, cache, (x, w, pos))],
      iters, repeats, calls=steps * layers)
  calls = steps * layers
  e = _esize(dtype)
  return Row("kv", f"layers{layers}_steps{steps}_t{t}_{n}", jnp.dtype(dtype).name,
             t_ours, t_xla, 2.0 * calls * t * n * n,
             float(calls * (n * n + 2 * t * n) * e))


def small_loop_loops(L: int, m: int, n: int,
                     opts: Optional[dyn.KernelOptions] = None,
                     traced_bound: bool = False) -> dict[str, Loop]:
  """The `loop` scenario: L GEMMs (m x n x n) into row slices of one buffer at
  offsets from a device table, in one fori_loop.  ours: as the process's
  flags compile it (one graph for the whole loop under --graphs);
  ours_unroll8: the same unrolled by 8; ours_bodygraph: the body as a graph
  per iteration, the loop on the host; ours_nograph: no command buffers;
  xla: XLA's loop (dynamic_index + jnp.dot + dynamic_update_slice);
  xla_bodygraph: XLA's loop with ours_bodygraph's options.  `opts`: the
  KernelOptions of our calls (None: the planner's choice).  traced_bound:
  the inner loops run to L passed in as an argument (the consts' last), a
  trip count XLA cannot know (no ours_unroll8 then: fori_loop unrolls
  static bounds only)."""
  from jax_dynoff.graphs import BODY_GRAPHS, NO_GRAPHS
  kx, kw, kb = jax.random.split(jax.random.key(L + m), 3)
  dtype = jnp.bfloat16
  x = _rand(kx, (m, n), dtype)
  w = _rand(kw, (L, n, n), dtype, 1.0 / np.sqrt(n))
  buf = _rand(kb, (L * m, n), dtype)
  rows = jnp.asarray(np.random.default_rng(0).permutation(L) * m, jnp.int32)

  def ours(j, carry, x, w, *bound, unroll=1):
    buf, rows = carry
    def body(i, buf):
      return dyn.gemm(x, dyn.window(w, (i, 0, 0), (n, n)),
                      out=dyn.window(buf, (rows[i], 0), (m, n)), opts=opts)
    return lax.fori_loop(0, bound[0] if bound else L, body, buf,
                         unroll=unroll), rows

  def ours_unrolled(j, carry, x, w):
    # Inside a whole-loop graph every iteration pays XLA's loop control
    # (condition kernels of a conditional node); unrolling amortises it.
    return ours(j, carry, x, w, unroll=8)

  def xla(j, carry, x, w, *bound):
    buf, rows = carry
    def body(i, buf):
      wi = lax.dynamic_index_in_dim(w, i, keepdims=False)
      y = jnp.dot(x, wi, preferred_element_type=jnp.float32).astype(dtype)
      return lax.dynamic_update_slice(buf, y, (rows[i], 0))
    return lax.fori_loop(0, bound[0] if bound else L, body, buf), rows

  carry, consts = (buf, rows), (x, w)
  if traced_bound:
    consts += (jnp.asarray(L, jnp.int32),)
  loops = {"ours": Loop(ours, carry, consts),
           "ours_bodygraph": Loop(ours, carry, consts, BODY_GRAPHS),
           "ours_nograph": Loop(ours, carry, consts, NO_GRAPHS),
           "xla": Loop(xla, carry, consts),
           "xla_bodygraph": Loop(xla, carry, consts, BODY_GRAPHS)}
  if not traced_bound:
    loops["ours_unroll8"] = Loop(ours_unrolled, carry, consts)
  return loops


def small_loop(L: int, m: int, n: int, repeats: int) -> list[Row]:
  """The `loop` scenario (small_loop_loops), every variant against XLA's loop."""
  loops = small_loop_loops(L, m, n)
  names = ("ours", "ours_unroll8", "ours_bodygraph", "ours_nograph",
           "xla_bodygraph", "xla")
  times = dict(zip(names, time_loops([loops[k] for k in names], 20, repeats,
                                     calls=L, profile=(0, len(names) - 1))))
  flops = 2.0 * L * m * n * n
  nbytes = float(L * (n * n + 2 * m * n) * 2)
  case = f"L{L}_{m}x{n}x{n}"
  scenario = {"ours": "loop_graph", "ours_unroll8": "loop_graph_unroll8",
              "ours_bodygraph": "loop_bodygraph",
              "ours_nograph": "loop_nograph"}
  # Body graphs on both sides for that row (XLA's body is a graph at its
  # defaults already).  --host profiles the first and last loops: ours (the
  # process's flags) and XLA's.
  xla_of = {k: "xla_bodygraph" if k == "ours_bodygraph" else "xla"
            for k in scenario}
  return [Row(scenario[k], case, "bfloat16", times[k], times[xla_of[k]],
              flops, nbytes, host=_last_host if k == "ours" else None)
          for k in scenario]


# The moe scenario's GPU cases (E, T, d, f, empty groups), bfloat16: 8
# experts at a 4096 model width, 64 small ones (many small groups; one
# empty), and experts of DeepSeek-V3's shape (7168 -> 2048).
MOE_CASES = ((8, 8192, 4096, 4096, 0), (64, 16384, 2048, 2048, 1),
             (8, 32768, 7168, 2048, 0))


def moe_sizes(E: int, T: int, empty: int = 0) -> np.ndarray:
  """Skewed group sizes summing to T, the shape a router's choices take:
  group i's share proportional to 1 / (1 + i), floored, the remainder to
  group 0, then permuted (numpy default_rng(0)) so that the big groups do
  not all come first.  `empty`: that many of the smallest groups get no
  rows (group 0 takes them), so that the run covers empty groups."""
  if not 0 <= empty < E:
    raise ValueError(f"moe_sizes: empty = {empty} must be in [0, {E})")
  w = 1.0 / (1.0 + np.arange(E))
  s = np.floor(T * w / w.sum()).astype(np.int32)
  s[0] += T - s.sum()
  if empty:
    s[0] += s[E - empty:].sum()
    s[E - empty:] = 0
  return np.random.default_rng(0).permutation(s)


def moe_probe_sizes(E: int, T: int, empty: int = 0) -> dict[str, np.ndarray]:
  """Group sizes (int32, summing to T) that separate what a grouped GEMM
  pays for, on one shape: "skewed" (moe_sizes: the bench's), "uniform"
  (T // E each: no padded row where that is a tile multiple), "one group"
  (every row in group 0: one weight read, no item switch) and "8 groups"
  (T // 8 in each of the first 8).  T must be a multiple of E and 8."""
  if T % E or T % 8 or E < 8:
    raise ValueError(f"moe_probe_sizes: T = {T} must be a multiple of E = {E}"
                     " and of 8, with E >= 8")
  one = np.zeros(E, np.int32)
  one[0] = T
  eight = np.zeros(E, np.int32)
  eight[:8] = T // 8
  return {"skewed": moe_sizes(E, T, empty),
          "uniform": np.full(E, T // E, np.int32), "one group": one,
          "8 groups": eight}


def _moe_dot(side: str, dtype) -> Callable:
  """(lhs, rhs, group_sizes) -> (T, f) in `dtype`: jax_dynoff's ragged_dot
  (side "ours") or lax.ragged_dot.  Ours is looked up when traced, not
  when this module is imported."""
  def dot(x, w, gs):
    f = dyn.ragged_dot if side == "ours" else lax.ragged_dot
    return f(x, w, gs, preferred_element_type=dtype)
  return dot


def _moe_outputs(dot: Callable, x, w, gs, dy):
  """The forward output and the cotangents of (lhs, rhs) for `dy`."""
  y, vjp = jax.vjp(lambda a, b: dot(a, b, gs), x, w)
  return (y, *vjp(dy))


def moe_operands(E: int, T: int, d: int, f: int, dtype, empty: int = 0):
  """(x (T, d), w (E, d, f), group_sizes (E,) int32, dy (T, f)): tokens,
  expert weights, moe_sizes(E, T, empty) and a cotangent."""
  kx, kw, ky = jax.random.split(jax.random.key(E * 31 + d), 3)
  return (_rand(kx, (T, d), dtype), _rand(kw, (E, d, f), dtype, 1 / np.sqrt(d)),
          jnp.asarray(moe_sizes(E, T, empty), jnp.int32),
          _rand(ky, (T, f), dtype))


def check_moe(x, w, gs, dy) -> None:
  """Raises unless ours agrees with lax.ragged_dot on the forward output
  and both cotangents (max abs error over max |lax's|; 2e-2 for 16-bit
  types): a bench must not report the speed of a wrong kernel."""
  dtype = x.dtype
  tol = 2e-2 if _esize(dtype) <= 2 else 2e-3
  got, want = (jax.jit(functools.partial(_moe_outputs, _moe_dot(side, dtype)))(
      x, w, gs, dy) for side in ("ours", "xla"))
  for name, a, b in zip(("output", "d lhs", "d rhs"), got, want):
    a, b = a.astype(jnp.float32), b.astype(jnp.float32)
    err = float(jnp.max(jnp.abs(a - b)) / jnp.maximum(jnp.max(jnp.abs(b)),
                                                      1e-30))
    if not err < tol:  # also catches NaN
      raise RuntimeError(
          f"moe: jax_dynoff.ragged_dot's {name} differs from lax.ragged_dot's "
          f"by {err:.3g} of its largest value (tolerance {tol:g}); group "
          f"sizes {np.asarray(gs).tolist()}, {jnp.dtype(dtype).name}")


def moe_fwd_body(dot):
  """A loop body of one `dot(x, w, gs)` (a ragged_dot), its operands tied
  to the loop index so that XLA cannot hoist the product."""
  def body(i, y, x, w, gs):
    xx, ww, _ = lax.optimization_barrier((x, w, i))
    return dot(xx, ww, gs)
  return body


def moe_dense_body(i, y, x, w0):
  """A loop body of one dense (T, d) @ (d, f) GEMM: the ragged_dot's ideal."""
  xx, ww, _ = lax.optimization_barrier((x, w0, i))
  return jnp.dot(xx, ww, preferred_element_type=x.dtype)


def moe_loops(x, w, gs, dy) -> dict[str, Loop]:
  """The `moe` scenario's loops on one set of operands (`moe_operands`):
  ours_fwd / xla_fwd, the ragged_dot of each side; dense, one (T, d) @
  (d, f) jnp.dot of the same FLOPs (what a ragged_dot could at best reach);
  ours_bwd / xla_bwd, jax.vjp of each side's ragged_dot wrt (lhs, rhs)
  applied to `dy`."""
  dtype = x.dtype

  def fwd(side):
    return moe_fwd_body(_moe_dot(side, dtype))

  def bwd(side):
    dot = _moe_dot(side, dtype)
    def body(i, c, x, w, gs):
      xx, ww, _ = lax.optimization_barrier((x, w, i))
      _, dx, dw = _moe_outputs(dot, xx, ww, gs, c[0])
      return c[0], dx, dw  # both cotangents in the carry: neither is dead
    return body

  y0 = jnp.zeros(dy.shape, dtype)
  c0 = (dy, jnp.zeros_like(x), jnp.zeros_like(w))
  consts = (x, w, gs)
  # The dense side gets a (d, f) matrix of its own: slicing w[0] inside the
  # loop could cost it a copy per iteration that the ragged sides do not pay.
  return {"ours_fwd": Loop(fwd("ours"), y0, consts),
          "xla_fwd": Loop(fwd("xla"), y0, consts),
          "dense": Loop(moe_dense_body, y0, (x, w[0])),
          "ours_bwd": Loop(bwd("ours"), c0, consts),
          "xla_bwd": Loop(bwd("xla"), c0, consts)}


def moe_case_name(E: int, T: int, d: int, f: int, empty: int) -> str:
  """The moe rows' case label, e.g. E64_T16384_2048x2048_empty1."""
  return f"E{E}_T{T}_{d}x{f}" + (f"_empty{empty}" if empty else "")


def moe(E: int, T: int, d: int, f: int, dtype, empty: int, iters: int,
        repeats: int) -> list[Row]:
  """A mixture-of-experts layer's expert GEMM, (T, d) tokens in E skewed
  groups (`moe_sizes`, `empty` of them empty) times (E, d, f) weights,
  after a check that ours computes what lax.ragged_dot does.  Rows:
  moe_fwd, ours against lax.ragged_dot; moe_fwd_vs_dense, ours against a
  dense GEMM of the same FLOPs (ratio 1: as fast as dense); moe_bwd, the
  vjp wrt (lhs, rhs) of each.  The forward sides take turns in one
  time_loops, the backward ones in another."""
  x, w, gs, dy = moe_operands(E, T, d, f, dtype, empty)
  check_moe(x, w, gs, dy)
  loops = moe_loops(x, w, gs, dy)
  t_ours, t_xla, t_dense = time_loops(
      [loops["ours_fwd"], loops["xla_fwd"], loops["dense"]], iters, repeats)
  host_fwd = _last_host
  # Twice the work per iteration: half the iterations keep a call as long.
  b_ours, b_xla = time_loops([loops["ours_bwd"], loops["xla_bwd"]],
                             max(2, iters // 2), repeats)
  e, name = _esize(dtype), jnp.dtype(dtype).name
  case = moe_case_name(E, T, d, f, empty)
  flops = 2.0 * T * d * f
  # Fewest bytes: forward reads x and w and writes y; backward reads x, w
  # and dy and writes dx and dw.
  fwd_bytes = float((T * d + E * d * f + T * f) * e)
  bwd_bytes = float((2 * T * d + 2 * E * d * f + T * f) * e)
  return [Row("moe_fwd", case, name, t_ours, t_xla, flops, fwd_bytes,
              host=host_fwd),
          Row("moe_fwd_vs_dense", case, name, t_ours, t_dense, flops,
              fwd_bytes),
          Row("moe_bwd", case, name, b_ours, b_xla, 2 * flops, bwd_bytes,
              host=_last_host)]


# ---------------------------------------------------------------------------
# Driver

SCENARIOS = ("plain", "slices", "stacked", "cond", "kv", "loop", "moe")


# --cpu-plain: the sizes and dtypes of the CPU rows (plain gemm vs jnp.dot).
CPU_PLAIN_SIZES = (512, 1024, 2048)
CPU_PLAIN_DTYPES = ("float32", "bfloat16", "float16")


def _cpu_plain_cases():
  """--cpu-plain: plain n^3 GEMMs for every CPU_PLAIN_SIZES x dtype."""
  return {"plain": [(cpu_plain, (n, n, n, jnp.dtype(dt)))
                    for n in CPU_PLAIN_SIZES for dt in CPU_PLAIN_DTYPES]}


def _cases(gpu: bool, quick: bool):
  """scenario -> list of (function, args without iters/repeats, flops)."""
  bf16, f16, f32 = jnp.bfloat16, jnp.float16, jnp.float32
  if not gpu:  # tiny sizes: a smoke run of every scenario (--cpu-plain times)
    return {
        "plain": [(plain, (64, 64, 64, f32)),
                  (plain_f32_out, (64, 64, 64, bf16))],
        "slices": [(slices, (4, 16, 64, f32))],
        "stacked": [(stacked, (4, 8, 64, f32))],
        "cond": [(cond, (4, 8, 64, f32))],
        "kv": [(kv, (2, 3, 4, 64, f32))],
        "moe": [(moe, (4, 64, 32, 48, f32, 1))],
    }
  plain_shapes = [(2048, 2048, 2048), (4096, 4096, 4096), (8192, 8192, 8192),
                  (128, 4096, 4096)]
  dtypes = [bf16, f16] if quick else [bf16, f16, f32]
  # float32 at precision=HIGHEST too (not with --quick), at the three cubes;
  # bfloat16 into a float32 result at the first and last shapes.
  highest = [] if quick else [(plain_highest, (m, n, k, f32))
                              for (m, n, k) in plain_shapes[:3]]
  highest += [(plain_f32_out, (m, n, k, bf16))
              for (m, n, k) in (plain_shapes[0], plain_shapes[-1])]
  moe_cases = [(E, T, d, f, bf16, empty) for E, T, d, f, empty in MOE_CASES]
  return {
      "plain": [(plain, (m, n, k, dt)) for dt in dtypes
                for (m, n, k) in plain_shapes] + highest,
      "slices": [(slices, (16, 512, 4096, bf16)), (slices, (64, 128, 4096, bf16)),
                 (slices, (16, 4096, 4096, bf16))],
      "stacked": [(stacked, (32, 16, 4096, bf16)),
                  (stacked, (32, 128, 4096, bf16)),
                  (stacked, (16, 2048, 4096, bf16))],
      "cond": [(cond, (16, 512, 4096, bf16))],
      "kv": [(kv, (8, 16, 64, 4096, bf16))],
      "moe": [(moe, args) for args in moe_cases[:1 if quick else None]],
  }


def _flops_of(fn, args) -> float:
  """FLOPs of one timed iteration, to size `iters`."""
  if fn in (plain, cpu_plain, plain_highest, plain_f32_out):
    m, n, k, _ = args
    return 2.0 * m * n * k
  if fn is kv:
    layers, steps, t, n, _ = args
    return 2.0 * layers * steps * t * n * n
  if fn is moe:  # the forward's
    _, T, d, f, _, _ = args
    return 2.0 * T * d * f
  L, m, n, _ = args
  return 2.0 * L * m * n * n


def _case_dtype(args) -> str:
  """The element type's name of a case's arguments (the first that is a
  dtype)."""
  for a in args:
    if isinstance(a, (int, float)):
      continue
    try:
      return jnp.dtype(a).name
    except TypeError:
      continue
  raise ValueError(f"no dtype among the case's arguments {args!r}")


def run(out_dir: Optional[str], quick: bool = False,
        scenarios=SCENARIOS, cpu_plain: bool = False,
        dtypes=None) -> list[Row]:
  """Times `scenarios` and writes OUT_DIR/bench*.json and .png.

  cpu_plain: the `plain` rows of `_cpu_plain_cases` instead, 5 rounds of
  1-s windows per side (a 2-core machine shared with other work is noisy;
  the median over rounds damps it), written as bench_cpu.*.
  dtypes: the names of the element types whose cases run (None: all; the
  `loop` scenario is bfloat16).
  """
  global WINDOW_S
  gpu = jax.default_backend() == "gpu"
  if cpu_plain:
    repeats, WINDOW_S, scenarios = 5, 1.0, ("plain",)
    cases = _cpu_plain_cases()
  else:
    repeats = 2 if quick or not gpu else 3
    WINDOW_S = (0.5 if quick else 1.0) if gpu else 0.0
    cases = _cases(gpu, quick)
  if dtypes is not None:
    cases = {name: [(fn, args) for fn, args in cs
                    if _case_dtype(args) in dtypes]
             for name, cs in cases.items()}
  rows: list[Row] = []
  for name in scenarios:
    if name == "loop":
      if dtypes is not None and "bfloat16" not in dtypes:
        continue
      args = (64, 128, 1024) if gpu else (4, 16, 32)
      for r in small_loop(*args, repeats):
        rows.append(r)
        print_row(r)
      continue
    for fn, args in cases[name]:
      got = fn(*args, _iters(_flops_of(fn, args), gpu), repeats)
      if isinstance(got, Row):  # moe returns its rows with their host figures
        got.host = _last_host
        got = [got]
      for r in got:
        rows.append(r)
        print_row(r)
  if out_dir:
    os.makedirs(out_dir, exist_ok=True)
    mode = graph_mode(os.environ.get("XLA_FLAGS", ""))
    stem = "bench_cpu" if cpu_plain else "bench_" + mode if mode else "bench"
    dev = jax.devices()[0]
    with open(os.path.join(out_dir, stem + ".json"), "w") as f:
      json.dump({"device": dev.device_kind, "jax": jax.__version__,
                 "date": time.strftime("%Y-%m-%d"),
                 "command": " ".join(["python benchmarks/bench.py"] +
                                     sys.argv[1:]),
                 "xla_flags": os.environ.get("XLA_FLAGS", ""),
                 "window_s": WINDOW_S, "repeats": repeats,
                 "cpu_count": os.cpu_count(),
                 "peak_tflops": PEAK_TFLOPS, "peak_tbps": PEAK_TBPS,
                 "rows": [r.as_dict() for r in rows]}, f, indent=1)
    plot(rows, os.path.join(out_dir, stem + ".png"),
         f"jax_dynoff vs XLA on {dev.device_kind}", roofline=gpu)
  return rows


def plot(rows: list[Row], path: str, title: str, roofline: bool = True) -> None:
  """Speed-up over XLA, and (roofline: H200 peaks) % of the roofline floor."""
  import matplotlib
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt

  labels = [f"{r.scenario} {r.case} {r.dtype}" for r in rows]
  y = np.arange(len(rows))
  fig, axes = plt.subplots(1, 2 if roofline else 1,
                           figsize=(12 if roofline else 7,
                                    0.35 * len(rows) + 1.5),
                           sharey=True, squeeze=False)
  ax1 = axes[0][0]
  ax1.barh(y, [r.ratio for r in rows], color="tab:blue")
  ax1.axvline(1.0, color="k", lw=1)
  ax1.set_xscale("log")
  ax1.set_xlabel("XLA time / jax_dynoff time (> 1: faster than XLA)")
  ax1.set_yticks(y, labels, fontsize=8)
  ax1.invert_yaxis()
  if not roofline:
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return
  ax2 = axes[0][1]
  ax2.barh(y, [100 * r.floor_ms / r.ours_ms for r in rows], color="tab:green",
           label="jax_dynoff")
  ax2.scatter([100 * r.floor_ms / r.xla_ms for r in rows], y, color="k",
              marker="|", s=120, label="XLA")
  ax2.set_xlabel("% of roofline floor (max of FLOPs/peak, bytes/bandwidth)")
  ax2.legend(loc="lower right", fontsize=8)
  fig.suptitle(title)
  fig.tight_layout()
  fig.savefig(path, dpi=110)
  plt.close(fig)


def print_row(r: Row):
  extra = f" ideal {r.ideal_ms:8.4f} ms" if r.ideal_ms else ""
  if jax.default_backend() == "gpu":
    speed = (f"{r.tflops:7.1f} TFLOP/s {r.tbps:5.2f} TB/s  "
             f"({100 * r.floor_ms / r.ours_ms:4.1f}% of roofline)")
  else:  # the roofline's peaks are an H200's
    speed = (f"ours {r.tflops * 1e3:6.1f} GFLOP/s, "
             f"jnp.dot / XLA {r.flops / (r.xla_ms * 1e-3) / 1e9:6.1f} GFLOP/s")
  print(f"{r.scenario:<16} {r.case:<22} {r.dtype:<9} ours {r.ours_ms:8.4f} ms "
        f"xla {r.xla_ms:8.4f} ms{extra}  ratio {r.ratio:5.2f}  {speed}",
        flush=True)
  if r.host:
    o, x = r.host["ours"], r.host["xla"]
    fmt = lambda v: "-" if v is None else f"{v:.2f}"
    print(f"{'':<16} host per call: ours {fmt(o['host_us_median'])} us "
          f"({o['host_of']}), xla {fmt(x['host_us_median'])} us "
          f"({x['host_of']}, {x['host_events_per_call']:.2f} per call); "
          f"device events per call: ours {o['device_events_per_call']:.2f}, "
          f"xla {x['device_events_per_call']:.2f}", flush=True)


def graph_mode(xla_flags: str) -> str:
  """The graph setting `xla_flags` asks for, as the output's stem names it:
  "graphs" (cuda_graph_flags(whole_loops=True): loops become one graph
  each), "body_graphs" (cuda_graph_flags(): each loop body a graph, the loop
  on the host), or "" (XLA's defaults)."""
  if "+WHILE" in xla_flags:
    return "graphs"
  if "--xla_gpu_graph_min_graph_size=1" in xla_flags.split():
    return "body_graphs"
  return ""


def main(argv=None):
  p = argparse.ArgumentParser(description="jax_dynoff vs XLA, side by side")
  p.add_argument("out_dir", nargs="?", default=None,
                 help="folder for bench.json and bench.png")
  p.add_argument("--quick", action="store_true",
                 help="2 rounds of 0.5 s windows (not 3 of 1 s), no float32 "
                 "plain GEMMs, the first moe case only")
  p.add_argument("--graphs", action="store_true",
                 help="run with jax_dynoff.cuda_graph_flags(whole_loops=True) "
                 "in XLA_FLAGS: every timed loop, ours and XLA's, becomes one "
                 "CUDA graph")
  p.add_argument("--body-graphs", action="store_true",
                 help="run with jax_dynoff.cuda_graph_flags() in XLA_FLAGS: "
                 "every timed loop's body, ours and XLA's, becomes a CUDA "
                 "graph, the loop stays on the host")
  p.add_argument("--host", action="store_true",
                 help="also trace each loop once (GPU): host time per call of "
                 "our custom call and of XLA's GEMM thunk or loop-body "
                 "command buffer, device events per call")
  p.add_argument("--scenarios", default=",".join(SCENARIOS),
                 help=f"comma-separated subset of {SCENARIOS}")
  p.add_argument("--dtypes", default=None,
                 help="comma-separated element types whose cases run "
                 "(e.g. float32; default: all)")
  p.add_argument("--cpu-plain", action="store_true",
                 help="only plain gemm vs jnp.dot at "
                 f"{'^3, '.join(map(str, CPU_PLAIN_SIZES))}^3 in "
                 f"{', '.join(CPU_PLAIN_DTYPES)}, 5 rounds of 1-s windows "
                 "(meant for the CPU handler); writes bench_cpu.json")
  args = p.parse_args(argv)
  if args.graphs and args.body_graphs:
    p.error("--graphs and --body-graphs are two graph settings: one at most")
  if args.graphs or args.body_graphs:
    # XLA reads XLA_FLAGS when the backend starts: still ahead.
    os.environ["XLA_FLAGS"] = (
        os.environ.get("XLA_FLAGS", "") + " " +
        dyn.cuda_graph_flags(whole_loops=args.graphs)).strip()
  scenarios = tuple(s for s in args.scenarios.split(",") if s)
  unknown = set(scenarios) - set(SCENARIOS)
  if unknown:
    p.error(f"unknown scenarios {sorted(unknown)}; choose from {SCENARIOS}")
  dtypes = None
  if args.dtypes is not None:
    dtypes = tuple(d for d in args.dtypes.split(",") if d)
    bad = [d for d in dtypes if d not in ("bfloat16", "float16", "float32")]
    if bad:
      p.error(f"unknown dtypes {bad}; choose from bfloat16, float16, float32")
  global HOST
  HOST = args.host
  print(f"device: {jax.devices()[0].device_kind}, jax {jax.__version__}")
  run(args.out_dir, args.quick, scenarios, cpu_plain=args.cpu_plain,
      dtypes=dtypes)


if __name__ == "__main__":
  main()
