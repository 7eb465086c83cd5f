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
  stdout and the handler's per-call kernel lines."""
  e = dict(os.environ, JAX_DYNOFF_LOG="1")
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
