"""Where each dynamic start of a call comes from, decided in the IR at
lowering time: a plain value (a loop counter, a function argument) or a
`table[i]` look-up at a plain index, the value or the index possibly
divided by a constant (`i % L`, `table[i // L]`), the result possibly
through an affine map with constant coefficients (`table[i] * m`, `i * m +
c`), reaches the handler as it is (the kernels read, divide, look up, map
and clamp it on the device); any other start goes through one offsets
vector, written here as StableHLO ops.  The handler's side is SlotSource /
SlotRef in ffi/gemm_problem.h.
"""

from __future__ import annotations

import re
from typing import Optional

import jax
import numpy as np
from jax.interpreters import mlir
from jax._src.lib.mlir import ir
from jax._src.lib.mlir.dialects import hlo

from jax_dynoff import scalar_eval
from jax_dynoff import spec as spec_lib
from jax_dynoff.spec import GemmSpec


def _is_plain(value) -> bool:
  """Whether an IR value is an argument of its block (a function parameter,
  a loop carry such as a `fori_loop` counter) rather than computed here."""
  return isinstance(value, ir.BlockArgument)


def _producer(value):
  """The op computing `value`, or None for a block argument."""
  return None if _is_plain(value) else value.owner


def _is_ready(value) -> bool:
  """A value no XLA op has to compute: plain, or a constant."""
  op = _producer(value)
  return op is None or op.name == "stablehlo.constant"


def _int_constant(value) -> Optional[int]:
  """The value of an integer splat constant, also through integer
  conversions that keep it; else None."""
  op = _producer(value)
  if op is not None and op.name == "stablehlo.convert":
    inner = _int_constant(op.operands[0])
    width = _int_width(value)
    if inner is None or width == 0 or not (
        -(2 ** (width - 1)) <= inner < 2 ** (width - 1)):
      return None
    return inner
  if op is None or op.name != "stablehlo.constant":
    return None
  return scalar_eval.splat_int(op)


def _int_width(value) -> int:
  """Bits of an integer tensor value's elements (0: not an integer)."""
  try:
    return ir.IntegerType(ir.RankedTensorType(value.type).element_type).width
  except ValueError:  # not an integer element type
    return 0


def _through_converts(value):
  """`value` with the integer conversions that keep every value (to the
  same or a wider integer type) in front of it peeled off."""
  op = _producer(value)
  while (op is not None and op.name == "stablehlo.convert"
         and 0 < _int_width(op.operands[0]) <= _int_width(value)):
    value = op.operands[0]
    op = _producer(value)
  return value


# The private functions jnp's integer `x // c` and `x % c` lower to, by
# name (jax numbers repeated names), with what they compute for c >= 1.
# Their bodies differ between jax releases, so a call of one is taken for
# the operator where its body, run on host ints (scalar_eval), gives
# exactly this at every value `_division_samples` gives.
_JNP_DIVISION_NAME = re.compile(r"^(floor_divide|remainder)(_\d+)?$")
_JNP_DIVISIONS = {"floor_divide": lambda x, c: x // c,
                  "remainder": lambda x, c: x % c}


def _division_samples(c: int, bits: int) -> list[int]:
  """Dividends around every sign change and multiple of `c` that matters,
  and the ends of the `bits`-bit range."""
  lo, hi = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1
  near = [0, 1, -1, c, -c, 2 * c, -2 * c, 3 * c + 1, -3 * c - 1]
  xs = [v + d for v in near for d in (-1, 0, 1)] + [lo, lo + 1, hi, hi - 1]
  return sorted({x for x in xs if lo <= x <= hi})


def _division(value, module):
  """(x, (div_op, divisor)) where `value` is x divided by a constant
  divisor in [1, 2^31): jnp's `x // c` or `x % c` (a call of its private
  function), or lax.div / lax.rem (one StableHLO divide or remainder),
  div_op its SLOT_DIV_OPS value; else None."""
  op = _producer(value)
  if op is None:
    return None
  if op.name == "func.call":
    name = ir.FlatSymbolRefAttr(op.attributes["callee"]).value
    match = _JNP_DIVISION_NAME.match(name)
    func = scalar_eval.find_func(module, name) if match else None
    if func is None or len(op.operands) != 2:
      return None
    kind = match.group(1)
  elif op.name in ("stablehlo.divide", "stablehlo.remainder"):
    kind = "div" if op.name == "stablehlo.divide" else "rem"
  else:
    return None
  x, c = op.operands
  d = _int_constant(c)
  bits = _int_width(value)
  if (d is None or not 1 <= d < 2 ** 31 or _int_width(x) != bits
      or not _is_signed_int(value)):
    return None
  if op.name == "func.call":
    want = _JNP_DIVISIONS[kind]
    if any(scalar_eval.call_function(func, [v, d], module) != want(v, d)
           for v in _division_samples(d, bits)):
      return None
  return _through_converts(x), (spec_lib.SLOT_DIV_OPS[kind], d)


