"""Evaluates a function of scalar integer StableHLO ops on Python ints, so
that `starts.py` can tell what a private function the program calls
computes (jnp's `//` and `%` lower to such calls, with bodies that differ
between jax releases) by running it on sample values rather than by
matching one release's ops.  Only rank-0 integer and boolean values and
the elementwise ops below are understood; anything else is "unknown"
(None), and the start then goes through the offsets vector.
"""

from __future__ import annotations

from typing import Optional

from jax._src.lib.mlir import ir

_MAX_DEPTH = 4  # nested calls (jnp's remainder calls _where)


def _width(value) -> Optional[int]:
  """Bits of a rank-0 integer value (1 for a boolean); None otherwise."""
  t = ir.RankedTensorType(value.type)
  if t.rank != 0:
    return None
  try:
    return ir.IntegerType(t.element_type).width
  except ValueError:
    return None


def _wrap(v: int, bits: int) -> int:
  """v as a `bits`-bit two's complement integer (0 / 1 for a boolean)."""
  if bits == 1:
    return v & 1
  v &= (1 << bits) - 1
  return v - (1 << bits) if v >> (bits - 1) else v


def _compare(op, a: int, b: int, bits: int) -> Optional[int]:
  direction = str(op.attributes["comparison_direction"])
  if "compare_type" in op.attributes and "UNSIGNED" in str(
      op.attributes["compare_type"]) and bits > 1:
    a, b = a % (1 << bits), b % (1 << bits)
  for name, fn in (("EQ", a == b), ("NE", a != b), ("LT", a < b),
                   ("LE", a <= b), ("GT", a > b), ("GE", a >= b)):
    if f" {name}" in direction or direction.endswith(name + ">"):
      return int(fn)
  return None


def _trunc_div(a: int, b: int) -> int:
  q = abs(a) // abs(b)
  return q if (a < 0) == (b < 0) else -q


def splat_int(op) -> Optional[int]:
  """The value of a `stablehlo.constant` of one integer repeated; None for
  any other constant."""
  attr = ir.DenseIntElementsAttr(op.attributes["value"])
  if not attr.is_splat:
    return None
  return int(ir.IntegerAttr(attr.get_splat_value()).value)


def find_func(module, name: str):
  """The `func.func` of `module` named `name`, or None."""
  for op in module.body.operations:
    if (op.operation.name == "func.func"
        and ir.StringAttr(op.attributes["sym_name"]).value == name):
      return op
  return None


def call_function(func, args: list[int], module,
                  depth: int = 0) -> Optional[int]:
  """The one result of `func` (a `func.func` of `module`) on `args`, or
  None where it holds an op, a type or a value this does not evaluate
  (a division by zero included)."""
  if depth > _MAX_DEPTH:
    return None
  block = func.regions[0].blocks[0]
  env = {}
  for arg, v in zip(block.arguments, args):
    bits = _width(arg)
    if bits is None:
      return None
    env[arg] = _wrap(v, bits)
  for op in block.operations:
    name = op.operation.name
    if name == "func.return":
      if len(op.operands) != 1 or op.operands[0] not in env:
        return None
      return env[op.operands[0]]
    if len(op.results) != 1:
      return None
    bits = _width(op.results[0])
    if bits is None or any(v not in env for v in op.operands):
      return None
    x = [env[v] for v in op.operands]
    if name == "func.call":
      inner = find_func(
          module, ir.FlatSymbolRefAttr(op.attributes["callee"]).value)
      r = None if inner is None else call_function(inner, x, module,
                                                   depth + 1)
    elif name == "stablehlo.constant":
      r = splat_int(op)
    elif name in ("stablehlo.convert", "stablehlo.broadcast_in_dim",
                  "stablehlo.reshape"):
      r = x[0]  # rank 0 to rank 0: the value, wrapped to the new width
    elif name == "stablehlo.compare":
      r = _compare(op, x[0], x[1], _width(op.operands[0]))
    elif name == "stablehlo.select":
      r = x[1] if x[0] else x[2]
    elif name in ("stablehlo.divide", "stablehlo.remainder"):
      if x[1] == 0:
        return None
      q = _trunc_div(x[0], x[1])
      r = q if name == "stablehlo.divide" else x[0] - q * x[1]
    elif name == "stablehlo.sign":
      r = (x[0] > 0) - (x[0] < 0)
    elif name == "stablehlo.add":
      r = x[0] + x[1]
    elif name == "stablehlo.subtract":
      r = x[0] - x[1]
    elif name == "stablehlo.multiply":
      r = x[0] * x[1]
    elif name == "stablehlo.negate":
      r = -x[0]
    elif name == "stablehlo.and":
      r = x[0] & x[1]
    elif name == "stablehlo.or":
      r = x[0] | x[1]
    elif name == "stablehlo.xor":
      r = x[0] ^ x[1]
    elif name == "stablehlo.not":
      r = 1 - x[0] if bits == 1 else ~x[0]
    else:
      return None
    if r is None:
      return None
    env[op.results[0]] = _wrap(r, bits)
  return None
