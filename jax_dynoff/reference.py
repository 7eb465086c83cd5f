"""The semantic oracle: `gemm` written with plain `jax.lax`.

`jax_dynoff.gemm(...)` must equal `reference.gemm(...)` to the tolerance of
its dtype for every input.  Read this file for the exact meaning of a call:

  acc = alpha * op(A) @ op(B) (+ beta * C when c is given and beta != 0:
        beta == 0 means C is not read, as in BLAS), in float32,
  op(X) = X.T when the transpose flag is set;
  without `out`: acc cast to preferred_element_type (default: a's dtype);
  with `out`:    out with its window replaced by acc cast to out.dtype.

Windows are read and written with lax.dynamic_slice / dynamic_update_slice,
so their starts are clamped exactly as those clamp them.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from jax import lax

from jax_dynoff.signature import check_call
from jax_dynoff.window import Window

__all__ = ["gemm", "read_window", "write_window"]


def _starts(w: Window) -> list:
  """Starts for lax: Python ints pre-clamped (exactly lax's rule, and it keeps
  out-of-int32-range ints legal), traced ones in one common integer dtype."""
  static = w.static_starts()
  dyn = [s for s in w.start if not isinstance(s, int)]
  dtype = jnp.int64 if any(s.dtype == jnp.int64 for s in dyn) else jnp.int32
  return [jnp.asarray(st, dtype) if st is not None else s.astype(dtype)
          for s, st in zip(w.start, static)]


def read_window(w: Window) -> jax.Array:
  """The (rows, cols) block the window stands for."""
  return lax.dynamic_slice(w.x, _starts(w), w.win).reshape(w.shape)


def write_window(w: Window, value: jax.Array) -> jax.Array:
  """`w.x` with the window replaced by `value` (cast to w.x's dtype)."""
  return lax.dynamic_update_slice(
      w.x, value.astype(w.x.dtype).reshape(w.win), _starts(w))


def gemm(a: Any, b: Any, c: Any = None, *, out: Any = None,
         alpha: float = 1.0, beta: float = 1.0, transpose_a: bool = False,
         transpose_b: bool = False, precision: Any = None,
         preferred_element_type: Any = None, opts: Any = None) -> jax.Array:
  """Same signature and meaning as `jax_dynoff.gemm`, in pure jax.lax
  (`opts`, which only picks kernels, is checked and changes nothing)."""
  call = check_call(a, b, c, out=out, alpha=alpha, beta=beta,
                    transpose_a=transpose_a, transpose_b=transpose_b,
                    precision=precision,
                    preferred_element_type=preferred_element_type, opts=opts)
  av, bv = read_window(call.a), read_window(call.b)
  if call.trans_a:
    av = av.T
  if call.trans_b:
    bv = bv.T
  if call.in_dtype != jnp.float32:
    # 16-bit inputs are exact in float32 (and in TF32); the dot then runs
    # on every backend (XLA:CPU lacks some batched 16-bit dots).
    av, bv = av.astype(jnp.float32), bv.astype(jnp.float32)
  acc = lax.dot_general(av, bv, (((1,), (0,)), ((), ())),
                        precision=call.lax_precision,
                        preferred_element_type=jnp.float32)
  acc = jnp.float32(call.alpha) * acc
  if call.c is not None:
    acc = acc + jnp.float32(call.beta) * read_window(call.c).astype(jnp.float32)
  if call.out is None:
    return acc.astype(call.out_dtype)
  return write_window(call.out, acc)