def _index(value, module):
  """(x, (div_op, divisor)) when `value` is a plain signed integer x (a
  loop counter, a function argument), possibly divided by a constant
  (`_division`), through conversions that keep every value; else None."""
  value = _through_converts(value)
  if _is_plain(value):
    return (value, spec_lib.NO_DIVISION) if _is_signed_int(value) else None
  found = _division(value, module)
  if found is None or not _is_plain(found[0]) or not _is_signed_int(found[0]):
    return None
  return found


def _wrapped(index, length: int, module):
  """`_index(x)`, (plain x, division), when `index` is jnp's `x < 0 ? x +
  length : x` (what `table[x]` and `lax.dynamic_index_in_dim` lower to),
  possibly clamped into [0, length - 1] after it, x a plain value or one
  divided by a constant; else None.  dynamic_slice then clamps the index into the
  table, so the look-up is lax.dynamic_slice's rule for x, which is what
  the handler applies (SlotRef).  A bare index (no wrap) is not:
  dynamic_slice clamps -1 to 0 where the rule wraps it to length - 1.
  """
  index = _through_converts(index)
  op = _producer(index)
  if op is None:
    return None
  if (op.name == "stablehlo.clamp"
      and _int_constant(op.operands[0]) == 0
      and _int_constant(op.operands[2]) == length - 1):
    index = _through_converts(op.operands[1])
    op = _producer(index)
    if op is None:
      return None
  if op.name != "stablehlo.select":
    return None
  pred, wrapped, x = op.operands
  x = _through_converts(x)
  cmp, add = _producer(pred), _producer(wrapped)
  if (cmp is None or add is None
      or cmp.name != "stablehlo.compare" or add.name != "stablehlo.add"
      or "LT" not in str(cmp.attributes["comparison_direction"])):
    return None
  if not (_through_converts(cmp.operands[0]) == x
          and _int_constant(cmp.operands[1]) == 0
          and _through_converts(add.operands[0]) == x
          and _int_constant(add.operands[1]) == length):
    return None
  return _index(x, module)


def _callee_result(call, module):
  """The value the function a `func.call` calls returns (its one result),
  or None where it is not found or returns several."""
  func = scalar_eval.find_func(
      module, ir.FlatSymbolRefAttr(call.attributes["callee"]).value)
  if func is None:
    return None
  ret = func.regions[0].blocks[0].operations[-1]
  return ret.operands[0] if len(ret.operands) == 1 else None


def _lookup(start, module):
  """(table, (x, division)) when `start` is `table[index]` of a rank-1
  integer table at a plain index x, or x divided by a constant (`_index`:
  what `rows[i]`, `rows[i // c]` and `lax.dynamic_index_in_dim` lower to,
  also inside a function the caller calls, as newer jax writes
  `dynamic_index_in_dim`), and neither needs an XLA op; else None."""
  op = _producer(start)
  if op is not None and op.name == "func.call":
    # Match the callee's body, then map its arguments to the call's.
    inner = _callee_result(op, module)
    found = None if inner is None else _lookup(inner, module)
    if found is None or found[1][1] != spec_lib.NO_DIVISION:
      return None  # a division inside the callee: not mapped here
    mapped = []
    for v in (found[0], found[1][0]):
      if (not _is_plain(v)
          or v.owner.owner.operation.name != "func.func"):
        return None  # not an argument of the callee itself
      mapped.append(op.operands[ir.BlockArgument(v).arg_number])
    table, index = mapped
    index = _index(index, module)
    return (table, index) if _is_ready(table) and index is not None else None
  if op is None or op.name != "stablehlo.reshape":
    return None
  ds = _producer(op.operands[0])
  if ds is None or ds.name != "stablehlo.dynamic_slice" or len(ds.operands) != 2:
    return None
  table = ds.operands[0]
  ttype = ir.RankedTensorType(table.type)
  if ttype.rank != 1 or list(ir.DenseI64ArrayAttr(
      ds.attributes["slice_sizes"])) != [1] or not _is_ready(table):
    return None
  index = _wrapped(ds.operands[1], ttype.shape[0], module)
  return None if index is None else (table, index)


