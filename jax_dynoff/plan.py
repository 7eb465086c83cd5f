"""Which CUDA kernel runs a call, decided at trace time from static facts.

The choice (and the workspace it needs) is baked into the lowered program, so
a compiled loop always launches the same kernels: that is what keeps the
CUDA handler command-buffer (CUDA graph) safe.  The CPU handler ignores it.
"""

from __future__ import annotations

import dataclasses

from jax_dynoff.spec import GemmSpec

# Mirrors enum class Path in ffi/gemm_problem.h.
PATHS = {"generic": 0, "sm90_large": 1, "sm90_small_m": 2, "sm90_split_k": 3}


@dataclasses.dataclass(frozen=True)
class Plan:
  path: str              # a key of PATHS
  split_k: int           # K slices (1: no split)
  workspace_bytes: int   # the CUDA handler's scratch (ret 1), fixed now


def plan(spec: GemmSpec) -> Plan:
  """The CUDA plan for `spec`: the generic kernel until the GPU path lands."""
  # Pointer arrays for A, B, C, D per batch item, 8 bytes each.
  return Plan("generic", 1, 4 * 8 * max(spec.batch, 1))
