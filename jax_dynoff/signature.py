"""Checks one `gemm(...)` call and resolves its static facts.

Shared by `jax_dynoff.gemm` and `jax_dynoff.reference.gemm`, so both accept
and reject exactly the same calls with the same messages.
"""

from __future__ import annotations

import dataclasses
import numbers
from typing import Any, Optional

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from jax_dynoff.options import DEFAULT as DEFAULT_OPTS
from jax_dynoff.options import KernelOptions, check_opts
from jax_dynoff.spec import EPILOGUES
from jax_dynoff.window import Window, as_window

INPUT_DTYPES = (jnp.dtype(jnp.bfloat16), jnp.dtype(jnp.float16),
                jnp.dtype(jnp.float32))


@dataclasses.dataclass(frozen=True, eq=False)
class GemmCall:
  a: Window
  b: Window
  c: Optional[Window]
  out: Optional[Window]
  m: int
  n: int
  k: int
  in_dtype: np.dtype
  out_dtype: np.dtype
  trans_a: bool
  trans_b: bool
  alpha: float
  beta: float
  precision: str          # "default" or "highest"
  lax_precision: Any      # what to hand lax.dot_general (the reference)
  c_is_out: bool          # c is a window of the very array passed as out
  opts: KernelOptions = DEFAULT_OPTS
  epilogue: str = "none"  # spec.EPILOGUES: "swiglu" makes out (m, n / 2)

  @property
  def out_cols(self) -> int:
    return self.n // 2 if self.epilogue == "swiglu" else self.n


def _static_float(arg: str, v: Any) -> float:
  if isinstance(v, (bool, np.bool_)) or not isinstance(v, numbers.Real):
    raise TypeError(
        f"{arg} must be a static Python number (it is baked into the "
        f"kernel), got {type(v).__name__}")
  return float(v)


def _static_bool(arg: str, v: Any) -> bool:
  if not isinstance(v, (bool, np.bool_)):
    raise TypeError(f"{arg} must be a Python bool, got {type(v).__name__}")
  return bool(v)


_F32 = jnp.dtype(jnp.float32)

# The dot algorithms the kernels run, by input dtype: an algorithm preset's
# name -> "default" (16-bit inputs, float32 accumulation; float32 inputs on
# TF32 tensor cores) or "highest" (float32: 3xTF32 on the SM90 tiles, the
# exact SIMT kernel elsewhere).  `jnp.dot` takes the same presets; one the
# kernels cannot honour is refused by name, never run at another accuracy.
_PRESETS = {
    jnp.dtype(jnp.bfloat16): {"DEFAULT": "default",
                              "BF16_BF16_F32": "default"},
    jnp.dtype(jnp.float16): {"DEFAULT": "default", "F16_F16_F32": "default"},
    _F32: {"DEFAULT": "default", "TF32_TF32_F32": "default",
           "TF32_TF32_F32_X3": "highest", "F32_F32_F32": "highest"},
}


def _algorithm(v: Any, in_dtype: np.dtype) -> str:
  """A lax.DotAlgorithmPreset or lax.DotAlgorithm as the precision mode it
  asks of `in_dtype` inputs ("default" / "highest"), or a ValueError."""
  runs = _PRESETS.get(jnp.dtype(in_dtype), {})
  if isinstance(v, lax.DotAlgorithmPreset):
    mode = runs.get(v.name)
    what = f"lax.DotAlgorithmPreset.{v.name}"
  else:  # lax.DotAlgorithm: inputs and accumulation as one preset names them
    types = (jnp.dtype(v.lhs_precision_type), jnp.dtype(v.rhs_precision_type),
             jnp.dtype(v.accumulation_type))
    one_pass = (v.lhs_component_count, v.rhs_component_count,
                v.num_primitive_operations) == (1, 1, 1)
    ok = (one_pass and types == (jnp.dtype(in_dtype),) * 2 + (_F32,) and
          not v.allow_imprecise_accumulation)
    mode = ("highest" if in_dtype == _F32 else "default") if ok else None
    what = f"{v!r}"
  if mode is None:
    raise ValueError(
        f"precision {what} cannot be honoured for {jnp.dtype(in_dtype)} "
        f"inputs; the kernels run: "
        + ", ".join(f"lax.DotAlgorithmPreset.{n}" for n in runs)
        + (" or lax.DotAlgorithm with both inputs and float32 accumulation"
           if runs else ""))
  return mode


def _precision(v: Any, in_dtype: np.dtype) -> tuple[str, Any]:
  """('highest' | 'default', the value for lax).  Accepts what jnp.dot does:
  None, a lax.Precision (or its name), a pair of them, a
  lax.DotAlgorithmPreset or a lax.DotAlgorithm (`_algorithm`)."""
  if v is None:
    # As jnp.dot does: honour jax.default_matmul_precision / the config.
    cfg = str(jax.config.jax_default_matmul_precision or "").lower()
    if cfg in ("highest", "float32", "fp32"):
      return "highest", lax.Precision.HIGHEST
    return "default", None
  if isinstance(v, (lax.DotAlgorithmPreset, lax.DotAlgorithm)):
    mode = _algorithm(v, in_dtype)
    return mode, lax.Precision.HIGHEST if mode == "highest" else None
  vals = v if isinstance(v, (tuple, list)) else (v,)
  if len(vals) not in (1, 2):
    raise ValueError(f"precision must be None, a lax.Precision, a pair of "
                     f"them or a lax dot algorithm, got {v!r}")
  parsed = []
  for p in vals:
    try:
      parsed.append(lax.Precision(p) if p is not None else None)
    except (ValueError, KeyError, TypeError):
      raise ValueError(f"precision must be None, a lax.Precision, a pair of "
                       f"them or a lax dot algorithm, got {v!r}") from None
  highest = all(p == lax.Precision.HIGHEST for p in parsed)
  lp = lax.Precision.HIGHEST if highest else None
  return ("highest" if highest else "default"), lp


