"""The `jax_dynoff_gemm` primitive: its operands, abstract evaluation and
plain implementation, and the bookkeeping its rules share (one batch
item's windows, per-item application through vmap).

Operands, in order: a, b, [c when c_mode == "own"], [out when has_out], then
the dynamic starts of A, B, C, D (dim order), then the graph tokens the
call carries for XLA's graph threshold (graph_pads.py; read by nothing).
The one parameter `spec` (a `GemmSpec`) holds everything static.  The
result is D: the whole `out` array with its window rewritten, or a fresh
(m, n) array.  Calls are built
in call.py, the transformation rules live in rules.py, the lowering in
lowering.py and partition.py.
"""

from __future__ import annotations

import dataclasses
import functools

import jax
import numpy as np
from jax.extend.core import Primitive

from jax_dynoff import graph_pads, sharding
from jax_dynoff.spec import GemmSpec, WinSpec
from jax_dynoff.window import Window

gemm_p = Primitive("jax_dynoff_gemm")


# ---------------------------------------------------------------------------
# Operand bookkeeping


@dataclasses.dataclass
class Operands:
  """The primitive's flat operand list, by role."""

  a: object
  b: object
  c: object = None      # only when c_mode == "own"
  out: object = None    # only when has_out
  starts: dict = dataclasses.field(default_factory=dict)  # name -> list
  # Graph tokens (graph_pads.window_token): kept by a rule that binds the
  # same call again, dropped by one that builds other calls.
  tokens: list = dataclasses.field(default_factory=list)

  @classmethod
  def split(cls, spec: GemmSpec, args) -> "Operands":
    args = list(args)
    ops = cls(args.pop(0), args.pop(0))
    if spec.c_mode == "own":
      ops.c = args.pop(0)
    if spec.has_out:
      ops.out = args.pop(0)
    for name, w in spec.operands():
      ops.starts[name] = [args.pop(0) for _ in range(w.num_dynamic)]
    ops.tokens = [args.pop(0) for _ in range(spec.graph_tokens)]
    assert not args, "operand count does not match spec"
    return ops

  def flat(self, spec: GemmSpec) -> list:
    out = [self.a, self.b]
    if spec.c_mode == "own":
      out.append(self.c)
    if spec.has_out:
      out.append(self.out)
    for name, _ in spec.operands():
      out.extend(self.starts[name])
    return out + list(self.tokens)


def bind(spec: GemmSpec, ops: Operands):
  # A call at a loop body's top level gets the graph pads (graph_pads.py).
  pads = graph_pads.count(spec.opts)
  if (pads, len(ops.tokens)) != (spec.graph_pads, spec.graph_tokens):
    spec = dataclasses.replace(spec, graph_pads=pads,
                               graph_tokens=len(ops.tokens))
  # Inside shard_map, operands that do not vary over a manual axis that
  # another does are marked varying first (as JAX's own ops do), so that the
  # result's type says it varies and transposes sum where they must.  A
  # no-op elsewhere.
  return gemm_p.bind(*sharding.vary_alike(ops.flat(spec)), spec=spec)


def window_of(x, w: WinSpec, dyn) -> Window:
  """A Window over array x whose starts (and valid extents, for a ragged
  one) are w's static ones and `dyn` (starts first)."""
  dyn = iter(dyn)
  start = tuple(s if s is not None else next(dyn) for s in w.starts)
  valid = None if w.valid is None else tuple(
      v if v is not None else next(dyn) for v in w.valid)
  return Window(x, start, (w.rows, w.cols), valid)


# ---------------------------------------------------------------------------
# Abstract evaluation and the plain implementation


def result_batch_shape(spec: GemmSpec) -> tuple[int, ...]:
  """The batch dims of the result: every one, but for a shared out (a
  ragged `out` that does not carry some batch dims: the items without a
  copy of it write their valid parts into one array, in item order; see
  `jax_dynoff.ragged_dot`) only the ones it carries."""
  flags = spec.d.batched or (True,) * len(spec.batch_shape)
  return tuple(s for s, f in zip(spec.batch_shape, flags) if f)


def shared_out(spec: GemmSpec) -> bool:
  return len(result_batch_shape(spec)) != len(spec.batch_shape)


def _abstract_eval(*args, spec: GemmSpec):
  dims = spec.d.dims if spec.has_out else (spec.m, spec.out_cols)
  # Without a mesh a plain ShapedArray; with one, its sharding and manual
  # axes (sharding.result_type).
  return sharding.result_type(spec, args, result_batch_shape(spec) +
                              tuple(dims), spec.out_dtype)


gemm_p.def_abstract_eval(_abstract_eval)


@functools.lru_cache(maxsize=256)
def _jitted(spec: GemmSpec):
  return jax.jit(lambda *args: gemm_p.bind(*args, spec=spec))


# Eager calls run the lowered FFI call through jit (one compile per spec).
gemm_p.def_impl(lambda *args, spec: _jitted(spec)(*args))


# ---------------------------------------------------------------------------
# One batch item at a time (the rules for batched calls)


def unbatched(spec: GemmSpec) -> GemmSpec:
  def strip(w):
    return None if w is None else dataclasses.replace(w, batched=())
  return dataclasses.replace(spec, a=strip(spec.a), b=strip(spec.b),
                             c=strip(spec.c), d=strip(spec.d), batch_shape=())


def per_item(fn, spec: GemmSpec, arrays: dict, starts: dict, shared=()):
  """Runs fn(arrays, starts, *shared) once per batch item, through vmap.

  arrays: name -> (value, WinSpec or None); a value with a WinSpec carries the
  batch dims its spec marks, one without is fully batched (D-shaped values).
  starts: name -> list of start operands (shape () or (batch,)).
  Returns fn's dict of outputs, each with every batch dim leading.
  """
  nb = len(spec.batch_shape)
  if nb == 0:
    return fn(arrays, starts, *shared)
  names = list(arrays)
  vals = [arrays[n][0] for n in names]
  flags = [arrays[n][1].batched if arrays[n][1] is not None else (True,) * nb
           for n in names]
  svals = {n: [s if np.ndim(s) == 0 else s.reshape(spec.batch_shape)
               for s in lst] for n, lst in starts.items()}

  def call(vals, svals, *shared):
    return fn(dict(zip(names, [(v, None) for v in vals])), svals, *shared)

  f = call
  for j in reversed(range(nb)):
    v_axes = [0 if (v is not None and fl[j]) else None
              for v, fl in zip(vals, flags)]
    s_axes = {n: [None if np.ndim(s) == 0 else 0 for s in lst]
              for n, lst in svals.items()}
    f = jax.vmap(f, in_axes=(v_axes, s_axes) + (None,) * len(shared))
  return f(vals, svals, *shared)


def sum_to(x, w: WinSpec):
  """Sums a fully batched cotangent down to the batch dims w carries."""
  axes = tuple(j for j, f in enumerate(w.batched) if not f)
  return x.sum(axes) if axes else x


def lax_precision(spec: GemmSpec):
  return jax.lax.Precision.HIGHEST if spec.precision == "highest" else None
