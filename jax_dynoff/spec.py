"""The static description of one GEMM call, and its FFI attributes.

Everything here is known at trace time.  `GemmSpec` is the primitive's
parameter; `call_attrs` turns it into the call's named attributes, which
ffi/call_attrs.h decodes (the contract: ffi/gemm_problem.h's header).
Enumerations travel as names; the contract's limits and its one integer
code (a slot's kind) are the extension's (`call_codes`).
"""

from __future__ import annotations

import dataclasses
from typing import Optional

import numpy as np

from jax_dynoff.extension import ext as _ext
from jax_dynoff.options import DEFAULT as DEFAULT_OPTS
from jax_dynoff.options import KernelOptions

_CODES = _ext.call_codes()
MAX_RANK = _CODES["max_rank"]
MAX_BATCH_RANK = _CODES["max_batch_rank"]
MAX_SLOTS = _CODES["max_slots"]   # every start and valid extent dynamic
# numpy's names of the dtypes a call takes, as the extension spells them.
DTYPES = tuple(_CODES["dtypes"])
# What the epilogue does with the float32 product before D's cast
# (gemm_problem.h Epilogue): "none", or "swiglu" (D's column j is
# silu(h[:, 2j]) * h[:, 2j + 1]: n / 2 columns; calls with a ragged out
# only, no C).
EPILOGUES = tuple(_CODES["epilogues"])

# Where a dynamic start comes from (SlotKind).
SLOT_VECTOR, SLOT_SCALAR, SLOT_LOOKUP = (
    _CODES["slot_kinds"][k] for k in ("vector", "scalar", "lookup"))
# The division of a slot's value, or of its look-up index, by a constant
# (SlotDivOp), by the name of the op the program wrote: jnp's `//` and `%`
# ("floor_divide", "remainder"), lax.div and lax.rem ("div", "rem").
SLOT_DIV_OPS = dict(_CODES["slot_div_ops"])


def options_attrs(o: KernelOptions) -> dict:
  """The call's `options` attribute: every KernelOptions field the planner
  or the handler reads (xla_cotangent_dot acts in Python only); "" and 0
  for a tile or a slice count not forced."""
  return dict(sm90=bool(o.sm90), tf32=bool(o.tf32), direct=bool(o.direct),
              skinny=bool(o.skinny), deterministic=bool(o.deterministic),
              split_k=bool(o.split_k),
              split_k_slices=int(o.split_k_slices or 0),
              tile=o.tile or "", grouped_tile=o.grouped_tile or "",
              skinny_tile=o.skinny_tile or "",
              direct_tile=o.direct_tile or "")


@dataclasses.dataclass(frozen=True)
class WinSpec:
  """One operand: a window of an array, as the kernel sees it.

  dims:    the array's shape without batch dims.
  win:     the window's extent per dim (1 in the leading dims).
  starts:  per dim, the start already clamped (a Python int) or None when it
           is dynamic (then it comes as a scalar operand of the call).
  batched: per batch dim of the call, whether this array carries it (as a
           leading dim, in batch-dim order).
  valid:   None for a plain window; for a ragged one, per trailing dim the
           valid extent already clamped to the window's (a Python int) or
           None when it is dynamic (then it comes as a scalar operand of the
           call, after the operand's dynamic starts).  A trailing start is
           static only where its dim's valid extent is, or where it is 0.
  """

  dims: tuple[int, ...]
  win: tuple[int, ...]
  starts: tuple[Optional[int], ...]
  batched: tuple[bool, ...] = ()
  valid: Optional[tuple[Optional[int], Optional[int]]] = None

  @property
  def rows(self) -> int:
    return self.win[-2]

  @property
  def cols(self) -> int:
    return self.win[-1]

  @property
  def ld(self) -> int:
    return self.dims[-1]

  @property
  def strides(self) -> tuple[int, ...]:
    s, out = 1, []
    for d in reversed(self.dims):
      out.append(s)
      s *= d
    return tuple(reversed(out))

  @property
  def ragged(self) -> bool:
    return self.valid is not None

  @property
  def num_dynamic(self) -> int:
    """Dynamic starts, then dynamic valid extents: the operand's slots."""
    return (sum(s is None for s in self.starts) +
            sum(v is None for v in (self.valid or ())))

  def static_offset(self) -> int:
    """Elements contributed by the static starts."""
    return sum(s * st for s, st in zip(self.starts, self.strides)
               if s is not None)


