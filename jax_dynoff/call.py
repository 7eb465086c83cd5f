"""Call building: a checked call's windows -> its static spec -> one bind of
the primitive.  The public `gemm` (exported by ops.py) is this module's,
and so are the GEMMs the rules build again (rules.py: a gradient as GEMMs;
ragged_staging.py: ragged windows staged into dense ones).
"""

from __future__ import annotations

from typing import Any, Optional, Union

import jax

from jax_dynoff import graph_pads
from jax_dynoff.options import KernelOptions
from jax_dynoff.primitive import Operands, bind
from jax_dynoff.signature import GemmCall, check_call
from jax_dynoff.spec import GemmSpec, WinSpec
from jax_dynoff.window import Window

# An operand: a rank-2 array (the whole array) or a Window of any array.
Operand = Union[jax.Array, Window]


def _winspec(w: Window) -> WinSpec:
  return WinSpec(tuple(w.x.shape), w.win, w.static_starts(),
                 valid=w.static_valid() if w.ragged else None)


def _slots(w: Optional[Window]) -> list:
  """The window's dynamic starts, then its dynamic valid extents."""
  return [] if w is None else w.dynamic_starts() + w.dynamic_valid()


def _graph_tokens(windows, opts: KernelOptions) -> list:
  """The graph token the call takes (graph_pads.use_window_pads): its
  first window's that has one, where the call sits below a loop body's
  top level; one is enough to lift the body."""
  for w in windows:
    if w is not None and graph_pads.use_window_pads(w.graph_token, opts):
      return [w.graph_token]
  return []


def make_spec(call: GemmCall) -> GemmSpec:
  """The static problem of a checked call."""
  if call.c is None:
    c_mode = "none"
  else:
    c_mode = "from_d" if call.c_is_out else "own"
  if call.out is not None:
    d = _winspec(call.out)
  else:
    d = WinSpec((call.m, call.n), (call.m, call.n), (0, 0))
  return GemmSpec(
      m=call.m, n=call.n, k=call.k, a=_winspec(call.a), b=_winspec(call.b),
      c=None if call.c is None else _winspec(call.c), d=d,
      in_dtype=call.in_dtype, out_dtype=call.out_dtype,
      trans_a=call.trans_a, trans_b=call.trans_b, c_mode=c_mode,
      has_out=call.out is not None, alpha=call.alpha,
      beta=call.beta if call.c is not None else 0.0,
      precision=call.precision, opts=call.opts, epilogue=call.epilogue)


def gemm(a: Operand, b: Operand, c: Optional[Operand] = None, *,
         out: Optional[Operand] = None, alpha: float = 1.0,
         beta: float = 1.0, transpose_a: bool = False,
         transpose_b: bool = False, precision: Any = None,
         preferred_element_type: Any = None,
         opts: Optional[KernelOptions] = None) -> jax.Array:
  """`alpha * op(a) @ op(b) + beta * c`, at offsets that may live on device.

  a, b, c, out: arrays (rank 2: the whole array) or `jax_dynoff.window`s.
  Returns the (m, n) result of `preferred_element_type` (default: a's dtype);
  or, with `out`, the whole `out` array with its window overwritten (every
  other element bit-for-bit unchanged; in place when `out` is donated or a
  loop carry).  `c` may be a window of the same array as `out`, overlapping
  or not.  Accumulation is float32; float32 inputs use TF32 tensor cores on
  GPU unless `precision=lax.Precision.HIGHEST`.  The exact semantics are
  `jax_dynoff.reference.gemm`.  `opts` (a `jax_dynoff.KernelOptions`)
  overrides how the CUDA kernel is chosen, for tests and tuning; it never
  changes the result beyond the kernels' rounding.
  """
  call = check_call(a, b, c, out=out, alpha=alpha, beta=beta,
                    transpose_a=transpose_a, transpose_b=transpose_b,
                    precision=precision,
                    preferred_element_type=preferred_element_type, opts=opts)
  spec = make_spec(call)
  ops = Operands(
      call.a.x, call.b.x,
      call.c.x if spec.c_mode == "own" else None,
      call.out.x if call.out is not None else None,
      # Clamped where they are lowered (starts.start_operands) and again
      # on the device.
      {"a": _slots(call.a), "b": _slots(call.b), "c": _slots(call.c),
       "d": _slots(call.out)},
      _graph_tokens((call.a, call.b, call.c, call.out), spec.opts))
  return bind(spec, ops)