def _epilogue(v: Any) -> str:
  if v is None:
    return "none"
  if not isinstance(v, str) or v not in EPILOGUES:
    raise ValueError(f"epilogue must be None or one of "
                     f"{', '.join(repr(e) for e in EPILOGUES)}, got {v!r}")
  return v


def check_call(a, b, c=None, *, out=None, alpha=1.0, beta=1.0,
               transpose_a=False, transpose_b=False, precision=None,
               preferred_element_type=None, opts=None,
               epilogue=None) -> GemmCall:
  """`epilogue` (spec.EPILOGUES, None: "none"): "swiglu" pairs the
  product's columns (2j gate, 2j + 1 up) into out's column j, so out's
  window is (m, n / 2); it needs an even n, no c and a ragged out (the
  calls jax_dynoff.ragged_dot makes)."""
  epilogue = _epilogue(epilogue)
  a, b = as_window("a", a), as_window("b", b)
  opts = check_opts(opts)
  c = None if c is None else as_window("c", c)
  out = None if out is None else as_window("out", out)
  ta = _static_bool("transpose_a", transpose_a)
  tb = _static_bool("transpose_b", transpose_b)
  alpha = _static_float("alpha", alpha)
  beta = _static_float("beta", beta)

  in_dtype = jnp.dtype(a.dtype)
  if in_dtype not in INPUT_DTYPES:
    raise TypeError(f"a must be bfloat16, float16 or float32, got {in_dtype}")
  prec, lax_prec = _precision(precision, in_dtype)
  if jnp.dtype(b.dtype) != in_dtype:
    raise TypeError(
        f"b must have a's dtype {in_dtype} (a and b share one dtype), got "
        f"{jnp.dtype(b.dtype)}")

  if preferred_element_type is not None:
    try:
      pref = jnp.dtype(preferred_element_type)
    except TypeError:
      raise TypeError(f"preferred_element_type must be a dtype, got "
                      f"{preferred_element_type!r}") from None
  else:
    pref = None
  if out is not None:
    out_dtype = jnp.dtype(out.dtype)
    if pref is not None and pref != out_dtype:
      raise TypeError(
          f"preferred_element_type {pref} disagrees with out's dtype "
          f"{out_dtype}")
    who = "out"
  else:
    out_dtype = pref if pref is not None else in_dtype
    who = "preferred_element_type"
  if out_dtype not in (in_dtype, jnp.dtype(jnp.float32)):
    raise TypeError(
        f"{who} dtype must be the input dtype {in_dtype} or float32, got "
        f"{out_dtype}")

  am, ak = (a.shape[1], a.shape[0]) if ta else a.shape
  bk, bn = (b.shape[1], b.shape[0]) if tb else b.shape
  if ak != bk:
    raise ValueError(
        f"b: inner dimensions do not match: op(a) is {am}x{ak} but op(b) is "
        f"{bk}x{bn} (a window {a.shape}, transpose_a={ta}; b window "
        f"{b.shape}, transpose_b={tb})")
  m, n, k = am, bn, ak

  if c is not None:
    if jnp.dtype(c.dtype) != out_dtype:
      raise TypeError(
          f"c must have the output dtype {out_dtype}, got {jnp.dtype(c.dtype)}")
    if tuple(c.shape) != (m, n):
      raise ValueError(
          f"c window must be (m, n) = {(m, n)}, got {tuple(c.shape)}")
  if epilogue == "swiglu":
    if n % 2:
      raise ValueError(f"epilogue 'swiglu' needs an even n (gate and up "
                       f"columns interleaved), got n = {n}")
    if c is not None:
      raise ValueError("epilogue 'swiglu' takes no c")
    if out is None or not out.ragged:
      raise ValueError("epilogue 'swiglu' needs a ragged out window "
                       "(window(..., valid=...)), as ragged_dot passes")
    if tuple(out.shape) != (m, n // 2):
      raise ValueError(
          f"out window must be (m, n / 2) = {(m, n // 2)} with epilogue "
          f"'swiglu', got {tuple(out.shape)}")
  elif out is not None and tuple(out.shape) != (m, n):
    raise ValueError(
        f"out window must be (m, n) = {(m, n)}, got {tuple(out.shape)}")
  if beta == 0.0:
    # BLAS convention: beta == 0 means C is not read at all, so NaN or Inf
    # in C does not reach the result (0 * NaN would be NaN).
    c = None
  c_is_out = c is not None and out is not None and c.x is out.x
  return GemmCall(a, b, c, out, m, n, k, in_dtype, out_dtype, ta, tb, alpha,
                  beta, prec, lax_prec, c_is_out, opts, epilogue)
