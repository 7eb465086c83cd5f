"""The FFI binding: registers the handlers and lowers `jax_dynoff_gemm`.

Every call lowers to one custom call of the target "jax_dynoff_gemm"
(typed FFI, API version 4): the arrays, then one offsets operand holding
every dynamic start of the call (never attributes, never read on the host;
`offsets_operand`), `desc` / `alpha` / `beta` as attributes, and `out`
aliased to result 0.  On CUDA the call has a second result, the kernel's
workspace, sized here at trace time so the handler never allocates.
"""

from __future__ import annotations

import os
import warnings

import jax
import jax.ffi
import jax.numpy as jnp
import numpy as np
from jax.interpreters import mlir
from jax._src.interpreters import mlir as _mlir_impl  # lower_per_platform
from jax._src.lib import xla_client
from jax._src.lib.mlir import ir

from jax_dynoff import plan as plan_lib
from jax_dynoff.extension import ext as _ext
from jax_dynoff.primitive import gemm_p
from jax_dynoff.spec import GemmSpec
from jax_dynoff.window import clamp_traced_start

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
  return {2 + (spec.c_mode == "own"): 0}  # out follows a, b and c


def _attrs(spec: GemmSpec, plan: plan_lib.Plan):
  return dict(desc=plan_lib.desc(spec, plan),
              alpha=np.float64(spec.alpha), beta=np.float64(spec.beta))


def _is_plain(value) -> bool:
  """Whether an IR value is an argument of its block (a function parameter,
  a loop carry such as a `fori_loop` counter) rather than computed here."""
  return isinstance(value, ir.BlockArgument)


def _slot_bounds(spec: GemmSpec) -> list[tuple[int, int]]:
  """(dim, window extent) of every dynamic start, in slot order."""
  return [(d, w) for _, ws in spec.operands()
          for d, w, s in zip(ws.dims, ws.win, ws.starts) if s is None]


def _pack_offsets(*starts, bounds, plain, dtype, batch, batched):
  """The offsets vector: slot j at j (or j * batch + t for item t)."""
  cols = []
  for s, (dim, size), p in zip(starts, bounds, plain):
    if not p:  # fuses a `table[i]` look-up into this one kernel
      s = clamp_traced_start(s, dim, size)
    s = s.astype(dtype)
    cols.append(jnp.broadcast_to(s, (batch,)) if batched else s)
  return jnp.stack(cols).reshape(-1)


def offsets_operand(ctx, starts, spec: GemmSpec):
  """The one offsets operand of a call and its aval (None, None when every
  start is static).

  A lone start that is already a plain value (a loop counter, a function
  argument) goes to the handler as it is, with no XLA op at all.  Anything
  else is packed into one integer vector by one XLA fusion, each computed
  start clamped there as `lax.dynamic_slice` would (the handler clamps again
  on the device, which is what keeps every buffer access in bounds): a
  start that is a bare `table[i]` would otherwise become a dynamic-slice
  copy of its own, while inside the fusion the look-up is one more load.
  The vector is int64 when any start is, else int32; one value per batch
  item of every slot when any start is batched.
  """
  if not starts:
    return None, None
  avals = ctx.avals_in[len(ctx.avals_in) - len(starts):]
  plain = [_is_plain(v) for v in starts]
  if len(starts) == 1 and plain[0]:
    return starts[0], avals[0]
  dtype = (np.int64 if any(np.dtype(a.dtype) == np.int64 for a in avals)
           else np.int32)
  batched = any(a.ndim == 1 for a in avals)
  size = len(starts) * (spec.batch if batched else 1)
  aval = jax.core.ShapedArray((size,), dtype)
  sub = ctx.replace(avals_in=avals, avals_out=[aval])
  fn = mlir.lower_fun(
      lambda *s: _pack_offsets(*s, bounds=_slot_bounds(spec), plain=plain,
                               dtype=dtype, batch=spec.batch, batched=batched),
      multiple_results=False)
  out = fn(sub, *starts)[0]
  return (out[0] if isinstance(out, (list, tuple)) else out), aval


def _num_arrays(spec: GemmSpec) -> int:
  return 2 + (spec.c_mode == "own") + spec.has_out


def _operands(ctx, args, spec: GemmSpec):
  """ctx and args of the custom call: the arrays, then the offsets."""
  n = _num_arrays(spec)
  offsets, aval = offsets_operand(ctx, list(args[n:]), spec)
  arrays = list(args[:n])
  avals = list(ctx.avals_in[:n])
  if offsets is not None:
    arrays.append(offsets)
    avals.append(aval)
  return ctx.replace(avals_in=avals), arrays


def _lower_cpu(ctx, *operands, spec: GemmSpec):
  rule = jax.ffi.ffi_lowering(TARGET, operand_output_aliases=_aliases(spec))
  return rule(ctx, *operands, **_attrs(spec, plan_lib.Plan("generic", 1, 0)))


def _lower_cuda(ctx, *operands, spec: GemmSpec):
  plan = plan_lib.plan(spec)
  workspace = jax.core.ShapedArray((plan.workspace_bytes,), np.uint8)
  ctx2 = ctx.replace(avals_out=[*ctx.avals_out, workspace])
  rule = jax.ffi.ffi_lowering(TARGET, operand_output_aliases=_aliases(spec))
  result, _ = rule(ctx2, *operands, **_attrs(spec, plan))
  return [result]


def _lower(ctx, *args, spec: GemmSpec):
  """The offsets operand (once, whatever the platforms), then the call."""
  ctx, operands = _operands(ctx, args, spec)
  return _mlir_impl.lower_per_platform(
      ctx.replace(avals_out=list(ctx.avals_out)), TARGET,
      {"cpu": _lower_cpu, "cuda": _lower_cuda}, None, set(), *operands,
      spec=spec)


# Not cacheable: a cached rule is lowered once as a function of block
# arguments and then inlined, so it could never tell a plain start (a loop
# counter, passed as it is) from a computed one (packed through a clamp).
mlir.register_lowering(gemm_p, _lower, cacheable=False)
