"""CUDA-graph capture of jax_dynoff calls inside loops and conditionals.

Reads XLA's thunk dump through jax_dynoff.graphs.check_capture.  GPU only.
"""

import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

import jax_dynoff as dyn
from jax_dynoff import graphs

gpu = pytest.mark.skipif(jax.default_backend() != "gpu",
                         reason="needs a CUDA GPU")
pytestmark = [pytest.mark.gpu, gpu]

M, N, K, L = 128, 256, 192, 8


def _data(seed=0, dtype=jnp.bfloat16):
  k = jax.random.split(jax.random.key(seed), 3)
  w = jax.random.uniform(k[0], (L, K, N), jnp.float32, -1, 1).astype(dtype)
  x = jax.random.uniform(k[1], (M, K), jnp.float32, -1, 1).astype(dtype)
  buf = jax.random.uniform(k[2], (L * M, N), jnp.float32, -1, 1).astype(dtype)
  return x, w, buf


def _table(seed):
  return jnp.asarray(np.random.default_rng(seed).permutation(L) * M, jnp.int32)


def _slices_loop(mod):
  def f(x, w, buf, rows):
    def body(i, buf):
      return mod.gemm(x, dyn.window(w, (i, 0, 0), (K, N)),
                      out=dyn.window(buf, (rows[i], 0), (M, N)))
    return lax.fori_loop(0, L, body, buf)
  return f


def _dump_on_failure(report, name):
  """Saves the thunk dump under $OUT (for reading later); returns its head."""
  out = os.environ.get("OUT")
  if out:
    with open(os.path.join(out, f"thunks_{name}.txt"), "w") as f:
      f.write(report.thunks)
  return report.thunks[:4000]


def test_plain_call_is_captured():
  x, w, buf = _data()
  f = lambda x, w, buf, r: dyn.gemm(x, dyn.window(w, (r[0] // M, 0, 0), (K, N)),
                                    out=dyn.window(buf, (r[1], 0), (M, N)))
  rep = graphs.check_capture(f, x, w, buf, _table(0), whole_loops=False)
  assert rep.captured >= 1 and rep.uncaptured == 0, _dump_on_failure(rep, "plain")


def test_fori_loop_is_one_command_buffer():
  x, w, buf = _data()
  rep = graphs.check_capture(_slices_loop(dyn), x, w, buf, _table(0))
  msg = _dump_on_failure(rep, "fori")
  assert rep.all_captured, msg
  assert rep.whole_program, msg
  assert "kWhile" in rep.thunks, msg


def _cond_loop(mod):
  # The motivating case of CUTLASS PR #1274: two GEMMs writing at different
  # device offsets, chosen on the device, inside a loop.
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


def test_cond_is_captured_with_its_conditional():
  x, w, buf = _data()
  pred = jnp.asarray([1, 0] * (L // 2), jnp.int32)
  rep = graphs.check_capture(_cond_loop(dyn), x, w, buf, _table(1), pred)
  msg = _dump_on_failure(rep, "cond")
  assert rep.all_captured and rep.whole_program, msg
  assert "kConditional" in rep.thunks, msg


def _scan_switch(mod):
  def f(x, w, buf, rows, which):
    def step(buf, i):
      wi = dyn.window(w, (i, 0, 0), (K, N))
      branches = [
          lambda b, a=a: mod.gemm(x, wi, out=dyn.window(b, (rows[i], 0), (M, N)),
                                  alpha=a) for a in (1.0, 0.5, -1.0)]
      return lax.switch(which[i], branches, buf), None
    return lax.scan(step, buf, jnp.arange(L))[0]
  return f


def test_scan_and_switch_are_captured():
  x, w, buf = _data()
  which = jnp.asarray(np.arange(L) % 3, jnp.int32)
  rep = graphs.check_capture(_scan_switch(dyn), x, w, buf, _table(2), which)
  msg = _dump_on_failure(rep, "scan_switch")
  assert rep.all_captured and rep.whole_program, msg


def _rel(a, b):
  a, b = np.asarray(a, np.float32), np.asarray(b, np.float32)
  return np.linalg.norm(a - b) / np.linalg.norm(b)


def test_replay_with_new_offsets_and_buffers():
  """One compiled, graph-captured loop, run with fresh tables and buffers."""
  x, w, buf = _data()
  pred = jnp.asarray([1, 0] * (L // 2), jnp.int32)
  args = (x, w, buf, _table(0), pred)
  compiled = jax.jit(_cond_loop(dyn)).lower(*args).compile(
      compiler_options=graphs.cuda_graph_options())
  ref = jax.jit(_cond_loop(dyn.reference))
  for seed in range(6):
    x, w, buf = _data(seed)
    rows = _table(seed + 10)
    pred = jnp.asarray(np.random.default_rng(seed).integers(0, 2, L), jnp.int32)
    got = compiled(x, w, buf, rows, pred)
    want = ref(x, w, buf, rows, pred)
    assert _rel(got, want) < 1e-2, seed
