"""The static description of one GEMM call, and its encoding for the FFI.

Everything here is known at trace time.  `GemmSpec` is the primitive's
parameter; `encode_desc` turns it into the int64 `desc` attribute that
ffi/gemm_problem.h decodes.  The desc's layout and its codes are the
extension's (`desc_codes`, from gemm_problem.h): nothing here repeats them.
"""

from __future__ import annotations

import dataclasses
from typing import Optional

import ml_dtypes  # ships with jax: the bfloat16 numpy dtype
import numpy as np

from jax_dynoff.extension import ext as _ext
from jax_dynoff.options import DEFAULT as DEFAULT_OPTS
from jax_dynoff.options import DIRECT_TILES, KernelOptions

_CODES = _ext.desc_codes()
DESC_VERSION = _CODES["version"]
MAX_RANK = _CODES["max_rank"]
MAX_BATCH_RANK = _CODES["max_batch_rank"]
MAX_SLOTS = _CODES["max_slots"]   # every start and valid extent dynamic
HEADER = dict(_CODES["header"])   # header field -> index
HEADER_SIZE = _CODES["header_size"]
BLOCK = dict(_CODES["block"])     # operand block field -> index in a block
BLOCK_SIZE = _CODES["block_size"]
SLOTS_AT = _CODES["slots_at"]
SLOT_ENTRY = _CODES["slot_entry"]  # kind, arg, table, mul, add, bits
DESC_SIZE = _CODES["size"]

# Where a dynamic start comes from (SlotKind).
SLOT_VECTOR, SLOT_SCALAR, SLOT_LOOKUP = (
    _CODES["slot_kinds"][k] for k in ("vector", "scalar", "lookup"))

DTYPE_CODES = {np.dtype(ml_dtypes.bfloat16 if name == "bfloat16" else name):
               code for name, code in _CODES["dtypes"].items()}
C_MODES = dict(_CODES["c_modes"])
PRECISIONS = dict(_CODES["precisions"])
# The handler's switches (namespace opt).
OPTION_BITS = dict(_CODES["options"])
# desc[direct_tile] is 1 + a tile's index in options.DIRECT_TILES, which
# must name the extension's DirectTile values in their order.
_EXT_TILES = tuple(_ext.planner_tables()["direct_tiles"])
if _EXT_TILES != DIRECT_TILES or _CODES["num_direct_tiles"] != len(
    DIRECT_TILES):
  raise ImportError(f"the extension's direct tiles {_EXT_TILES} are not "
                    f"jax_dynoff.options' {DIRECT_TILES}: rebuild it")


def encode_opts(o: KernelOptions) -> tuple[int, int]:
  """(switch bits, forced direct tile: 0 none, else 1 + its DIRECT_TILES
  index) of the desc's header: what the handler itself decides."""
  off = {"no_sm90": not o.sm90, "no_tf32": not o.tf32,
         "no_direct": not o.direct, "no_skinny": not o.skinny,
         "nondeterministic": not o.deterministic}
  bits = 0
  for name, on in off.items():
    bits |= OPTION_BITS[name] if on else 0
  tile = 0 if o.direct_tile is None else 1 + DIRECT_TILES.index(o.direct_tile)
  return int(bits), tile


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
                      tuple((SLOT_VECTOR, j, -1) + IDENTITY_MAP
                            for j in range(n)))


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
  h = HEADER
  for field, value in (
      ("version", DESC_VERSION), ("m", spec.m), ("n", spec.n), ("k", spec.k),
      ("in_dtype", DTYPE_CODES[np.dtype(spec.in_dtype)]),
      ("out_dtype", DTYPE_CODES[np.dtype(spec.out_dtype)]),
      ("trans_a", int(spec.trans_a)), ("trans_b", int(spec.trans_b)),
      ("c_mode", C_MODES[spec.c_mode]),
      ("precision", PRECISIONS[spec.precision]), ("path", path),
      ("split_k", split_k), ("batch_rank", len(spec.batch_shape)),
      ("offsets_arg", sources.offsets_arg), ("kernel", kernel)):
    d[h[field]] = value
  d[h["batch_shape"]:h["batch_shape"] + len(spec.batch_shape)] = (
      spec.batch_shape)
  d[h["options"]], d[h["direct_tile"]] = encode_opts(spec.opts)
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
  for j in range(MAX_SLOTS):
    d[SLOTS_AT + SLOT_ENTRY * j:SLOTS_AT + SLOT_ENTRY * (j + 1)] = (
        sources.slots[j] if j < slots
        else (SLOT_VECTOR, -1, -1) + IDENTITY_MAP)
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

    def at(field, j=0):
      return base + BLOCK[field] + j

    mask = sum(1 << j for j, bt in enumerate(w.batched) if bt)
    d[at("present")], d[at("arg")], d[at("rank")] = 1, array_args[name], r
    d[at("batched_mask")] = mask
    d[at("dims"):at("dims", r)] = w.dims
    d[at("win"):at("win", r)] = w.win
    d[at("start_arg"):at("start_arg", MAX_RANK)] = -1
    for j, s in enumerate(w.starts):
      if s is None:
        d[at("start", j)], d[at("start_arg", j)] = 0, slot
        slot += 1
      else:
        d[at("start", j)] = s
    if w.valid is None:
      d[at("ragged")] = 0
      d[at("valid"):at("valid", 2)] = (w.rows, w.cols)
      d[at("valid_arg"):at("valid_arg", 2)] = -1
    else:
      d[at("ragged")] = 1
      for j, v in enumerate(w.valid):
        if v is None:
          d[at("valid", j)], d[at("valid_arg", j)] = 0, slot
          slot += 1
        else:
          d[at("valid", j)], d[at("valid_arg", j)] = v, -1
  return d
