"""One device's lowering of `jax_dynoff_gemm`, and the FFI handlers' registration.

Every call lowers to one custom call of the target "jax_dynoff_gemm"
(typed FFI, API version 4): the arrays, then the integer operands its
dynamic starts come from (never attributes, never read on the host;
`starts.start_operands`), then its graph tokens if any (graph_pads.py);
its named attributes (`spec.call_attrs`, the plan included), and `out`
aliased to result 0 (but on CUDA where the plan gives D as a fresh
buffer: `_lower_cuda_ragged`).  On CUDA the call has a
second result, the kernel's workspace, sized here at trace time so the
handler never allocates, and a call bound at a loop body's top level
passes its result through the spec's graph pads (graph_pads.py).
"""

from __future__ import annotations

import dataclasses
import functools
import os
import warnings

import jax
import jax.ffi
import numpy as np
from jax.interpreters import mlir
from jax._src.interpreters import mlir as _mlir_impl  # lower_per_platform
from jax._src.lib import xla_client

from jax_dynoff import graph_pads
from jax_dynoff import plan as plan_lib
from jax_dynoff import ragged_staging
from jax_dynoff import spec as spec_lib
from jax_dynoff.extension import ext as _ext
from jax_dynoff.spec import GemmSpec
from jax_dynoff.starts import start_operands

TARGET = "jax_dynoff_gemm"

# The CUDA handler keeps a state per op instance (its plan, made once by
# the instantiate stage); XLA needs the state's type registered first.
for _platform, _types in _ext.ffi_types().items():
  for _name, _registration in _types.items():
    jax.ffi.register_ffi_type(_name, _registration, platform=_platform)
# Traits: the CUDA handler is safe to capture into a command buffer (it
# launches the same kernels for the same attributes, allocates nothing and
# never synchronises); said here as well as in its definition, since older
# XLA releases take a staged handler's traits from its registration alone.
_GRAPH_SAFE = {"CUDA": xla_client.CustomCallTargetTraits.COMMAND_BUFFER_COMPATIBLE}
for _platform, _targets in _ext.registrations().items():
  for _name, _handler in _targets.items():
    _traits = _GRAPH_SAFE.get(_platform)
    jax.ffi.register_ffi_target(
        _name, _handler, platform=_platform,
        **({} if _traits is None else {"traits": _traits}))


def _load_cpu_blas() -> None:
  """Hands the CPU handler OpenBLAS from the scipy-openblas32 wheel (a
  dependency: the OpenBLAS numpy and scipy ship), loaded at run time; without
  it the handler multiplies with its own loops (same results, slower)."""
  try:
    import scipy_openblas32  # pylint: disable=g-import-not-at-top
  except ImportError:
    return
  path = os.path.join(scipy_openblas32.get_lib_dir(),
                      scipy_openblas32.get_library(fullname=True))
  why = _ext.use_cpu_blas(path)
  if why:
    warnings.warn(f"jax_dynoff: the CPU handler runs without BLAS ({why})")


_load_cpu_blas()


def cpu_blas() -> str:
  """The BLAS the CPU handler multiplies with ("library:symbol"), or "" for
  its own loops."""
  return str(_ext.cpu_blas())


def cuda_available() -> bool:
  """Whether this build of the extension contains the CUDA handler."""
  return bool(_ext.cuda_built())


def _aliases(spec: GemmSpec):
  if not spec.has_out:
    return None
  return {spec_lib.num_arrays(spec) - 1: 0}  # out: the last array


def _mlir_value(v):
  """A call attribute's Python value as the FFI decodes it: int64 and
  float64 scalars, int64 arrays (dense, as the FFI's array attributes
  are), bools, strs and nested dicts."""
  if isinstance(v, dict):
    return {k: _mlir_value(x) for k, x in v.items()}
  if isinstance(v, tuple):
    return np.asarray(v, np.int64)
  if isinstance(v, bool) or isinstance(v, str):
    return v
  if isinstance(v, int):
    return np.int64(v)
  return np.float64(v)


def _attrs(spec: GemmSpec, plan: plan_lib.Plan, sources):
  return _mlir_value(plan_lib.attrs(spec, plan, sources))


