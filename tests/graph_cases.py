"""Programs whose CUDA-graph capture tests/test_gpu_graphs.py checks.

Run as a script (`python graph_cases.py`), it compiles each case with a thunk
dump under the XLA_FLAGS of its environment and prints one JSON line per
case; the tests start it with `jax_dynoff.cuda_graph_flags(whole_loops=True)`
set, since XLA reads XLA_FLAGS only when the backend starts.
"""

import json
import os
import sys

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

import jax_dynoff as dyn

M, N, K, L = 128, 256, 192, 8


def data(seed=0, dtype=jnp.bfloat16):
  k = jax.random.split(jax.random.key(seed), 3)
  w = jax.random.uniform(k[0], (L, K, N), jnp.float32, -1, 1).astype(dtype)
  x = jax.random.uniform(k[1], (M, K), jnp.float32, -1, 1).astype(dtype)
  buf = jax.random.uniform(k[2], (L * M, N), jnp.float32, -1, 1).astype(dtype)
  return x, w, buf


def table(seed):
  """Row offsets of the L output slices, a permutation: not affine in i."""
  return jnp.asarray(np.random.default_rng(seed).permutation(L) * M, jnp.int32)


def plain(mod):
  def f(x, w, buf, rows):
    return mod.gemm(x, dyn.window(w, (rows[0] // M, 0, 0), (K, N)),
                    out=dyn.window(buf, (rows[1], 0), (M, N)))
  return f


def fori(mod):
  def f(x, w, buf, rows):
    def body(i, buf):
      return mod.gemm(x, dyn.window(w, (i, 0, 0), (K, N)),
                      out=dyn.window(buf, (rows[i], 0), (M, N)))
    return lax.fori_loop(0, L, body, buf)
  return f


def cond(mod):
  """The motivating case of CUTLASS PR #1274: two GEMMs writing at different
  device offsets, chosen on the device, inside a loop."""
  def f(x, w, buf, rows, pred):
    def body(i, buf):
      wi = dyn.window(w, (i, 0, 0), (K, N))
      return lax.cond(
          pred[i] > 0,
          lambda b: mod.gemm(x, wi, out=dyn.window(b, (rows[i], 0), (M, N))),
          lambda b: mod.gemm(x, wi, out=dyn.window(b, (rows[L - 1 - i], 0),
                                                    (M, N)), alpha=-2.0),
          buf)
    return lax.fori_loop(0, L, body, buf)
  return f


def _switch_step(mod, x, w, rows, which, buf, i):
  wi = dyn.window(w, (i, 0, 0), (K, N))
  branches = [
      lambda b, a=a: mod.gemm(x, wi, out=dyn.window(b, (rows[i], 0), (M, N)),
                              alpha=a) for a in (1.0, 0.5, -1.0)]
  return lax.switch(which[i], branches, buf)


def scan_switch(mod):
  """A scan whose step counter rides in the carry (no xs)."""
  def f(x, w, buf, rows, which):
    def step(c, _):
      buf, i = c
      return (_switch_step(mod, x, w, rows, which, buf, i), i + 1), None
    return lax.scan(step, (buf, jnp.int32(0)), None, length=L)[0][0]
  return f


def scan_xs_switch(mod):
  """The same scan over xs = arange(L): XLA slices xs[i] itself."""
  def f(x, w, buf, rows, which):
    def step(buf, i):
      return _switch_step(mod, x, w, rows, which, buf, i), None
    return lax.scan(step, buf, jnp.arange(L))[0]
  return f


def fresh_args(name, seed):
  """New buffers, a new offset table and new branch choices for a case."""
  x, w, buf = data(seed)
  rng = np.random.default_rng(seed)
  extra = {"plain": (), "fori": (),
           "cond": (jnp.asarray(rng.integers(0, 2, L), jnp.int32),),
           "scan_switch": (jnp.asarray(rng.integers(0, 3, L), jnp.int32),),
           "scan_xs_switch": (jnp.asarray(rng.integers(0, 3, L), jnp.int32),)}
  return (x, w, buf, table(seed + 10)) + extra[name]


def cases():
  """name -> (program builder, args)."""
  x, w, buf = data()
  pred = jnp.asarray([1, 0] * (L // 2), jnp.int32)
  which = jnp.asarray(np.arange(L) % 3, jnp.int32)
  return {
      "plain": (plain, (x, w, buf, table(0))),
      "fori": (fori, (x, w, buf, table(0))),
      "cond": (cond, (x, w, buf, table(1), pred)),
      "scan_switch": (scan_switch, (x, w, buf, table(2), which)),
      "scan_xs_switch": (scan_xs_switch, (x, w, buf, table(2), which)),
  }


def main():
  out = os.environ.get("OUT")
  for name, (build, args) in cases().items():
    rep = dyn.check_capture(build(dyn), *args)
    if out:
      with open(os.path.join(out, "thunks.txt"), "a") as f:
        f.write(f"=== {name} (XLA_FLAGS={os.environ.get('XLA_FLAGS')})\n")
        f.write(rep.thunks)
    print(json.dumps({"case": name, "captured": rep.captured,
                      "uncaptured": rep.uncaptured,
                      "whole_program": rep.whole_program,
                      "while": "kWhile" in rep.thunks,
                      "conditional": "kConditional" in rep.thunks,
                      "hints": rep.hints}))
  sys.stdout.flush()


if __name__ == "__main__":
  main()
