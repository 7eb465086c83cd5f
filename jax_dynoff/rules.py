"""The `jax_dynoff_gemm` primitive's transformation rules, registered once.

- vmap: one call with a batch dim (batched arrays carry it as a leading dim,
  batched starts hold one value per item); never a Python loop.
- jvp / transpose: expressed again with dynamic-offset GEMMs (built as any
  call is, call.py), but for the gradient products that read no window
  larger than their result: those are XLA's dots (_xla_cotangent says
  why).  The gradient of a windowed operand is its product written into a
  window of zeros with a dynamic_update_slice: XLA folds that into the
  cotangent's accumulation (a loop's `acc + dus(0, g)` becomes an update of
  acc's window in place), where a GEMM writing into a zeroed array would
  cost a fill and an add of the whole array every iteration.  The rules
  are written for one batch item and vmapped for batched calls.
"""

from __future__ import annotations

import dataclasses
from typing import Optional

import jax
import jax.numpy as jnp
import numpy as np
from jax.interpreters import ad, batching

from jax_dynoff import call, graph_pads, reference, sharding
from jax_dynoff.primitive import (Operands, bind, gemm_p, lax_precision,
                                  per_item, shared_out, sum_to, unbatched,
                                  window_of)
from jax_dynoff.spec import MAX_BATCH_RANK, GemmSpec, WinSpec
from jax_dynoff.window import Window

# ---------------------------------------------------------------------------
# vmap


def _batch_rule(args, dims, *, spec: GemmSpec):
  size = next(np.shape(x)[d] for x, d in zip(args, dims)
              if d is not None)
  ops = Operands.split(spec, args)
  odims = Operands.split(spec, dims)
  old_total = spec.batch

  def lead(x, d):  # array operand: the new batch dim first, if it has one
    return (x, False) if d is None else (
        jnp.moveaxis(x, d, 0), True)

  def start(s, d):  # start operand: () or one value per (new x old) item
    if d is None:
      return s if np.ndim(s) == 0 else jnp.tile(s, size)
    s = jnp.moveaxis(s, d, 0)
    if np.ndim(s) == 1 and spec.batch_shape:
      return jnp.repeat(s, old_total)
    return s.reshape(-1)

  a, a_b = lead(ops.a, odims.a)
  b, b_b = lead(ops.b, odims.b)
  c, c_b = (None, False) if ops.c is None else lead(ops.c, odims.c)
  new = Operands(a, b, c)
  d_batched = True
  if spec.has_out:
    out, out_b = lead(ops.out, odims.out)
    if not out_b:  # every item gets its own copy of out
      out = jnp.broadcast_to(out, (size,) + out.shape)
    new.out = out
  new.starts = {n: [start(s, d) for s, d in zip(ops.starts[n], odims.starts[n])]
                for n in ops.starts}

  def add(w: Optional[WinSpec], flag: bool):
    return None if w is None else dataclasses.replace(
        w, batched=(flag,) + tuple(w.batched))

  c_flag = c_b if spec.c_mode == "own" else d_batched
  new_spec = dataclasses.replace(
      spec, a=add(spec.a, a_b), b=add(spec.b, b_b), c=add(spec.c, c_flag),
      d=add(spec.d, d_batched), batch_shape=(size,) + tuple(spec.batch_shape))
  if len(new_spec.batch_shape) > MAX_BATCH_RANK:
    merged_spec, merged = _merge_outer_batch_dims(new_spec, new)
    out = bind(merged_spec, merged)
    return out.reshape(new_spec.batch_shape[:2] + out.shape[1:]), 0
  return bind(new_spec, new), 0


