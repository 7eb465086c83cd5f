"""`python -m jax_dynoff.bench`: jax_dynoff against XLA, side by side.

Every variant is timed the same way: `iters` calls inside one jitted
`fori_loop` (so launch gaps are the device's, not the host's), the whole
loop timed after a warm-up, median over `repeats`, divided by `iters`.
Loop bodies depend on the loop index through `lax.optimization_barrier`, so
XLA cannot hoist a loop-invariant GEMM out of the loop.

Scenarios (more in later versions):
- `plain`: a GEMM whose A and D windows sit at non-zero offsets read from a
  device table, against `jnp.dot` on the same shapes;
- `loop`: 64 GEMMs 128x1024x1024 written into row slices of one buffer at
  offsets from a device table inside one fori_loop, as one whole-loop CUDA
  graph (with --graphs) and with command buffers off, against XLA's loop
  (dynamic_slice + jnp.dot + dynamic_update_slice).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import sys
import time
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

import jax_dynoff as dyn

PEAK_TFLOPS = {"bfloat16": 790.0, "float16": 790.0, "float32": 395.0}  # H200 dense
PEAK_TBPS = 4.3


@dataclasses.dataclass
class Row:
  scenario: str
  case: str
  dtype: str
  ours_ms: float
  xla_ms: float
  flops: float

  @property
  def ratio(self) -> float:
    """XLA time / jax_dynoff time: > 1 means jax_dynoff is faster."""
    return self.xla_ms / self.ours_ms

  @property
  def tflops(self) -> float:
    return self.flops / (self.ours_ms * 1e-3) / 1e12

  def as_dict(self):
    d = dataclasses.asdict(self)
    d.update(ratio=self.ratio, tflops=self.tflops,
             roofline_pct=100 * self.tflops / PEAK_TFLOPS[self.dtype])
    return d


def time_loop(body: Callable, carry, iters: int, repeats: int,
              compiler_options=None) -> float:
  """Milliseconds per iteration of `carry = body(i, carry)`, on device."""
  f = jax.jit(lambda c: lax.fori_loop(0, iters, body, c)).lower(carry).compile(
      compiler_options=compiler_options)
  jax.block_until_ready(f(carry))
  times = []
  for _ in range(repeats):
    t0 = time.perf_counter()
    jax.block_until_ready(f(carry))
    times.append(time.perf_counter() - t0)
  return statistics.median(times) / iters * 1e3


def _rand(key, shape, dtype):
  return jax.random.uniform(key, shape, jnp.float32, -1, 1).astype(dtype)


def plain(m: int, n: int, k: int, dtype, iters: int, repeats: int) -> Row:
  """A and D at non-zero device offsets vs jnp.dot on the same shapes."""
  ka, kb, kd = jax.random.split(jax.random.key(m * 7 + n), 3)
  pad = 128
  a_big = _rand(ka, (m + pad, k), dtype)
  b = _rand(kb, (k, n), dtype)
  d_big = _rand(kd, (m + pad, n), dtype)
  offs = jnp.asarray([64, 128], jnp.int32)   # aligned, non-zero, dynamic
  a = a_big[:m]

  def ours(i, carry):
    d, offs = carry
    off = offs[i % 2]
    d = dyn.gemm(dyn.window(a_big, (off, 0), (m, k)), b,
                 out=dyn.window(d, (offs[1 - i % 2], 0), (m, n)))
    return d, offs

  def xla(i, d):
    # The carry is the last product, so no iteration is dead code.
    aa, bb, _ = lax.optimization_barrier((a, b, i))
    return jnp.dot(aa, bb, preferred_element_type=dtype)

  t_ours = time_loop(ours, (d_big, offs), iters, repeats)
  t_xla = time_loop(xla, jnp.zeros((m, n), dtype), iters, repeats)
  return Row("plain", f"{m}x{n}x{k}", jnp.dtype(dtype).name, t_ours, t_xla,
             2.0 * m * n * k)


def small_loop(L: int, m: int, n: int, repeats: int) -> list[Row]:
  """L GEMMs (m x n x n) into row slices of one buffer at offsets from a
  device table, in one fori_loop: whole-loop CUDA graph or not, vs XLA."""
  kx, kw, kb = jax.random.split(jax.random.key(L + m), 3)
  dtype = jnp.bfloat16
  x = _rand(kx, (m, n), dtype)
  w = _rand(kw, (L, n, n), dtype)
  buf = _rand(kb, (L * m, n), dtype)
  rows = jnp.asarray(np.random.default_rng(0).permutation(L) * m, jnp.int32)

  def ours(j, carry):
    buf, rows = carry
    def body(i, buf):
      return dyn.gemm(x, dyn.window(w, (i, 0, 0), (n, n)),
                      out=dyn.window(buf, (rows[i], 0), (m, n)))
    return lax.fori_loop(0, L, body, buf), rows

  def xla(j, carry):
    buf, rows = carry
    def body(i, buf):
      wi = lax.dynamic_index_in_dim(w, i, keepdims=False)
      y = jnp.dot(x, wi, preferred_element_type=jnp.float32).astype(dtype)
      return lax.dynamic_update_slice(buf, y, (rows[i], 0))
    return lax.fori_loop(0, L, body, buf), rows

  from jax_dynoff.graphs import NO_GRAPHS
  flops = 2.0 * L * m * n * n
  iters = 20
  t_graph = time_loop(ours, (buf, rows), iters, repeats)
  t_nograph = time_loop(ours, (buf, rows), iters, repeats, NO_GRAPHS)
  t_xla = time_loop(xla, (buf, rows), iters, repeats)
  case = f"L{L}_{m}x{n}x{n}"
  return [Row("loop_graph", case, "bfloat16", t_graph, t_xla, flops),
          Row("loop_nograph", case, "bfloat16", t_nograph, t_xla, flops)]


PLAIN_SHAPES_GPU = [(2048, 2048, 2048), (4096, 4096, 4096),
                    (8192, 8192, 8192), (128, 4096, 4096)]
PLAIN_SHAPES_CPU = [(64, 64, 64), (128, 128, 128)]


SCENARIOS = ("plain", "loop")


def run(out_dir: str | None, quick: bool = False,
        scenarios=SCENARIOS) -> list[Row]:
  gpu = jax.default_backend() == "gpu"
  repeats = 3 if quick else 5
  rows = []
  if "plain" in scenarios:
    shapes = PLAIN_SHAPES_GPU if gpu else PLAIN_SHAPES_CPU
    dtypes = [jnp.bfloat16, jnp.float16] if gpu else [jnp.float32]
    for dtype in dtypes:
      for (m, n, k) in shapes:
        flops = 2.0 * m * n * k
        iters = max(5, min(200, int(2e13 / flops))) if gpu else 3
        rows.append(plain(m, n, k, dtype, iters, repeats))
        print_row(rows[-1])
  if "loop" in scenarios:
    # Issue 4's loop: 64 small GEMMs, whole-loop graph vs none vs XLA.
    args = (64, 128, 1024) if gpu else (4, 16, 32)
    for r in small_loop(*args, repeats):
      rows.append(r)
      print_row(r)
  if out_dir:
    os.makedirs(out_dir, exist_ok=True)
    dev = jax.devices()[0]
    graphs = "+WHILE" in os.environ.get("XLA_FLAGS", "")
    name = "bench_graphs.json" if graphs else "bench.json"
    with open(os.path.join(out_dir, name), "w") as f:
      json.dump({"device": dev.device_kind, "jax": jax.__version__,
                 "date": time.strftime("%Y-%m-%d"),
                 "command": " ".join(sys.argv),
                 "xla_flags": os.environ.get("XLA_FLAGS", ""),
                 "rows": [r.as_dict() for r in rows]}, f, indent=1)
  return rows


def print_row(r: Row):
  print(f"{r.scenario:<12} {r.case:<18} {r.dtype:<9} ours {r.ours_ms:8.4f} ms "
        f"xla {r.xla_ms:8.4f} ms  ratio {r.ratio:5.2f}  {r.tflops:7.1f} TFLOP/s "
        f"({100 * r.tflops / PEAK_TFLOPS[r.dtype]:4.1f}% of peak)", flush=True)


def main(argv=None):
  p = argparse.ArgumentParser(description="jax_dynoff vs XLA, side by side")
  p.add_argument("out_dir", nargs="?", default=None,
                 help="folder for bench.json")
  p.add_argument("--quick", action="store_true")
  p.add_argument("--graphs", action="store_true",
                 help="run with jax_dynoff.cuda_graph_flags() in XLA_FLAGS: "
                 "every timed loop, ours and XLA's, becomes one CUDA graph")
  p.add_argument("--scenarios", default=",".join(SCENARIOS),
                 help=f"comma-separated subset of {SCENARIOS}")
  args = p.parse_args(argv)
  if args.graphs:  # XLA reads XLA_FLAGS when the backend starts: still ahead
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " " +
                               dyn.cuda_graph_flags()).strip()
  print(f"device: {jax.devices()[0].device_kind}, jax {jax.__version__}")
  run(args.out_dir, args.quick, tuple(args.scenarios.split(",")))


if __name__ == "__main__":
  main()
