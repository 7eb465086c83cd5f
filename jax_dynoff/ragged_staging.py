"""Ragged windows on CUDA where the grouped kernel cannot run them
(`plan.grouped_reasons`: float32, a C read, windows TMA cannot read, a GPU
other than compute capability 9.0): the call is composed from XLA ops
around one plain `gemm`.

Each ragged operand is read with `reference.read_window` (its valid part,
zeros elsewhere: one XLA fusion, which reads only the valid part) into a
dense (rows, cols) array; the plain windows stay windows; `gemm` runs on
them; a ragged `out` then gets the result's valid part through
`reference.write_window`, the rest of `out` untouched (with the swiglu
epilogue: the product in float32, `reference.ACTIVATIONS`' swiglu, the
cast, then the write).  Exact semantics,
one extra pass over each ragged operand, no tile skipped.  Batched calls
run the same per item (`primitive.per_item`, a vmap: one batched gemm);
a call whose items share one out (`primitive.shared_out`) runs its items
in order in a `fori_loop`, each writing its valid part into the out.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
from jax import lax

from jax_dynoff import call, reference
from jax_dynoff.primitive import (Operands, lax_precision, per_item,
                                  shared_out, unbatched, window_of)
from jax_dynoff.spec import GemmSpec


def _item_fn(spec: GemmSpec):
  """fn(arrays, starts) -> {"d": D} for one item: arrays name -> (array,
  unused), starts name -> the item's start operands."""
  gemm = call.gemm
  item = unbatched(spec)

  def dense(w):
    return reference.read_window(w) if w.ragged else w

  def fn(arrays, starts):
    a = dense(window_of(arrays["a"][0], item.a, starts["a"]))
    b = dense(window_of(arrays["b"][0], item.b, starts["b"]))
    out = window_of(arrays["out"][0], item.d, starts["d"]) if spec.has_out \
        else None
    c = None
    if spec.c_mode == "own":
      c = dense(window_of(arrays["c"][0], item.c, starts["c"]))
    elif spec.c_mode == "from_d":  # read from out before out is written
      c = dense(window_of(arrays["out"][0], item.c, starts["c"]))
    kw = dict(alpha=spec.alpha, beta=spec.beta, transpose_a=spec.trans_a,
              transpose_b=spec.trans_b, precision=lax_precision(spec),
              preferred_element_type=spec.out_dtype, opts=spec.opts)
    if spec.epilogue != "none":  # a ragged out, no C (check_call)
      h = gemm(a, b, **dict(kw, preferred_element_type=jnp.float32))
      act = reference.ACTIVATIONS[spec.epilogue](h).astype(spec.out_dtype)
      return {"d": reference.write_window(out, act)}
    if out is None:
      return {"d": gemm(a, b, c, **kw)}
    if not out.ragged:
      return {"d": gemm(a, b, c, out=out, **kw)}
    return {"d": reference.write_window(out, gemm(a, b, c, **kw))}

  return fn


def _arrays(spec: GemmSpec, ops: Operands) -> dict:
  arrays = {"a": (ops.a, spec.a), "b": (ops.b, spec.b)}
  if spec.c_mode == "own":
    arrays["c"] = (ops.c, spec.c)
  if spec.has_out:
    arrays["out"] = (ops.out, spec.d)
  return arrays


def _shared(spec: GemmSpec, ops: Operands):
  """The items in order, each reading its operands (the batch dims each
  carries, indexed) and writing its valid part into the out."""
  fn = _item_fn(spec)
  shape = tuple(spec.batch_shape)
  arrays = _arrays(spec, ops)

  def pick(x, flags, idx):  # x's item: its carried batch dims indexed
    for f, i in zip(flags, idx):
      if f:
        x = lax.dynamic_index_in_dim(x, i, 0, keepdims=False)
    return x

  def body(t, out):
    idx = _unravel(t, shape)
    items = {n: (pick(v, w.batched, idx), None)
             for n, (v, w) in arrays.items() if n != "out"}
    items["out"] = (pick(out, spec.d.batched, idx), None)
    starts = {n: [s if np.ndim(s) == 0 else s[t] for s in lst]
              for n, lst in ops.starts.items()}
    new = fn(items, starts)["d"]
    carried = [i for f, i in zip(spec.d.batched, idx) if f]
    if not carried:
      return new
    zero = [0] * new.ndim
    return lax.dynamic_update_slice(
        out, new.reshape((1,) * len(carried) + new.shape), carried + zero)

  return lax.fori_loop(0, spec.batch, body, ops.out)


def _unravel(t, shape):
  """The multi-index of flat item t (row-major) in `shape`."""
  idx = []
  for s in reversed(shape):
    idx.append(t % s)
    t = t // s
  return list(reversed(idx))


def staged(spec: GemmSpec, *args):
  """The primitive's result for `args` (its flat operands), from plain
  gemm calls and XLA window ops."""
  ops = Operands.split(spec, args)
  if shared_out(spec):
    return _shared(spec, ops)
  return per_item(lambda arrays, starts: _item_fn(spec)(arrays, starts),
                   spec, _arrays(spec, ops), ops.starts)["d"]