def _merge_outer_batch_dims(spec: GemmSpec, ops: Operands):
  """Folds batch dims 0 and 1 into one, for vmaps nested deeper than the
  FFI's MAX_BATCH_RANK.  Batch items keep their row-major order, so the
  flattened starts stay as they are; an array that carries only one of the
  two dims is broadcast over the other (a copy, only at that depth)."""
  b0, b1 = spec.batch_shape[:2]

  def merge(x, w: Optional[WinSpec]):
    if w is None:
      return x, w
    f0, f1 = w.batched[0], w.batched[1]
    if x is not None and (f0 or f1):
      if not f1:
        x = jnp.broadcast_to(x[:, None], (b0, b1) + x.shape[1:])
      elif not f0:
        x = jnp.broadcast_to(x[None], (b0,) + x.shape)
      x = x.reshape((b0 * b1,) + x.shape[2:])
    return x, dataclasses.replace(w, batched=(f0 or f1,) + w.batched[2:])

  a, wa = merge(ops.a, spec.a)
  b, wb = merge(ops.b, spec.b)
  c, wc = merge(ops.c, spec.c)
  out, wd = merge(ops.out, spec.d)
  new_spec = dataclasses.replace(
      spec, a=wa, b=wb, c=wc, d=wd,
      batch_shape=(b0 * b1,) + tuple(spec.batch_shape[2:]))
  return new_spec, Operands(a, b, c, out, ops.starts)


batching.primitive_batchers[gemm_p] = _batch_rule


# ---------------------------------------------------------------------------
# jvp


def _accumulate_spec(spec: GemmSpec) -> GemmSpec:
  """spec, but C is D's own window (beta 1): D_w = alpha op(A) op(B) + D_w
  (its out another call's result: not known to be zeros)."""
  if not spec.has_out:
    return dataclasses.replace(spec, c=None, c_mode="none", beta=0.0,
                               out_zeros=False)
  return dataclasses.replace(spec, c=spec.d, c_mode="from_d", beta=1.0,
                             out_zeros=False)


def _no_shared_out_ad(spec: GemmSpec):
  if spec.epilogue != "none":
    raise NotImplementedError(
        f"jax_dynoff_gemm: a call with epilogue {spec.epilogue!r} has no "
        "automatic derivative; differentiate jax_dynoff.ragged_dot, which "
        "defines its own")
  if shared_out(spec):
    raise NotImplementedError(
        "jax_dynoff_gemm: a call whose items share one out (as "
        "jax_dynoff.ragged_dot makes) has no automatic derivative; "
        "differentiate jax_dynoff.ragged_dot, which defines its own")


def _anchor_pads(spec: GemmSpec, p: Operands) -> Operands:
  """p, the call's graph pads anchored to its first dynamic start: under a
  gradient the starts may be all of the call a forward loop keeps
  (graph_pads.py says why that loop needs them)."""
  for name, _ in spec.operands():
    if p.starts[name]:
      p.starts[name][0] = graph_pads.anchor(p.starts[name][0],
                                            spec.graph_pads)
      break
  return p


def _jvp_rule(primals, tangents, *, spec: GemmSpec):
  _no_shared_out_ad(spec)
  p = _anchor_pads(spec, Operands.split(spec, primals))
  y = gemm_p.bind(*p.flat(spec), spec=spec)
  t = Operands.split(spec, tangents)
  nz = lambda v: v is not None and type(v) is not ad.Zero
  da = t.a if nz(t.a) else None
  db = t.b if nz(t.b) else None
  item = unbatched(spec)

  def zeros_like(x):
    return jnp.zeros(np.shape(x), x.dtype)

  # Tangents of the linear operands, materialised (cheap next to the GEMM).
  dc = None
  if spec.c_mode == "own":
    dc = t.c if nz(t.c) else zeros_like(p.c)
  dout = None
  if spec.has_out:
    dout = t.out if nz(t.out) else zeros_like(p.out)

  if da is None and db is None:
    # Only C and out move: D_w' = beta * C_w', the rest of out passes through.
    return y, _linear_only(spec, item, p, dc, dout)

  first = Operands(da if da is not None else p.a,
                   p.b if da is not None else db, dc, dout, p.starts)
  # Its out is out's tangent, not out: not known to be zeros.
  ty = bind(dataclasses.replace(spec, out_zeros=False), first)
  if da is not None and db is not None:
    acc = _accumulate_spec(spec)
    starts = dict(p.starts)
    if spec.has_out:
      starts["c"] = p.starts["d"]
      ty = bind(acc, Operands(p.a, db, None, ty, starts))
    else:
      starts.pop("c", None)
      ty = ty + bind(acc, Operands(p.a, db, None, None, starts))
  return y, ty


