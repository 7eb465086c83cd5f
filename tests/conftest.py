"""Shared pytest configuration for the jax_dynoff CPU test suite.

Hypothesis profiles (pick one with JAX_DYNOFF_HYPOTHESIS_PROFILE):
  default   ~30 examples per property, no deadline (compiles dominate)
  quick     few examples, for a fast smoke run
  thorough  many examples, for a long local soak
Property tests set their own `max_examples` through `strategies.examples(n)`,
which JAX_DYNOFF_HYPOTHESIS_SCALE multiplies (e.g. 10 for a long soak).
"""

from __future__ import annotations

import os
import sys

import jax
import pytest
from hypothesis import HealthCheck, settings

_COMMON = dict(
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                           HealthCheck.filter_too_much],
)
# The benchmark harness lives outside the package (benchmarks/bench.py, not
# shipped in the wheel); its tests and the scripts beside it import it as
# `bench`.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                os.pardir, "benchmarks"))

settings.register_profile("default", max_examples=30, **_COMMON)
settings.register_profile("quick", max_examples=5, **_COMMON)
settings.register_profile("thorough", max_examples=300, **_COMMON)
settings.load_profile(os.environ.get("JAX_DYNOFF_HYPOTHESIS_PROFILE",
                                     "default"))


# The modules whose tests must run with x64 off (they use `jax.enable_x64`
# contexts where they need it); other modules are left alone.
_X64_OFF_MODULES = {"test_semantics", "test_loops", "test_transforms",
                    "test_errors", "test_lowering", "test_ragged"}


@pytest.fixture(autouse=True)
def _x64_does_not_leak(request):
  """Every test of ours starts and ends with x64 off.

  On a GPU these semantic tests also run with full-fp32 matmuls: they check
  float32 results to 1e-5, and by default XLA (the reference) and jax_dynoff
  use TF32 there, as jnp.dot does.  TF32 accuracy is tested in
  test_gpu_kernels.py.
  """
  name = request.module.__name__.rpartition(".")[2]
  if name not in _X64_OFF_MODULES:
    yield
    return
  assert not jax.config.jax_enable_x64, "jax_enable_x64 leaked into a test"
  if jax.default_backend() == "gpu":
    with jax.default_matmul_precision("highest"):
      yield
  else:
    yield
  assert not jax.config.jax_enable_x64, "a test left jax_enable_x64 on"
