"""Ragged windows on CUDA, until the CUDA handler takes valid extents: the
call is lowered as XLA ops around one plain `gemm`.

Each ragged operand is read with `reference.read_window` (its valid part,
zeros elsewhere: one XLA fusion, which reads only the valid part) into a
dense (rows, cols) array; the plain windows stay windows; `gemm` runs on
them; a ragged `out` then gets the result's valid part through
`reference.write_window`, the rest of `out` untouched.  Exact semantics,
one extra pass over each ragged operand, no tile skipped.  Batched calls
run the same per item (`primitive._per_item`, a vmap: one batched gemm).
"""

from __future__ import annotations

from jax_dynoff import reference
from jax_dynoff.primitive import (Operands, _lax_precision, _per_item,
                                  _unbatched, _window)
from jax_dynoff.spec import GemmSpec


def is_ragged(spec: GemmSpec) -> bool:
  return any(w.ragged for _, w in spec.operands())


def staged(spec: GemmSpec, *args):
  """The primitive's result for `args` (its flat operands), from plain
  gemm calls and XLA window ops."""
  from jax_dynoff.ops import gemm  # pylint: disable=g-import-not-at-top
  ops = Operands.split(spec, args)
  item = _unbatched(spec)

  def dense(w):
    return reference.read_window(w) if w.ragged else w

  def fn(arrays, starts):
    a = dense(_window(arrays["a"][0], item.a, starts["a"]))
    b = dense(_window(arrays["b"][0], item.b, starts["b"]))
    out = _window(arrays["out"][0], item.d, starts["d"]) if spec.has_out \
        else None
    c = None
    if spec.c_mode == "own":
      c = dense(_window(arrays["c"][0], item.c, starts["c"]))
    elif spec.c_mode == "from_d":  # read from out before out is written
      c = dense(_window(arrays["out"][0], item.c, starts["c"]))
    kw = dict(alpha=spec.alpha, beta=spec.beta, transpose_a=spec.trans_a,
              transpose_b=spec.trans_b, precision=_lax_precision(spec),
              preferred_element_type=spec.out_dtype, opts=spec.opts)
    if out is None:
      return {"d": gemm(a, b, c, **kw)}
    if not out.ragged:
      return {"d": gemm(a, b, c, out=out, **kw)}
    return {"d": reference.write_window(out, gemm(a, b, c, **kw))}

  arrays = {"a": (ops.a, spec.a), "b": (ops.b, spec.b)}
  if spec.c_mode == "own":
    arrays["c"] = (ops.c, spec.c)
  if spec.has_out:
    arrays["out"] = (ops.out, spec.d)
  return _per_item(fn, spec, arrays, ops.starts)["d"]