def _linear_only(spec, item, p: Operands, dc, dout):
  """The tangent when only c and out have tangents (lax window ops)."""

  def fn(arrays, starts):
    dcv = arrays.get("c", (None,))[0]
    doutv = arrays.get("out", (None,))[0]
    if spec.c_mode == "own":
      cval = reference.read_window(window_of(dcv, item.c, starts["c"]))
    elif spec.c_mode == "from_d":
      cval = reference.read_window(window_of(doutv, item.c, starts["c"]))
    else:
      cval = jnp.zeros((spec.m, spec.n), spec.out_dtype)
    cval = (spec.beta * cval.astype(jnp.float32)).astype(spec.out_dtype)
    if not spec.has_out:
      return cval
    return reference.write_window(window_of(doutv, item.d, starts["d"]), cval)

  arrays = {}
  if dc is not None:
    arrays["c"] = (dc, spec.c)
  if dout is not None:
    arrays["out"] = (dout, None)  # out is fully batched
  return per_item(fn, spec, arrays, p.starts)


ad.primitive_jvps[gemm_p] = _jvp_rule


# ---------------------------------------------------------------------------
# transpose


def _transpose_rule(ct, *args, spec: GemmSpec):
  _no_shared_out_ad(spec)
  ops = Operands.split(spec, args)
  undef = lambda v: ad.is_undefined_primal(v)
  if undef(ops.a) and undef(ops.b):
    raise NotImplementedError("jax_dynoff_gemm is bilinear in (a, b); it "
                              "cannot be transposed in both at once")
  if type(ct) is ad.Zero:
    return [None] * len(args)
  item = unbatched(spec)
  want = {n for n in ("a", "b", "c", "out") if undef(getattr(ops, n))}

  def aval(v):
    return v.aval if undef(v) else None

  # Over explicit mesh axes the GEMM chooses its result's sharding, where
  # XLA's dot would need it spelt out.
  dots_ok = spec.opts.xla_cotangent_dot and not sharding.any_explicit(
      [jax.typeof(v) for v in (ct, ops.a, ops.b) if not undef(v)])

  shapes = {n: aval(getattr(ops, n)) for n in want}
  # Item shapes: strip the batch dims each undefined operand carries.
  item_shape = {}
  for n in want:
    w = {"a": spec.a, "b": spec.b, "c": spec.c, "out": spec.d}[n]
    item_shape[n] = (tuple(w.dims), shapes[n].dtype)

  def fn(arrays, starts, *_):
    g = arrays["ct"][0]
    res = {}
    gw = window_of(g, item.d, starts["d"]) if spec.has_out else Window(
        g, (0, 0), (spec.m, spec.n))
    if spec.out_dtype != spec.in_dtype and ({"a", "b"} & want):
      gin = reference.read_window(gw).astype(spec.in_dtype)
      gin = Window(gin, (0, 0), (spec.m, spec.n))
    else:
      gin = gw
    gemm = call.gemm  # as the public op builds it: same rules, same paths

    def zeros_window(n, w, st):
      shape, dtype = item_shape[n]
      return window_of(jnp.zeros(shape, dtype), w, st)

    def into_zeros(n, w, st, value):
      """The cotangent of operand n: `value` in its window, zeros elsewhere
      (just `value` where the window is the whole array)."""
      if _whole(w):
        return value
      return reference.write_window(zeros_window(n, w, st), value)

    kw = dict(alpha=spec.alpha, precision=lax_precision(spec),
              opts=spec.opts)

    def product(n, x, y, tx, ty):
      """alpha op(x) @ op(y), the cotangent of operand n: XLA's dot where
      its copies would be small (_xla_cotangent), else the GEMM."""
      if not (dots_ok and _xla_cotangent(item, n)):
        return gemm(x, y, transpose_a=tx, transpose_b=ty, **kw)
      xv, yv = reference.read_window(x), reference.read_window(y)
      dims = (((0,) if tx else (1,), (1,) if ty else (0,)), ((), ()))
      dtype = item_shape[n][1]
      if spec.alpha == 1.0:  # the dot XLA's own gradients emit
        return jax.lax.dot_general(xv, yv, dims, precision=kw["precision"],
                                   preferred_element_type=dtype)
      acc = jax.lax.dot_general(xv, yv, dims, precision=kw["precision"],
                                preferred_element_type=jnp.float32)
      return (jnp.float32(spec.alpha) * acc).astype(dtype)

    if "a" in want:
      bw = window_of(arrays["b"][0], item.b, starts["b"])
      if not spec.trans_a:   # dA = alpha G op(B)^T
        da = product("a", gin, bw, False, not spec.trans_b)
      else:                  # dA = alpha op(B) G^T
        da = product("a", bw, gin, spec.trans_b, True)
      res["a"] = into_zeros("a", item.a, starts["a"], da)
    if "b" in want:
      aw = window_of(arrays["a"][0], item.a, starts["a"])
      if not spec.trans_b:   # dB = alpha op(A)^T G
        db = product("b", aw, gin, not spec.trans_a, False)
      else:                  # dB = alpha G^T op(A)
        db = product("b", gin, aw, True, spec.trans_a)
      res["b"] = into_zeros("b", item.b, starts["b"], db)
    if "c" in want or "out" in want:
      bg = spec.beta * reference.read_window(gw).astype(jnp.float32)
    if "c" in want:
      res["c"] = reference.write_window(zeros_window("c", item.c, starts["c"]),
                                        bg)
    if "out" in want:
      zero = jnp.zeros((spec.m, spec.n), spec.out_dtype)
      o = reference.write_window(gw, zero)
      if spec.c_mode == "from_d":
        cw = window_of(o, item.c, starts["c"])
        o = reference.write_window(
            cw, reference.read_window(cw).astype(jnp.float32) + bg)
      res["out"] = o
    return res

  arrays = {"ct": (ct, None)}
  if "a" in want:
    arrays["b"] = (ops.b, spec.b)
  if "b" in want:
    arrays["a"] = (ops.a, spec.a)
  res = per_item(fn, spec, arrays, ops.starts)
  if spec.batch_shape:
    for n, w in (("a", spec.a), ("b", spec.b), ("c", spec.c)):
      if n in res:
        res[n] = sum_to(res[n], w)
  out = Operands(res.get("a"), res.get("b"), res.get("c"), res.get("out"),
                 {n: [None] * len(v) for n, v in ops.starts.items()},
                 [None] * len(ops.tokens))
  return out.flat(spec)


