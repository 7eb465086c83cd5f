"""Helpers shared by the GPU test modules: the full-float32 reference run,
the bit view that compares poisoned elements exactly, and a script run in a
fresh process with the kernel log on."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import jax
import numpy as np


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
