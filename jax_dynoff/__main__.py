"""`python -m jax_dynoff`: a short demo on whatever device JAX has.

A `fori_loop` writes L GEMM results into row slices of one buffer, at row
offsets read from a device table (a permutation, so no slice is trivially
affine in the loop index).  It is checked against the reference and timed
side by side with XLA's own way of writing the same loop (dynamic_slice +
jnp.dot + dynamic_update_slice).  Each variant is one jitted program; the
time is the median over repeats of the whole loop, divided by L.
"""

from __future__ import annotations

import argparse
import statistics
import time

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

import jax_dynoff as dyn


def _loops(layers: int, m: int):
  def ours(x, w, buf, rows):
    def body(i, buf):
      return dyn.gemm(x, dyn.window(w, (i, 0, 0), w.shape[1:]),
                      out=dyn.window(buf, (rows[i], 0), (m, w.shape[2])))
    return lax.fori_loop(0, layers, body, buf)

  def reference(x, w, buf, rows):
    def body(i, buf):
      return dyn.reference.gemm(
          x, dyn.window(w, (i, 0, 0), w.shape[1:]),
          out=dyn.window(buf, (rows[i], 0), (m, w.shape[2])))
    return lax.fori_loop(0, layers, body, buf)

  def xla(x, w, buf, rows):
    def body(i, buf):
      wi = lax.dynamic_index_in_dim(w, i, keepdims=False)
      y = jnp.dot(x, wi, preferred_element_type=jnp.float32).astype(buf.dtype)
      return lax.dynamic_update_slice(buf, y, (rows[i], 0))
    return lax.fori_loop(0, layers, body, buf)

  return ours, reference, xla


def _time(f, args, repeats: int) -> float:
  f(*args).block_until_ready()  # compile + warm up
  times = []
  for _ in range(repeats):
    t0 = time.perf_counter()
    f(*args).block_until_ready()
    times.append(time.perf_counter() - t0)
  return statistics.median(times)


def main(argv=None) -> int:
  p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  p.add_argument("--layers", type=int, default=8)
  p.add_argument("--m", type=int, default=64)
  p.add_argument("--n", type=int, default=None, help="n = k (default: 256 "
                 "on CPU, 4096 on GPU)")
  p.add_argument("--repeats", type=int, default=5)
  args = p.parse_args(argv)
  dev = jax.devices()[0]
  gpu = dev.platform == "gpu"
  n = args.n or (4096 if gpu else 256)
  L, m = args.layers, args.m
  dtype = jnp.bfloat16 if gpu else jnp.float32
  kx, kw, kb = jax.random.split(jax.random.key(0), 3)
  x = jax.random.uniform(kx, (m, n), dtype, -1, 1)
  w = (jax.random.uniform(kw, (L, n, n), dtype, -1, 1) / np.sqrt(n)).astype(dtype)
  buf = jax.random.uniform(kb, (L * m, n), dtype, -1, 1)
  rows = jnp.asarray(np.random.default_rng(0).permutation(L) * m, jnp.int32)

  ours, reference, xla = (jax.jit(f) for f in _loops(L, m))
  got, want = ours(x, w, buf, rows), reference(x, w, buf, rows)
  err = float(jnp.linalg.norm((got - want).astype(jnp.float32)) /
              jnp.linalg.norm(want.astype(jnp.float32)))
  t_ours = _time(ours, (x, w, buf, rows), args.repeats)
  t_xla = _time(xla, (x, w, buf, rows), args.repeats)
  flops = 2.0 * L * m * n * n

  print(f"jax_dynoff demo on {dev.device_kind} ({dev.platform}), "
        f"jax {jax.__version__}")
  print(f"fori_loop of {L} GEMMs {m}x{n}x{n} ({jnp.dtype(dtype).name}) "
        f"written into row slices of one buffer at offsets from a device "
        f"table")
  print(f"relative error vs jax_dynoff.reference: {err:.2e}")
  print()
  print(f"{'variant':<40} {'per GEMM':>12} {'GFLOP/s':>10}")
  for name, t in (("jax_dynoff.gemm (out window)", t_ours),
                  ("XLA: dynamic_slice + dot + update", t_xla)):
    print(f"{name:<40} {t / L * 1e6:>9.1f} us {flops / t / 1e9:>10.1f}")
  print(f"{'ratio (XLA time / jax_dynoff time)':<40} {t_xla / t_ours:>12.2f}")
  print("(host wall-clock of the whole jitted loop, median of "
        f"{args.repeats}; use jax_dynoff's benchmarks for device timings)")
  tol = 2e-2 if dtype == jnp.bfloat16 else 1e-4
  return 0 if err < tol else 1


if __name__ == "__main__":
  raise SystemExit(main())