def _np_int(value):
  """The numpy dtype of an int32 / int64 tensor value."""
  return np.int64 if _int_width(value) == 64 else np.int32


def _int_aval(value) -> jax.core.ShapedArray:
  return jax.core.ShapedArray(tuple(ir.RankedTensorType(value.type).shape),
                              _np_int(value))


def _slot_bounds(spec: GemmSpec) -> list[tuple[int, int, bool]]:
  """(bound, extent, wrap) of every slot, in slot order, for `_clamped`: a
  start (dim, window extent, True), clamped as lax.dynamic_slice would; a
  ragged window's trailing start (dim, 0, True), brought into [0, dim] only
  (the handler clamps it with its valid extent); a valid extent (window
  extent, 0, False), clamped to [0, extent]."""
  out = []
  for _, ws in spec.operands():
    r = len(ws.dims)
    for i, (d, w, s) in enumerate(zip(ws.dims, ws.win, ws.starts)):
      if s is None:
        out.append((d, 0 if ws.ragged and i >= r - 2 else w, True))
    for v, w in zip(ws.valid or (), ws.win[-2:]):
      if v is None:
        out.append((w, 0, False))
  return out


def _splat(value: int, like) -> ir.Value:
  """A constant of `like`'s integer type and shape, every element `value`."""
  shape = tuple(ir.RankedTensorType(like.type).shape)
  return mlir.ir_constant(np.full(shape, value, _np_int(like)))


def _clamped(start, dim: int, size: int, wrap: bool = True):
  """`window.clamp_start` on a start in the IR: a start s < 0 becomes s +
  dim (where `wrap`; a valid extent does not wrap), then s is clamped to
  [0, dim - size], in the start's own integer type (where dim does not fit
  it, the start is passed on: the handler clamps on the device in any
  case)."""
  width = _int_width(start)
  if dim > 2 ** (width - 1) - 1:
    return start
  zero = _splat(0, start)
  if wrap:
    negative = hlo.compare(
        start, zero,
        comparison_direction=hlo.ComparisonDirectionAttr.get("LT"),
        compare_type=hlo.ComparisonTypeAttr.get("SIGNED"))
    start = hlo.select(negative, hlo.add(start, _splat(dim, start)), start)
  return hlo.clamp(zero, start, _splat(dim - size, start))


def _pack_offsets(starts, bounds, plain, dtype, batch: int, batched: bool):
  """The offsets vector, slot j at j (or j * batch + t for item t), in
  StableHLO ops written here rather than traced (no JAX transformation or
  sharding context of the caller's reaches them)."""
  elt = ir.IntegerType.get_signless(64 if dtype == np.int64 else 32)
  cols = []
  for s, (dim, size, wrap), p in zip(starts, bounds, plain):
    if not p:  # fuses a `table[i]` look-up into this one kernel
      s = _clamped(s, dim, size, wrap)
    shape = tuple(ir.RankedTensorType(s.type).shape)
    if _int_width(s) != elt.width:
      s = hlo.convert(ir.RankedTensorType.get(shape, elt), s)
    want = (batch,) if batched else (1,)
    if shape != want:  # a scalar: one value, or the same for every item
      s = hlo.broadcast_in_dim(ir.RankedTensorType.get(want, elt), s,
                               mlir.dense_int_array([]))
    cols.append(s)
  return hlo.concatenate(cols, 0)


def _is_signed_int(value) -> bool:
  """Whether an IR value has a signed (signless, in StableHLO) integer
  element type: the handler reads S32 / S64 buffers only, and sign-extends
  them, which is what a widening convert of such a value does."""
  try:
    t = ir.IntegerType(ir.RankedTensorType(value.type).element_type)
  except ValueError:
    return False
  return t.is_signless and t.width in (32, 64)


