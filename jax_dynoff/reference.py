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

A ragged window (`window(..., valid=(vr, vc))`) has a static capacity and a
valid part [0:vr, 0:vc] (vr, vc clamped to the capacity):
  - its two trailing starts are clamped with vr and vc in place of the
    capacity: s < 0 becomes s + dim, then it is clamped to [0, dim - v], so
    the valid part lies inside the array while the capacity may cross its
    end (leading starts keep lax's rule);
  - read (A, B, C), its elements outside the valid part count as zeros;
  - as `out`, only its valid part is written; every other element of `out`
    is unchanged.
Without `out`, the (m, n) result is alpha * A^ @ B^ + beta * C^, the hatted
operands being the zero-masked windows.  `ragged_dot` is `lax.ragged_dot`
written with ragged windows.
"""

from __future__ import annotations

from typing import Any, Optional

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from jax_dynoff.signature import check_call
from jax_dynoff.window import Window, window

__all__ = ["gemm", "ragged_dot", "read_window", "write_window",
           "check_ragged_dot", "ragged_rows", "expert_rows"]


def _index_dtype(w: Window):
  dyn = w.dynamic_starts() + w.dynamic_valid()
  return jnp.int64 if any(s.dtype == jnp.int64 for s in dyn) else jnp.int32


def _starts(w: Window, dims: Optional[int] = None) -> list:
  """Starts for lax (the first `dims` of them; all by default): Python ints
  pre-clamped (exactly lax's rule, and it keeps out-of-int32-range ints
  legal), traced ones in one common integer dtype."""
  static = w.static_starts()[:dims]
  dtype = _index_dtype(w)
  return [jnp.asarray(st, dtype) if st is not None else s.astype(dtype)
          for s, st in zip(w.start, static)]


def _ragged(w: Window):
  """A ragged window's (starts, mask): leading starts for lax (which clamps
  them), the trailing ones clamped here with the valid extents, and the
  (rows, cols) mask of its valid part."""
  dtype = _index_dtype(w)
  rows, cols = w.shape
  dims = w.x.shape[-2:]
  vr, vc = (jnp.clip(jnp.asarray(min(max(v, 0), cap) if isinstance(v, int)
                                 else v, dtype), 0, cap)
            for v, cap in zip(w.valid, (rows, cols)))
  starts = _starts(w, w.x.ndim - 2)  # leading: lax's rule
  for s, d, v in zip(w.start[-2:], dims, (vr, vc)):
    if isinstance(s, int):  # into [0, d] first: any Python int is legal
      s = jnp.asarray(min(max(s + d if s < 0 else s, 0), d), dtype)
    else:
      s = s.astype(dtype)
      s = jnp.where(s < 0, s + d, s)
    starts.append(jnp.clip(s, 0, d - v))
  mask = ((lax.iota(dtype, rows) < vr)[:, None] &
          (lax.iota(dtype, cols) < vc)[None, :])
  return starts, mask


def _padded(x: jax.Array, rows: int, cols: int) -> jax.Array:
  """x with `rows` / `cols` zeros past the end of its trailing dims, so that
  a ragged window's capacity, which may cross the array's end, can be
  sliced without lax moving its start."""
  return jnp.pad(x, [(0, 0)] * (x.ndim - 2) + [(0, rows), (0, cols)])


def read_window(w: Window) -> jax.Array:
  """The (rows, cols) block the window stands for (a ragged window's zeros
  outside its valid part)."""
  if not w.ragged:
    return lax.dynamic_slice(w.x, _starts(w), w.win).reshape(w.shape)
  starts, mask = _ragged(w)
  block = lax.dynamic_slice(_padded(w.x, *w.shape), starts, w.win)
  return jnp.where(mask, block.reshape(w.shape), jnp.zeros((), w.x.dtype))


def write_window(w: Window, value: jax.Array) -> jax.Array:
  """`w.x` with the window replaced by `value` (cast to w.x's dtype); a
  ragged window replaces only its valid part."""
  value = value.astype(w.x.dtype)
  if not w.ragged:
    return lax.dynamic_update_slice(w.x, value.reshape(w.win), _starts(w))
  starts, mask = _ragged(w)
  xp = _padded(w.x, *w.shape)
  old = lax.dynamic_slice(xp, starts, w.win).reshape(w.shape)
  new = jnp.where(mask, value.reshape(w.shape), old)
  xp = lax.dynamic_update_slice(xp, new.reshape(w.win), starts)
  return xp[(Ellipsis, slice(0, w.x.shape[-2]), slice(0, w.x.shape[-1]))]


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


def check_ragged_dot(lhs: Any, rhs: Any, group_sizes: Any,
                     group_offset: Any = None):
  """(lhs, rhs, group_sizes, group_offset) as arrays, checked as
  `ragged_dot` takes them: lhs (m, k), rhs (experts, k, n) of one dtype,
  group_sizes (groups,) of any integer dtype, as lax.ragged_dot takes them
  (returned as int32 or int64, with the same meaning: an unsigned size past
  int32's range is cut at m first, as the rows cut every size), and
  group_offset None (then groups == experts) or a (1,) integer array (then
  rhs holds experts groups of the groups, from that one on).  Every
  mistake is named."""
  lhs, rhs, sizes = (jnp.asarray(v) for v in (lhs, rhs, group_sizes))
  if lhs.ndim != 2:
    raise ValueError(f"ragged_dot: lhs must be (m, k), got shape {lhs.shape}")
  if rhs.ndim != 3:
    raise ValueError(
        f"ragged_dot: rhs must be (groups, k, n), got shape {rhs.shape}")
  if rhs.shape[1] != lhs.shape[1]:
    raise ValueError(
        f"ragged_dot: rhs's k = {rhs.shape[1]} does not match lhs's k = "
        f"{lhs.shape[1]}")
  if lhs.dtype != rhs.dtype:
    raise TypeError(f"ragged_dot: lhs ({lhs.dtype}) and rhs ({rhs.dtype}) "
                    "must have one dtype")
  if group_offset is None:
    if sizes.shape != (rhs.shape[0],):
      raise ValueError(
          f"ragged_dot: group_sizes must be ({rhs.shape[0]},) (one size per "
          f"group of rhs), got shape {sizes.shape}")
  else:
    group_offset = jnp.asarray(group_offset)
    if group_offset.shape != (1,) or not jnp.issubdtype(group_offset.dtype,
                                                        jnp.integer):
      raise ValueError(
          "ragged_dot: group_offset must be a (1,) integer array, got "
          f"{group_offset.dtype}{list(group_offset.shape)}")
    if sizes.ndim != 1 or sizes.shape[0] < rhs.shape[0]:
      raise ValueError(
          f"ragged_dot: group_sizes must be (groups,) with groups >= rhs's "
          f"{rhs.shape[0]} experts (group_offset picks theirs), got shape "
          f"{sizes.shape}")
    group_offset = group_offset.astype(jnp.int32)
  if not jnp.issubdtype(sizes.dtype, jnp.integer):
    raise TypeError(
        f"ragged_dot: group_sizes must be integers, got {sizes.dtype}")
  if sizes.dtype not in (jnp.int32, jnp.int64):
    if jnp.issubdtype(sizes.dtype, jnp.unsignedinteger):
      cut = min(lhs.shape[0], int(jnp.iinfo(sizes.dtype).max))
      sizes = jnp.minimum(sizes, np.asarray(cut, sizes.dtype))
    sizes = sizes.astype(jnp.int32)
  return lhs, rhs, sizes, group_offset


def expert_rows(group_sizes: Any, m: int, experts: int,
                group_offset: Any = None):
  """(offsets, sizes) of the rows of rhs's `experts` groups among m:
  `ragged_rows` of every group, then, with a group_offset, the `experts`
  groups from that one on (the offset clamped as lax.dynamic_slice clamps
  a start); rows of the other groups belong to no expert here."""
  offsets, sizes = ragged_rows(group_sizes, m)
  if group_offset is None:
    return offsets, sizes
  o = (group_offset[0],)
  return (lax.dynamic_slice(offsets, o, (experts,)),
          lax.dynamic_slice(sizes, o, (experts,)))


def ragged_rows(group_sizes: Any, m: int):
  """(offsets, sizes) of the groups' rows among m: group g holds rows
  [offsets[g], offsets[g] + sizes[g]), in order, each size cut where the
  rows end (sizes that sum past m lose their tail, as lax.ragged_dot's
  rows do) and never negative."""
  s = jnp.maximum(group_sizes, 0)
  ends = jnp.minimum(jnp.cumsum(s), m)
  offsets = jnp.minimum(jnp.cumsum(s) - s, m)
  return offsets, ends - offsets


# Activations `ragged_dot` applies to its product (h, float32) before the
# cast: name -> function of h's last dim.
def _swiglu(h: jax.Array) -> jax.Array:
  """silu(gate) * up, gate and up interleaved along the last dim (column
  2j: gate j, 2j + 1: up j; `interleave_gate_up` makes that layout)."""
  gate, up = h[..., 0::2], h[..., 1::2]
  return gate * jax.nn.sigmoid(gate) * up


ACTIVATIONS = {"swiglu": _swiglu}


def check_activation(activation: Any, n: int) -> None:
  """A ValueError naming `activation` unless it is None or one of
  ACTIVATIONS over an even n (the gate and up columns)."""
  if activation is None:
    return
  if activation not in ACTIVATIONS:
    raise ValueError(
        f"ragged_dot: activation must be None or one of "
        f"{', '.join(repr(a) for a in ACTIVATIONS)}, got {activation!r}")
  if n % 2:
    raise ValueError(
        f"ragged_dot: activation={activation!r} needs rhs's n (gate and up "
        f"columns interleaved) to be even, got n = {n}")


def interleave_gate_up(w: Any) -> jax.Array:
  """Gate and up projections stored side by side along the last dim
  ([gate | up], n = 2i) as `activation="swiglu"` takes them: interleaved,
  column 2j gate j and 2j + 1 up j.  A weight layout, made once (at load
  time), not per call."""
  w = jnp.asarray(w)
  if w.ndim < 1 or w.shape[-1] % 2:
    raise ValueError(
        f"interleave_gate_up: the last dim must be even ([gate | up]), got "
        f"shape {w.shape}")
  i = w.shape[-1] // 2
  return jnp.stack([w[..., :i], w[..., i:]], axis=-1).reshape(w.shape)


def ragged_dot(lhs: Any, rhs: Any, group_sizes: Any, precision: Any = None,
               preferred_element_type: Any = None,
               group_offset: Any = None,
               activation: Any = None) -> jax.Array:
  """`lax.ragged_dot` written with ragged windows: rows
  [offset_g, offset_g + size_g) of `lhs` (`ragged_rows`: the groups' rows
  in order) times `rhs[g]`, each group one `gemm` whose A and out are
  ragged windows of capacity m at offset_g; rows past the groups are zeros.
  Group sizes are expected to sum to at most m, as for lax.ragged_dot;
  past m the rows are cut.  With `group_offset` ((1,) integers) rhs holds
  the rhs.shape[0] experts from that group of group_sizes on (one
  expert-parallel shard): rows of other groups are zeros
  (`expert_rows`).  With an `activation` (ACTIVATIONS), the result is
  that activation of the float32 product, then cast: (m, n / 2) for
  "swiglu"."""
  lhs, rhs, sizes, group_offset = check_ragged_dot(lhs, rhs, group_sizes,
                                                   group_offset)
  (m, k), (g, _, n) = lhs.shape, rhs.shape
  out_dtype = (jnp.dtype(preferred_element_type)
               if preferred_element_type is not None else lhs.dtype)
  check_activation(activation, n)
  if activation is not None:
    h = ragged_dot(lhs, rhs, sizes, precision, jnp.float32, group_offset)
    return ACTIVATIONS[activation](h).astype(out_dtype)
  offsets, sizes = expert_rows(sizes, m, g, group_offset)
  out = jnp.zeros((m, n), out_dtype)
  for i in range(g):
    out = gemm(window(lhs, (offsets[i], 0), (m, k), valid=(sizes[i], k)),
               window(rhs, (i, 0, 0), (k, n)),
               out=window(out, (offsets[i], 0), (m, n), valid=(sizes[i], n)),
               precision=precision)
  return out