@dataclasses.dataclass(frozen=True)
class GemmSpec:
  """Everything static about one call (the primitive's one parameter)."""

  m: int
  n: int
  k: int
  a: WinSpec
  b: WinSpec
  c: Optional[WinSpec]
  d: WinSpec
  in_dtype: np.dtype
  out_dtype: np.dtype
  trans_a: bool
  trans_b: bool
  c_mode: str          # "none", "own" (c is its own array), "from_d"
  has_out: bool        # D is the caller's `out` (aliased) or a fresh array
  alpha: float
  beta: float
  precision: str       # "default" (tf32 for float32) or "highest"
  batch_shape: tuple[int, ...] = ()
  opts: KernelOptions = DEFAULT_OPTS  # kernel overrides (tests, tuning)
  epilogue: str = "none"  # EPILOGUES
  # `out` is all zeros (jax_dynoff.ragged_dot's shared out), so every
  # element outside the windows comes out zero: the planner may then give
  # the CUDA call a fresh D instead (plan.PlannedKernel.fresh_out; the
  # lowering drops `out` and its alias).  A rule that binds a spec with
  # another `out`, or without one, clears it.
  out_zeros: bool = False
  # Pass-through calls after the call on CUDA (graph_pads.py): set by
  # primitive.bind where the call is bound at a loop body's top level, so
  # that a short body reaches XLA's minimum graph size.  Never an
  # attribute of the call: the plan and the kernel do not depend on it.
  graph_pads: int = 0
  # Graph tokens among the call's trailing operands (graph_pads.py: a
  # window's pads, for a call in a `cond` branch), which the handlers
  # ignore: set by primitive.bind from its Operands.  Never an attribute.
  graph_tokens: int = 0

  @property
  def out_cols(self) -> int:
    """D's columns: n, or n / 2 where the epilogue pairs h's columns."""
    return self.n // 2 if self.epilogue == "swiglu" else self.n

  @property
  def batch(self) -> int:
    return int(np.prod(self.batch_shape, dtype=np.int64))

  def operands(self):
    """(name, WinSpec) of every present operand, in FFI order A, B, C, D."""
    out = [("a", self.a), ("b", self.b)]
    if self.c is not None:
      out.append(("c", self.c))
    out.append(("d", self.d))
    return out

  @property
  def ragged(self) -> bool:
    """Some window has valid extents: the call is one grouped launch where
    planned (sm90_grouped), else composed from XLA window ops around one
    plain call."""
    return any(w.ragged for _, w in self.operands())


@dataclasses.dataclass(frozen=True)
class StartSources:
  """Where each dynamic start (slot, in A, B, C, D dim order) comes from:
  per slot (kind, arg, table, mul, add, bits, div_op, divisor), kind one
  of SLOT_VECTOR (element `arg` of the offsets vector, FFI arg
  `offsets_arg`), SLOT_SCALAR (FFI arg `arg`, an integer scalar) or
  SLOT_LOOKUP (FFI arg `table` at index FFI arg `arg`).  The scalar, or
  the look-up's index, is first divided by `divisor` as `div_op` (a
  SLOT_DIV_OPS value) says; then a scalar or looked-up value v is taken
  as `v * mul + add` wrapped to a `bits`-bit integer (32 or 64), as the
  program computed it (IDENTITY_MAP and NO_DIVISION: v itself)."""

  offsets_arg: int
  slots: tuple[tuple[int, ...], ...]


# (mul, add, bits) of a slot whose value is taken as it is.
IDENTITY_MAP = (1, 0, 64)
# (div_op, divisor) of a slot whose value (or index) is not divided.
NO_DIVISION = (SLOT_DIV_OPS["none"], 1)


def num_arrays(spec: GemmSpec) -> int:
  """FFI args before the start operands: a, b, c (own array), out."""
  return 2 + (spec.c_mode == "own") + spec.has_out


def num_slots(spec: GemmSpec) -> int:
  return sum(w.num_dynamic for _, w in spec.operands())


def vector_sources(spec: GemmSpec) -> StartSources:
  """Every start from one offsets vector right after the arrays, slot j
  at element j."""
  n = num_slots(spec)
  return StartSources(num_arrays(spec) if n else -1,
                      tuple((SLOT_VECTOR, j, -1) + IDENTITY_MAP + NO_DIVISION
                            for j in range(n)))


