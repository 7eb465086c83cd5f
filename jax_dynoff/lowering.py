"""The FFI binding: registers the handlers and lowers `jax_dynoff_gemm`.

Every call lowers to one custom call of the target "jax_dynoff_gemm"
(typed FFI, API version 4): the arrays and the dynamic starts as operands
(0-d integer buffers, or one value per batch item: never attributes, never
read on the host), `desc` / `alpha` / `beta` as attributes, and `out`
aliased to result 0.  On CUDA the call has a second result, the kernel's
workspace, sized here at trace time so the handler never allocates.
"""

from __future__ import annotations

import jax
import jax.ffi
import numpy as np
from jax.interpreters import mlir

from jax_dynoff import plan as plan_lib
from jax_dynoff.primitive import gemm_p
from jax_dynoff.spec import GemmSpec, encode_desc

TARGET = "jax_dynoff_gemm"

try:
  from jax_dynoff import _jax_dynoff as _ext
except ImportError as e:  # pragma: no cover - a broken install
  raise ImportError(
      "jax_dynoff's compiled extension (_jax_dynoff) is missing; reinstall "
      "the package with `pip install .` so that it is built") from e

for _platform, _targets in _ext.registrations().items():
  for _name, _capsule in _targets.items():
    jax.ffi.register_ffi_target(_name, _capsule, platform=_platform)


def cuda_available() -> bool:
  """Whether this build of the extension contains the CUDA handler."""
  return bool(_ext.cuda_built())


def _aliases(spec: GemmSpec):
  if not spec.has_out:
    return None
  return {2 + (spec.c_mode == "own"): 0}  # out follows a, b and c


def _attrs(spec: GemmSpec, plan: plan_lib.Plan):
  return dict(desc=encode_desc(spec, plan_lib.PATHS[plan.path], plan.split_k),
              alpha=np.float64(spec.alpha), beta=np.float64(spec.beta))


def _lower_cpu(ctx, *args, spec: GemmSpec):
  rule = jax.ffi.ffi_lowering(TARGET, operand_output_aliases=_aliases(spec))
  return rule(ctx, *args, **_attrs(spec, plan_lib.Plan("generic", 1, 0)))


def _lower_cuda(ctx, *args, spec: GemmSpec):
  plan = plan_lib.plan(spec)
  workspace = jax.core.ShapedArray((plan.workspace_bytes,), np.uint8)
  ctx2 = ctx.replace(avals_out=[*ctx.avals_out, workspace])
  rule = jax.ffi.ffi_lowering(TARGET, operand_output_aliases=_aliases(spec))
  result, _ = rule(ctx2, *args, **_attrs(spec, plan))
  return [result]


mlir.register_lowering(gemm_p, _lower_cpu, platform="cpu")
mlir.register_lowering(gemm_p, _lower_cuda, platform="cuda")
