"""`ragged_dot`: `lax.ragged_dot` as one call over ragged windows.

Group g's rows of `lhs` (`reference.ragged_rows`: consecutive, in group
order) times `rhs[g]` is one item of a batched call whose A and out are
ragged windows of capacity m at the group's first row, valid for its rows;
every item writes its rows of one shared out, zeros elsewhere.  On an H100
/ H200 that is one grouped launch (plan.py, ``sm90_grouped``): tiles past a
group's rows are never scheduled, so the work is that of one dense GEMM of
the same rows; the out of zeros is not passed (GemmSpec.out_zeros,
plan.fresh_out_reasons), so XLA fills nothing, and the launch's pointer
kernel zeroes only the rows no group covers.  The gradient is two more
such calls: d lhs (the groups' rows of the cotangent times rhs[g]^T,
again one shared out of zeros) and d rhs (for each group lhs_g^T times
its rows of the cotangent: a contraction over the group's rows, a ragged
K).

With `activation="swiglu"` the call's epilogue pairs the product's columns
(gate 2j, up 2j + 1) into out's column j, silu(gate) * up in float32 before
the cast: on an H100 / H200 the grouped kernel's epilogue does it
(``sm90_grouped_swiglu``), so the (m, n) product is never written.  Its
gradient recomputes the product in float32 (one more grouped call), forms
d gate and d up, then runs the two gradient calls above.  Where the plan
does not run it fused (`plan.grouped_reasons`: float32, a float32 result,
windows TMA cannot read, another GPU), it is composed: the product in
float32, then XLA's activation.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, Optional

import jax
import jax.numpy as jnp
import numpy as np

from jax_dynoff import plan as plan_lib
from jax_dynoff import reference
from jax_dynoff.call import make_spec
from jax_dynoff.options import KernelOptions
from jax_dynoff.primitive import Operands, bind
from jax_dynoff.sharding import _varying
from jax_dynoff.signature import check_call
from jax_dynoff.window import window


def _batched(spec, flags: dict, groups: int, out_zeros: bool = False):
  """spec (one item's) as a call over `groups` items; flags: operand name
  -> whether its array carries the groups (a leading dim); out_zeros: the
  call's out is the zeros the caller made (spec.GemmSpec.out_zeros: on an
  H100 / H200 the grouped call then gets a fresh D instead, whose rows
  outside the groups' the pointer kernel zeroes, and XLA no fill)."""
  def add(w, f):
    return None if w is None else dataclasses.replace(w, batched=(f,))
  return dataclasses.replace(
      spec, a=add(spec.a, flags["a"]), b=add(spec.b, flags["b"]),
      c=None, d=add(spec.d, flags["d"]), batch_shape=(groups,),
      out_zeros=out_zeros)


def _rows(x, offsets, sizes, i=0):
  """The ragged window of group i's rows of x (the item the spec is made
  from; the call passes every group's starts)."""
  m, w = x.shape
  return window(x, (offsets[i], 0), (m, w), valid=(sizes[i], w))


def _rows_call(x, w, offsets, sizes, out_dtype, transpose_b, precision,
               opts):
  """out[rows_g] = x[rows_g] @ op(w[g]) for every group g, rows past the
  groups zero: one call whose items share the out."""
  groups = w.shape[0]
  m = x.shape[0]
  n = w.shape[1] if transpose_b else w.shape[2]
  out = jnp.zeros((m, n), out_dtype)
  call = check_call(_rows(x, offsets, sizes), w[0],
                    out=_rows(out, offsets, sizes), transpose_b=transpose_b,
                    precision=precision, opts=opts)
  spec = _batched(make_spec(call), {"a": False, "b": True, "d": False},
                  groups, out_zeros=True)
  starts = {"a": [offsets, sizes], "b": [], "c": [], "d": [offsets, sizes]}
  return bind(spec, Operands(x, w, None, out, starts))


def _weight_grad(x, g, offsets, sizes, groups, precision, opts):
  """dW[g] = x[rows_g]^T @ g[rows_g] for every group: one call whose K,
  the group's rows, is ragged; a group without rows gets zeros."""
  call = check_call(_rows(x, offsets, sizes), _rows(g, offsets, sizes),
                    transpose_a=True, precision=precision,
                    preferred_element_type=x.dtype, opts=opts)
  spec = _batched(make_spec(call), {"a": False, "b": False, "d": True},
                  groups)
  starts = {"a": [offsets, sizes], "b": [offsets, sizes], "c": [], "d": []}
  return bind(spec, Operands(x, g, None, None, starts))


def _activation_call(x, w, offsets, sizes, out_dtype, precision, opts,
                     activation):
  """(spec, operands) of out[rows_g] = activation(x[rows_g] @ w[g]) for
  every group g (the product in float32, then cast), rows past the groups
  zero: one call whose items share the (m, n / 2) out."""
  groups, m, n = w.shape[0], x.shape[0], w.shape[2]
  out = jnp.zeros((m, n // 2), out_dtype)
  call = check_call(_rows(x, offsets, sizes), w[0],
                    out=_rows(out, offsets, sizes), precision=precision,
                    opts=opts, epilogue=activation)
  spec = _batched(make_spec(call), {"a": False, "b": True, "d": False},
                  groups, out_zeros=True)
  starts = {"a": [offsets, sizes], "b": [], "c": [], "d": [offsets, sizes]}
  return spec, Operands(x, w, None, out, starts)


@functools.partial(jax.custom_vjp, nondiff_argnums=(4, 5, 6, 7))
def _ragged_dot_act(lhs, rhs, offsets, sizes, precision, out_dtype, opts,
                    activation):
  """activation(lhs_g @ rhs[g]) for every group, one fused call."""
  return bind(*_activation_call(lhs, rhs, offsets, sizes, out_dtype,
                                precision, opts, activation))


def _act_fwd(lhs, rhs, offsets, sizes, precision, out_dtype, opts,
             activation):
  out = _ragged_dot_act(lhs, rhs, offsets, sizes, precision, out_dtype, opts,
                        activation)
  return out, (lhs, rhs, offsets, sizes)


def _act_bwd(precision, out_dtype, opts, activation, res, ct):
  """The product h again (float32, one grouped call: the forward kept
  none of it), the activation's vjp at h (d gate, d up; zeros past the
  groups, where h is), then the plain gradient calls."""
  del out_dtype
  lhs, rhs, offsets, rows = res
  h = _rows_call(lhs, rhs, offsets, rows, jnp.float32, False, precision,
                 opts)
  _, pull = jax.vjp(reference.ACTIVATIONS[activation], h)
  (dh,) = pull(ct.astype(jnp.float32))
  g = dh.astype(lhs.dtype)
  dlhs = _rows_call(g, rhs, offsets, rows, lhs.dtype, True, precision, opts)
  drhs = _weight_grad(lhs, g, offsets, rows, rhs.shape[0], precision, opts)
  return (_summed_like(dlhs, lhs), _summed_like(drhs, rhs),
          np.zeros(offsets.shape, jax.dtypes.float0),
          np.zeros(rows.shape, jax.dtypes.float0))


_ragged_dot_act.defvjp(_act_fwd, _act_bwd)


@functools.partial(jax.custom_vjp, nondiff_argnums=(4, 5, 6))
def _ragged_dot(lhs, rhs, offsets, sizes, precision, out_dtype, opts):
  """The groups of rhs: rows [offsets[g], offsets[g] + sizes[g]) of lhs
  (`reference.expert_rows`) times rhs[g]."""
  return _rows_call(lhs, rhs, offsets, sizes, out_dtype, False, precision,
                    opts)


def _fwd(lhs, rhs, offsets, sizes, precision, out_dtype, opts):
  return (_ragged_dot(lhs, rhs, offsets, sizes, precision, out_dtype, opts),
          (lhs, rhs, offsets, sizes))


def _bwd(precision, out_dtype, opts, res, ct):
  del out_dtype
  lhs, rhs, offsets, rows = res
  g = ct.astype(lhs.dtype)  # a float32 cotangent of 16-bit inputs
  dlhs = _rows_call(g, rhs, offsets, rows, lhs.dtype, True, precision, opts)
  drhs = _weight_grad(lhs, g, offsets, rows, rhs.shape[0], precision, opts)
  return (_summed_like(dlhs, lhs), _summed_like(drhs, rhs),
          np.zeros(offsets.shape, jax.dtypes.float0),
          np.zeros(rows.shape, jax.dtypes.float0))


def _summed_like(ct, primal):
  """Inside shard_map: a cotangent that varies over manual axes its primal
  does not (a replicated rhs, with rows split over devices) is summed over
  them, as JAX's own transposes do; elsewhere it is returned as it is."""
  extra = _varying(jax.typeof(ct)) - _varying(jax.typeof(primal))
  return jax.lax.psum(ct, tuple(sorted(extra))) if extra else ct


_ragged_dot.defvjp(_fwd, _bwd)


def ragged_dot(lhs: Any, rhs: Any, group_sizes: Any, precision: Any = None,
               preferred_element_type: Any = None,
               group_offset: Any = None,
               opts: Optional[KernelOptions] = None,
               activation: Optional[str] = None) -> jax.Array:
  """`jax.lax.ragged_dot`'s signature and result: lhs (m, k) holds the
  groups' rows one group after the other (group g: `group_sizes[g]` rows),
  rhs (groups, k, n); returns (m, n) with rows of group g equal to
  lhs_g @ rhs[g] and rows past the groups zero (sizes summing past m are
  cut there).  Result dtype `preferred_element_type` (default: lhs's).
  One launch on an H100 / H200 for bfloat16 (and float16 forward) inputs;
  `jax.grad` runs two more.  `group_offset` ((1,) integers) makes rhs the
  rhs.shape[0] experts from that group of `group_sizes` on, as
  lax.ragged_dot names it (one expert-parallel shard: inside `shard_map`
  over an expert axis, each shard's offset is its first expert); rows of
  the other groups are zeros, and so is their part of the gradient wrt
  lhs.  `opts` (a `jax_dynoff.KernelOptions`) is
  passed to every call, as `gemm` takes it (tests and tuning).
  `activation="swiglu"`: rhs's n columns hold an up projection's gate and
  up columns interleaved (column 2j gate j, 2j + 1 up j;
  `jax_dynoff.interleave_gate_up` turns [gate | up] into that), and the
  result is (m, n / 2): silu(gate) * up of the float32 product, then
  cast; its gradient goes through the product."""
  lhs, rhs, sizes, group_offset = reference.check_ragged_dot(
      lhs, rhs, group_sizes, group_offset)
  out_dtype = jnp.dtype(preferred_element_type
                        if preferred_element_type is not None else lhs.dtype)
  reference.check_activation(activation, rhs.shape[2])
  cols = rhs.shape[2] if activation is None else rhs.shape[2] // 2
  if lhs.shape[0] == 0 or rhs.shape[0] == 0:
    return jnp.zeros((lhs.shape[0], cols), out_dtype)
  offsets, rows = reference.expert_rows(sizes, lhs.shape[0], rhs.shape[0],
                                        group_offset)
  if activation is None:
    return _ragged_dot(lhs, rhs, offsets, rows, precision, out_dtype, opts)
  spec, _ = _activation_call(lhs, rhs, offsets, rows, out_dtype, precision,
                             opts, activation)
  if not plan_lib.grouped_reasons(spec):  # the planner runs it fused
    return _ragged_dot_act(lhs, rhs, offsets, rows, precision, out_dtype,
                           opts, activation)
  # Composed: the product in float32, the activation by XLA (one fused
  # pass), where no fused kernel serves the call.
  h = _ragged_dot(lhs, rhs, offsets, rows, precision, jnp.float32, opts)
  return reference.ACTIVATIONS[activation](h).astype(out_dtype)