def _whole(w: WinSpec) -> bool:
  """Whether the window is its whole (2-D, plain) array."""
  return (len(w.dims) == 2 and tuple(w.win) == tuple(w.dims)
          and w.valid is None and all(x == 0 for x in w.starts))


def _xla_cotangent(item: GemmSpec, n: str) -> bool:
  """Whether operand n's cotangent product (dA = G op(B)^T or dB =
  op(A)^T G) can be XLA's dot (KernelOptions.xla_cotangent_dot): where the
  windows it reads hold no more elements than the product does.  For XLA's
  dot a window of a larger array is a copy (dynamic_slice); this library's
  GEMM reads it in place, which is worth it when the copy would be the
  larger stream (dX = G W[i]^T of stacked weights reads a whole layer to
  write m rows).  Elsewhere XLA's dot is the better citizen: XLA fuses its
  operand casts into it, and in a loop the add of the result into the
  cotangent's accumulator (dW += X_i^T G_i), which no custom call can take
  (an add apart streams the whole array three times)."""
  this, other = (item.a, item.b) if n == "a" else (item.b, item.a)
  if other.valid is not None or (item.has_out and item.d.valid is not None):
    return False
  copies = 0 if _whole(other) else other.rows * other.cols
  if item.has_out and not _whole(item.d):
    copies += item.m * item.n  # G, the cotangent's window of out
  return copies <= this.rows * this.cols


ad.primitive_transposes[gemm_p] = _transpose_rule
