"""Helpers shared by the test modules: the full-float32 reference run, the
bit view that compares poisoned elements exactly, a script run in a fresh
process with the kernel log on, and ragged_dot's gradients against lax's."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax


def ref_highest(f):
  """f jitted, traced and run with full-float32 matmuls (no TF32), so the
  reference is exact to float32 whatever XLA's default precision."""
  jf = jax.jit(f)

  def run(*args):
    with jax.default_matmul_precision("highest"):
      return jf(*args)
  return run


def bits(x):
  """x's bits as unsigned integers of its width: NaN payloads compare."""
  x = np.asarray(x)
  return x.view({2: np.uint16, 4: np.uint32, 8: np.uint64}[x.dtype.itemsize])


def run_logged(script: str, payload) -> tuple[str, list[str]]:
  """`script` in a fresh process with JAX_DYNOFF_LOG=1 (the kernel log is
  read once per process), `payload` passed as JSON in its argv; returns its
  stdout and the handler's per-call kernel lines.  The child allocates GPU
  memory on demand: the pytest process beside it holds XLA's default
  preallocation (75% of the device), and a second one ran out of memory
  where the suite ran without a memory fraction."""
  e = dict(os.environ, JAX_DYNOFF_LOG="1",
           XLA_PYTHON_CLIENT_PREALLOCATE="false")
  r = subprocess.run([sys.executable, "-c", script, json.dumps(payload)],
                     env=e, capture_output=True, text=True, timeout=600)
  assert r.returncode == 0, r.stdout + r.stderr
  lines = [l for l in r.stderr.splitlines() if l.startswith("jax_dynoff: ")]
  assert lines, r.stderr
  return r.stdout, lines


def assert_ragged_dot_grads_equal_lax(ragged_dot, sizes, seed, m=20):
  """The gradients of `ragged_dot` (jitted) with respect to lhs and rhs
  (the weight gradient is the ragged contraction) equal lax.ragged_dot's,
  for float32 operands (m, 12) and (len(sizes), 12, 8) at HIGHEST."""
  r = np.random.default_rng(seed)
  f32 = jnp.float32
  lhs = jnp.asarray(r.standard_normal((m, 12)), f32)
  rhs = jnp.asarray(r.standard_normal((len(sizes), 12, 8)), f32)
  gs = jnp.asarray(sizes, jnp.int32)
  ct = jnp.asarray(r.standard_normal((m, 8)), f32)
  p = lax.Precision.HIGHEST

  def loss(f):
    return lambda a, b: jnp.sum(f(a, b, gs, precision=p) * ct)

  want = jax.grad(loss(lax.ragged_dot), argnums=(0, 1))(lhs, rhs)
  got = jax.jit(jax.grad(loss(ragged_dot), argnums=(0, 1)))(lhs, rhs)
  for g, w in zip(got, want):
    np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-4)


def fused_swiglu_into(lhs, rhs, offsets, sizes, out, opts=None):
  """ragged_dot(activation="swiglu")'s fused call writing into a window
  of the caller's `out` (m, >= n / 2) at column 0 (ragged_dot itself
  writes into zeros): group g's rows [offsets[g], + sizes[g]) get
  silu(gate) * up of lhs's rows times rhs[g], nothing else of out is
  touched.  `opts`: the call's KernelOptions."""
  from jax_dynoff import ragged  # pylint: disable=g-import-not-at-top
  from jax_dynoff.call import make_spec  # pylint: disable=g-import-not-at-top
  from jax_dynoff.primitive import Operands, bind  # pylint: disable=g-import-not-at-top
  from jax_dynoff.signature import check_call  # pylint: disable=g-import-not-at-top
  import jax_dynoff as dyn  # pylint: disable=g-import-not-at-top
  m, h = lhs.shape[0], rhs.shape[2] // 2
  ow = dyn.window(out, (offsets[0], 0), (m, h), valid=(sizes[0], h))
  call = check_call(ragged._rows(lhs, offsets, sizes), rhs[0], out=ow,
                    epilogue="swiglu", opts=opts)
  spec = ragged._batched(make_spec(call), {"a": False, "b": True,
                                           "d": False}, rhs.shape[0])
  starts = {"a": [offsets, sizes], "b": [], "c": [], "d": [offsets, sizes]}
  return bind(spec, Operands(lhs, rhs, None, out, starts))


def rows_into(lhs, rhs, offsets, sizes, out, col=0, transpose_b=False,
              opts=None):
  """ragged_dot's call (x_g @ rhs[g], or @ rhs[g]^T with `transpose_b`: its
  gradient wrt lhs) writing into a window of the caller's `out` at column
  `col`, out's dtype (ragged_dot itself writes into zeros): group g's rows
  [offsets[g], + sizes[g]) of the window get the product, nothing else of
  out is touched."""
  from jax_dynoff import ragged  # pylint: disable=g-import-not-at-top
  from jax_dynoff.call import make_spec  # pylint: disable=g-import-not-at-top
  from jax_dynoff.primitive import Operands, bind  # pylint: disable=g-import-not-at-top
  from jax_dynoff.signature import check_call  # pylint: disable=g-import-not-at-top
  import jax_dynoff as dyn  # pylint: disable=g-import-not-at-top
  m, n = lhs.shape[0], rhs.shape[1] if transpose_b else rhs.shape[2]
  ow = dyn.window(out, (offsets[0], col), (m, n), valid=(sizes[0], n))
  call = check_call(ragged._rows(lhs, offsets, sizes), rhs[0], out=ow,
                    transpose_b=transpose_b, opts=opts)
  spec = ragged._batched(make_spec(call), {"a": False, "b": True,
                                           "d": False}, rhs.shape[0])
  starts = {"a": [offsets, sizes], "b": [], "c": [], "d": [offsets, sizes]}
  return bind(spec, Operands(lhs, rhs, None, out, starts))
