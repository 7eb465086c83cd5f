"""`python -m jax_dynoff.bench`: jax_dynoff against XLA, side by side.

Every variant is timed the same way: `iters` calls inside one jitted
`fori_loop` (so launch gaps are the device's, not the host's), the whole
loop timed after a warm-up, median over `repeats`, divided by `iters`.
Loop bodies depend on the loop index through `lax.optimization_barrier`, so
XLA cannot hoist a loop-invariant GEMM out of the loop.

Scenarios (more in later versions): `plain`, a GEMM whose A and D windows
sit at non-zero offsets read from a device table, against `jnp.dot` on the
same shapes.
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


# Set by --graphs: compile every timed loop as one CUDA graph (whole-loop
# command buffer), which takes host launch overhead out of the numbers.
COMPILER_OPTIONS: dict = {}


def time_loop(body: Callable, carry, iters: int, repeats: int) -> float:
  """Milliseconds per iteration of `carry = body(i, carry)`, on device."""
  f = jax.jit(lambda c: lax.fori_loop(0, iters, body, c)).lower(carry).compile(
      compiler_options=COMPILER_OPTIONS or None)
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


PLAIN_SHAPES_GPU = [(2048, 2048, 2048), (4096, 4096, 4096),
                    (8192, 8192, 8192), (128, 4096, 4096)]
PLAIN_SHAPES_CPU = [(64, 64, 64), (128, 128, 128)]


def run(out_dir: str | None, quick: bool = False) -> list[Row]:
  gpu = jax.default_backend() == "gpu"
  shapes = PLAIN_SHAPES_GPU if gpu else PLAIN_SHAPES_CPU
  dtypes = [jnp.bfloat16, jnp.float16] if gpu else [jnp.float32]
  rows = []
  for dtype in dtypes:
    for (m, n, k) in shapes:
      flops = 2.0 * m * n * k
      iters = max(5, min(200, int(2e13 / flops))) if gpu else 3
      rows.append(plain(m, n, k, dtype, iters, 3 if quick else 5))
      print_row(rows[-1])
  if out_dir:
    os.makedirs(out_dir, exist_ok=True)
    dev = jax.devices()[0]
    name = "bench_graphs.json" if COMPILER_OPTIONS else "bench.json"
    with open(os.path.join(out_dir, name), "w") as f:
      json.dump({"device": dev.device_kind, "jax": jax.__version__,
                 "date": time.strftime("%Y-%m-%d"),
                 "command": " ".join(sys.argv),
                 "graphs": bool(COMPILER_OPTIONS),
                 "rows": [r.as_dict() for r in rows]}, f, indent=1)
  return rows


def print_row(r: Row):
  print(f"{r.scenario:<8} {r.case:<16} {r.dtype:<9} ours {r.ours_ms:8.4f} ms "
        f"xla {r.xla_ms:8.4f} ms  ratio {r.ratio:5.2f}  {r.tflops:7.1f} TFLOP/s "
        f"({100 * r.tflops / PEAK_TFLOPS[r.dtype]:4.1f}% of peak)", flush=True)


def main(argv=None):
  p = argparse.ArgumentParser(description="jax_dynoff vs XLA, side by side")
  p.add_argument("out_dir", nargs="?", default=None,
                 help="folder for bench.json")
  p.add_argument("--quick", action="store_true")
  p.add_argument("--graphs", action="store_true",
                 help="capture each timed loop in one CUDA graph (GPU)")
  args = p.parse_args(argv)
  if args.graphs:
    COMPILER_OPTIONS.update(dyn.cuda_graph_options())
  print(f"device: {jax.devices()[0].device_kind}, jax {jax.__version__}")
  run(args.out_dir, args.quick)


if __name__ == "__main__":
  main()
