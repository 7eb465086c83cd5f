"""The static description of one GEMM call, and its encoding for the FFI.

Everything here is known at trace time.  `GemmSpec` is the primitive's
parameter; `encode_desc` turns it into the int64 `desc` attribute that
ffi/gemm_problem.h decodes (keep the two layouts in step: DESC_VERSION).
"""

from __future__ import annotations

import dataclasses
from typing import Optional

import ml_dtypes  # ships with jax: the bfloat16 numpy dtype
import numpy as np

from jax_dynoff.options import DEFAULT as DEFAULT_OPTS
from jax_dynoff.options import DIRECT_TILES, KernelOptions

DESC_VERSION = 5
MAX_RANK = 8
MAX_BATCH_RANK = 4
HEADER_SIZE = 21
# present, arg, rank, batch mask; dims, win, starts, start slots; ragged,
# valid (2), valid slots (2).
BLOCK_SIZE = 4 + 4 * MAX_RANK + 5
MAX_SLOTS = 4 * (MAX_RANK + 2)   # every start and valid extent dynamic
SLOT_ENTRY = 6            # kind, arg, table, mul, add, bits (SlotSource)
SLOTS_AT = HEADER_SIZE + 4 * BLOCK_SIZE
DESC_SIZE = SLOTS_AT + MAX_SLOTS * SLOT_ENTRY

# Mirrors enum class SlotKind in ffi/gemm_problem.h: where a dynamic start
# comes from.
SLOT_VECTOR, SLOT_SCALAR, SLOT_LOOKUP = 0, 1, 2

# Mirrors enum class DType in ffi/gemm_problem.h.
DTYPE_CODES = {np.dtype(np.float32): 0, np.dtype(np.float16): 1,
               np.dtype(ml_dtypes.bfloat16): 2}

C_MODES = {"none": 0, "own": 1, "from_d": 2}
# Mirrors namespace opt in ffi/gemm_problem.h: the handler's switches.
OPT_NO_SM90, OPT_NO_TF32, OPT_NO_DIRECT, OPT_NO_SKINNY, OPT_NONDETERMINISTIC = (
    1, 2, 4, 8, 16)


def encode_opts(o: KernelOptions) -> tuple[int, int]:
  """(switch bits, forced direct tile: 0 none, else 1 + its DIRECT_TILES
  index) of the desc's header: what the handler itself decides."""
  bits = ((not o.sm90) * OPT_NO_SM90 | (not o.tf32) * OPT_NO_TF32
          | (not o.direct) * OPT_NO_DIRECT | (not o.skinny) * OPT_NO_SKINNY
          | (not o.deterministic) * OPT_NONDETERMINISTIC)
  tile = 0 if o.direct_tile is None else 1 + DIRECT_TILES.index(o.direct_tile)
  return int(bits), tile
PRECISIONS = {"default": 0, "highest": 1}


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


@dataclasses.dataclass(frozen=True)
class StartSources:
  """Where each dynamic start (slot, in A, B, C, D dim order) comes from:
  per slot (kind, arg, table, mul, add, bits), kind one of SLOT_VECTOR
  (element `arg` of the offsets vector, FFI arg `offsets_arg`), SLOT_SCALAR
  (FFI arg `arg`, an integer scalar) or SLOT_LOOKUP (FFI arg `table` at
  index FFI arg `arg`); a scalar or looked-up value v is taken as
  `v * mul + add` wrapped to a `bits`-bit integer (32 or 64), as the
  program computed it (IDENTITY_MAP: v itself)."""

  offsets_arg: int
  slots: tuple[tuple[int, int, int], ...]


# (mul, add, bits) of a slot whose value is taken as it is.
IDENTITY_MAP = (1, 0, 64)


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
                      tuple((SLOT_VECTOR, j, -1) + IDENTITY_MAP for j in range(n)))


def encode_desc(spec: GemmSpec, path: int, split_k: int,
                sources: Optional[StartSources] = None,
                kernel: int = 0) -> np.ndarray:
  """The int64 `desc` attribute (layout: ffi/gemm_problem.h, namespace desc).
  `path`, `split_k` and `kernel` are the planner's answer (jax_dynoff/plan.py).

  FFI args are laid out as: a, b, [c if c_mode == "own"], [out if has_out],
  then the operands the dynamic starts come from (`sources`; default: one
  integer vector of every dynamic start, A, B, C, D in dim order, slot j at
  element j; `starts.start_operands` chooses).
  """
  if sources is None:
    sources = vector_sources(spec)
  if len(spec.batch_shape) > MAX_BATCH_RANK:
    raise ValueError(f"at most {MAX_BATCH_RANK} nested vmaps are supported")
  d = np.zeros(DESC_SIZE, np.int64)
  d[0:13] = [DESC_VERSION, spec.m, spec.n, spec.k,
             DTYPE_CODES[np.dtype(spec.in_dtype)],
             DTYPE_CODES[np.dtype(spec.out_dtype)],
             int(spec.trans_a), int(spec.trans_b), C_MODES[spec.c_mode],
             PRECISIONS[spec.precision], path, split_k, len(spec.batch_shape)]
  d[13:13 + len(spec.batch_shape)] = spec.batch_shape
  slots = num_slots(spec)

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

  if len(sources.slots) != slots:
    raise ValueError(f"{len(sources.slots)} start sources for {slots} "
                     "dynamic starts")
  d[17] = sources.offsets_arg
  for j in range(MAX_SLOTS):
    d[SLOTS_AT + SLOT_ENTRY * j:SLOTS_AT + SLOT_ENTRY * (j + 1)] = (
        sources.slots[j] if j < slots else (SLOT_VECTOR, -1, -1) + IDENTITY_MAP)
  d[18:20] = encode_opts(spec.opts)
  d[20] = kernel
  slot = 0
  blocks = {"a": spec.a, "b": spec.b, "c": spec.c, "d": spec.d}
  for i, name in enumerate("abcd"):
    w = blocks[name]
    base = HEADER_SIZE + i * BLOCK_SIZE
    if w is None:
      continue
    r = len(w.dims)
    if r > MAX_RANK:
      raise ValueError(f"arrays of rank > {MAX_RANK} are not supported")
    mask = sum(1 << j for j, bt in enumerate(w.batched) if bt)
    d[base:base + 4] = [1, array_args[name], r, mask]
    d[base + 4:base + 4 + r] = w.dims
    d[base + 4 + MAX_RANK:base + 4 + MAX_RANK + r] = w.win
    for j, s in enumerate(w.starts):
      if s is None:
        d[base + 4 + 2 * MAX_RANK + j] = 0
        d[base + 4 + 3 * MAX_RANK + j] = slot
        slot += 1
      else:
        d[base + 4 + 2 * MAX_RANK + j] = s
        d[base + 4 + 3 * MAX_RANK + j] = -1
    d[base + 4 + 3 * MAX_RANK + r:base + 4 + 4 * MAX_RANK] = -1
    at = base + 4 + 4 * MAX_RANK
    if w.valid is None:
      d[at:at + 5] = [0, w.rows, w.cols, -1, -1]
    else:
      d[at] = 1
      for j, v in enumerate(w.valid):
        if v is None:
          d[at + 1 + j], d[at + 3 + j] = 0, slot
          slot += 1
        else:
          d[at + 1 + j], d[at + 3 + j] = v, -1
  return d