def _affine(start):
  """(base, (mul, add, bits)) with start == wrap_bits(base * mul + add),
  `base` what is left after peeling integer ops with one constant operand
  (add, subtract, multiply, negate), all computed in one `bits`-bit width,
  and the widening conversions around them; IDENTITY_MAP where there are
  none.  Integer ops wrap, so the map composes exactly modulo 2^bits."""
  value = _through_converts(start)
  mul, add, bits = 1, 0, 0

  def wrap(x: int) -> int:
    x &= (1 << bits) - 1
    return x - (1 << bits) if x >> (bits - 1) else x

  while True:
    op = _producer(value)
    if op is None or op.name not in ("stablehlo.add", "stablehlo.subtract",
                                     "stablehlo.multiply",
                                     "stablehlo.negate"):
      break
    width = _int_width(value)
    if not _is_signed_int(value) or (bits and width != bits):
      break
    if op.name == "stablehlo.negate":
      x, c, const_first = op.operands[0], 0, False
    else:
      lhs, rhs = op.operands
      cl, cr = _int_constant(lhs), _int_constant(rhs)
      if (cl is None) == (cr is None):
        break  # no constant operand, or both constant
      const_first = cl is not None
      x, c = (rhs, cl) if const_first else (lhs, cr)
    bits = width
    # start == map(value), value == op(x): fold op into the map.
    if op.name == "stablehlo.multiply":
      mul = wrap(mul * c)
    elif op.name == "stablehlo.add":
      add = wrap(add + mul * c)
    elif op.name == "stablehlo.negate":
      mul = wrap(-mul)
    elif const_first:          # c - x
      add, mul = wrap(add + mul * c), wrap(-mul)
    else:                      # x - c
      add = wrap(add - mul * c)
    value = x
  if not bits:
    return value, spec_lib.IDENTITY_MAP
  if not (-2 ** 31 <= mul < 2 ** 31 and -2 ** 31 <= add < 2 ** 31):
    return start, spec_lib.IDENTITY_MAP  # the handler holds int32 maps
  return _through_converts(value), (mul, add, bits)


def _direct_sources(starts, first_arg: int, module):
  """Operands and sources when every start is plain or a look-up that
  needs no XLA op (`_lookup`), the plain value or the look-up's index
  possibly divided by a constant (`_index`), the result possibly through
  an affine map (`_affine`): the handler reads, divides, looks up, maps and
  clamps them all on the device, so the call needs no XLA op for its
  starts at all.  None otherwise."""
  operands: list = []

  def arg(value) -> int:
    for j, v in enumerate(operands):
      if v == value:
        return first_arg + j
    operands.append(value)
    return first_arg + len(operands) - 1

  slots = []
  for s in starts:
    base, amap = _affine(s)
    scalar = _index(base, module)
    if scalar is not None:
      x, division = scalar
      slots.append((spec_lib.SLOT_SCALAR, arg(x), -1) + amap + division)
      continue
    found = _lookup(base, module)
    if found is None or not _is_signed_int(found[0]):
      return None
    table, (x, division) = found
    slots.append((spec_lib.SLOT_LOOKUP, arg(x), arg(table)) + amap + division)
  return operands, spec_lib.StartSources(-1, tuple(slots))


def start_operands(ctx, starts, spec: GemmSpec):
  """The operands a call's dynamic starts come from, their avals and the
  StartSources saying which start is where.

  Unbatched calls whose starts are all plain values (a loop counter, a
  function argument) or `table[i]` look-ups at a plain index, or an
  affine map of one with constant coefficients (`table[i] * m + c`), pass
  those values and tables to the handler as they are, with no XLA op at
  all: the kernels read them, look the tables up, map and clamp on the
  device.  A loop
  body of `gemm(..., window(w, (i, 0, 0), ...), out=window(buf, (rows[i],
  0), ...))` is then the custom call and the counter, nothing else.
  Anything else is packed into one integer vector by one XLA fusion, each
  computed start clamped there as `lax.dynamic_slice` would (the handler
  clamps again on the device, which is what keeps every buffer access in
  bounds); a bare `table[i]` inside that fusion is one more load, where on
  its own it would be a dynamic-slice copy.  The vector is int64 when any
  start is, else int32; one value per batch item of every slot when any
  start is batched.
  """
  first = spec_lib.num_arrays(spec)
  if not starts:
    return [], [], spec_lib.vector_sources(spec)
  avals = ctx.avals_in[len(ctx.avals_in) - len(starts):]
  batched = any(a.ndim == 1 for a in avals)
  direct = (None if batched else
            _direct_sources(starts, first, ctx.module_context.module))
  if direct is not None:
    operands, sources = direct
    return operands, [_int_aval(v) for v in operands], sources
  plain = [_is_plain(v) for v in starts]
  dtype = (np.int64 if any(np.dtype(a.dtype) == np.int64 for a in avals)
           else np.int32)
  size = len(starts) * (spec.batch if batched else 1)
  aval = jax.core.ShapedArray((size,), dtype)
  out = _pack_offsets(starts, _slot_bounds(spec), plain, dtype, spec.batch,
                      batched)
  return [out], [aval], spec_lib.vector_sources(spec)