def _dtype_name(dtype) -> str:
  name = np.dtype(dtype).name
  if name not in DTYPES:
    raise TypeError(f"jax_dynoff takes {', '.join(DTYPES)}, not {name}")
  return name


def _epilogue_name(e: str) -> str:
  if e not in EPILOGUES:
    raise ValueError(f"epilogue must be one of {', '.join(EPILOGUES)}, "
                     f"got {e!r}")
  return e


def call_attrs(spec: GemmSpec, sources: Optional[StartSources] = None,
               plan: Optional[dict] = None) -> dict:
  """The call's named attributes (ffi/gemm_problem.h's header lists
  them), as plain Python values: ints, bools, floats, strs, tuples of
  ints and dicts.  `plan` is the planner's answer (path, split_k and the
  kernel within the path: jax_dynoff/plan.py), absent where the planner is
  being asked.  An empty array attribute is left out (batch_shape, an
  operand's valid extents, slots).

  FFI args are laid out as: a, b, [c if c_mode == "own"], [out if has_out],
  then the operands the dynamic starts come from (`sources`; default: one
  integer vector of every dynamic start, A, B, C, D in dim order, slot j at
  element j; `starts.start_operands` chooses).
  """
  if sources is None:
    sources = vector_sources(spec)
  if len(spec.batch_shape) > MAX_BATCH_RANK:
    raise ValueError(f"at most {MAX_BATCH_RANK} nested vmaps are supported")
  attrs = dict(
      m=int(spec.m), n=int(spec.n), k=int(spec.k),
      in_dtype=_dtype_name(spec.in_dtype),
      out_dtype=_dtype_name(spec.out_dtype),
      trans_a=bool(spec.trans_a), trans_b=bool(spec.trans_b),
      c_mode=spec.c_mode, precision=spec.precision,
      epilogue=_epilogue_name(spec.epilogue),
      alpha=float(spec.alpha), beta=float(spec.beta),
      offsets_arg=int(sources.offsets_arg),
      options=options_attrs(spec.opts))
  if spec.batch_shape:
    attrs["batch_shape"] = tuple(int(b) for b in spec.batch_shape)
  if spec.out_zeros:
    attrs["out_zeros"] = True
  if plan is not None:
    attrs["plan"] = dict(plan)

  array_args = {"a": 0, "b": 1}
  next_arg = 2
  if spec.c_mode == "own":
    array_args["c"] = next_arg
    next_arg += 1
  if spec.has_out:
    next_arg += 1  # `out`: passed for the alias only, D is ret 0
  array_args["d"] = -1
  if spec.c_mode == "from_d":
    array_args["c"] = -1

  slots = num_slots(spec)
  if len(sources.slots) != slots:
    raise ValueError(f"{len(sources.slots)} start sources for {slots} "
                     "dynamic starts")
  if slots:
    fields = ("kind", "arg", "table", "mul", "add", "bits", "div_op",
              "divisor")
    attrs["slots"] = {f: tuple(int(src[i]) for src in sources.slots)
                      for i, f in enumerate(fields)}
  slot = 0
  for name, w in spec.operands():
    if len(w.dims) > MAX_RANK:
      raise ValueError(f"arrays of rank > {MAX_RANK} are not supported")
    starts, start_slots = [], []
    for s in w.starts:
      if s is None:
        starts.append(0)
        start_slots.append(slot)
        slot += 1
      else:
        starts.append(int(s))
        start_slots.append(-1)
    op = dict(arg=array_args[name],
              batched_mask=sum(1 << j for j, bt in enumerate(w.batched) if bt),
              dims=tuple(int(x) for x in w.dims),
              win=tuple(int(x) for x in w.win),
              starts=tuple(starts), start_slots=tuple(start_slots))
    if w.valid is not None:
      valid, valid_slots = [], []
      for v in w.valid:
        if v is None:
          valid.append(0)
          valid_slots.append(slot)
          slot += 1
        else:
          valid.append(int(v))
          valid_slots.append(-1)
      op["valid"], op["valid_slots"] = tuple(valid), tuple(valid_slots)
    attrs[name] = op
  return attrs