def _operands(ctx, args, spec: GemmSpec):
  """ctx, args and start sources of the custom call: the arrays, the
  start operands, then the graph tokens (graph_pads.py), which the
  handlers ignore."""
  n = spec_lib.num_arrays(spec)
  e = len(args) - spec.graph_tokens
  starts_ctx = ctx.replace(avals_in=ctx.avals_in[:e])
  extra, extra_avals, sources = start_operands(starts_ctx, list(args[n:e]),
                                               spec)
  return (ctx.replace(avals_in=[*ctx.avals_in[:n], *extra_avals,
                                *ctx.avals_in[e:]]),
          [*args[:n], *extra, *args[e:]], sources)


def _lower_cpu(ctx, *operands, spec: GemmSpec, sources):
  rule = jax.ffi.ffi_lowering(TARGET, operand_output_aliases=_aliases(spec))
  return rule(ctx, *operands,
              **_attrs(spec, plan_lib.Plan("generic", 1, 0), sources))


def _lower_cuda(ctx, *operands, spec: GemmSpec, sources):
  plan = plan_lib.plan(spec)
  workspace = jax.core.ShapedArray((plan.workspace_bytes,), np.uint8)
  ctx2 = ctx.replace(avals_out=[*ctx.avals_out, workspace])
  rule = jax.ffi.ffi_lowering(TARGET, operand_output_aliases=_aliases(spec))
  result, _ = rule(ctx2, *operands, **_attrs(spec, plan, sources))
  return [graph_pads.emit(ctx, result, spec.graph_pads)]


def _lower_cpu_args(ctx, *args, spec: GemmSpec):
  ctx, operands, sources = _operands(ctx, args, spec)
  return _lower_cpu(ctx, *operands, spec=spec, sources=sources)


def _lower_cuda_staged(ctx, *args, spec: GemmSpec):
  return mlir.lower_fun(functools.partial(ragged_staging.staged, spec),
                        multiple_results=False)(ctx, *args)


def _without_out(ctx, args, spec: GemmSpec):
  """ctx, args and spec of the call without its `out` operand (the last
  array): D becomes a fresh result, no alias; out_zeros stays set, so the
  planner's answer (and the call's `out_zeros` attribute) is the same."""
  i = spec_lib.num_arrays(spec) - 1
  return (ctx.replace(avals_in=[*ctx.avals_in[:i], *ctx.avals_in[i + 1:]]),
          [*args[:i], *args[i + 1:]],
          dataclasses.replace(spec, has_out=False))


def _lower_cuda_ragged(ctx, *args, spec: GemmSpec):
  """A call with ragged windows on CUDA: one grouped launch where the
  planner chose it (plan.grouped_reasons), else composed from XLA window
  ops around a plain call.  Where the plan gives D as a fresh buffer
  (`plan.fresh_out_reasons`: an out of zeros, as ragged_dot passes), the
  call takes no `out`: XLA then drops the zeros, and the grouped pointer
  kernel writes the zeros the windows do not cover."""
  plan = plan_lib.plan(spec)
  if plan.path != "sm90_grouped":
    return _lower_cuda_staged(ctx, *args, spec=spec)
  if plan.kernel.fresh_out and spec.has_out:
    ctx, args, spec = _without_out(ctx, args, spec)
  ctx, operands, sources = _operands(ctx, args, spec)
  return _lower_cuda(ctx, *operands, spec=spec, sources=sources)


def lower(ctx, *args, spec: GemmSpec):
  """One device's call: the start operands (once, whatever the platforms),
  then the call.  A call with ragged windows: the CPU handler takes them;
  on CUDA the grouped kernel or plain calls in XLA window ops
  (`_lower_cuda_ragged`).  partition.py registers the primitive's lowering,
  which comes here but where XLA splits a call over devices."""
  if spec.ragged:
    return _mlir_impl.lower_per_platform(
        ctx.replace(avals_out=list(ctx.avals_out)), TARGET,
        {"cpu": _lower_cpu_args, "cuda": _lower_cuda_ragged}, None, set(),
        *args, spec=spec)
  ctx, operands, sources = _operands(ctx, args, spec)
  return _mlir_impl.lower_per_platform(
      ctx.replace(avals_out=list(ctx.avals_out)), TARGET,
      {"cpu": _lower_cpu, "cuda": _lower_cuda}, None, set(), *operands,
      spec=spec, sources=sources)

