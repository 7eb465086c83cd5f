"""Helpers shared by the GPU test modules: the full-float32 reference run and
the bit view that compares poisoned elements exactly."""

from __future__ import annotations

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
