"""A seeded differential fuzzer of `jax_dynoff.gemm` and `ragged_dot`.

Each problem is a random static call (dtypes, output dtype, ranks 2-4,
transposes, alpha, beta, C absent / its own array / a window of out's
array overlapping out's window in part, ragged valid extents, a vmap over
A's starts, or a `ragged_dot` with empty groups, sometimes over one
expert-parallel shard's experts (`group_offset`) and with its gradient
wrt lhs and rhs), compiled once and run at many random start sets: in
range, negative, below -dim, past dim, and the int32 extremes.  A gemm
problem's starts reach the call in one of START_FORMS: a plain traced
value, `table[i]`, an affine map, `table[q // c]` or `table[q % T]`, or a
computed value, so that every way the handler reads a start (a scalar, a
look-up, a map, a division, the offsets vector) runs on every kernel.
Every result is checked against a float64 NumPy oracle written here,
apart from `jax_dynoff.reference` (the clamping rule of
`lax.dynamic_slice`, the valid extents, the window write), within a bound
derived from the dtypes and K; `out` is filled with NaN outside its window
(and outside C's, where C is read from it) and checked there bit for bit.

Every problem has its own seed; a failure prints it and
`python tests/fuzz.py --replay SEED` runs that problem again.  The run
reports how many problems each planned CUDA path took
(`jax_dynoff.plan`: the path the planner chose for each call; on a GPU
also the kernel the handler's choice function launches for it).

A batch of problems runs in one jitted function (--batch: one XLA compile
for the lot, which on a GPU costs far more than the calls), and
--workers runs processes side by side, merging their reports.

  python tests/fuzz.py [--problems N] [--starts S] [--seed X]
                       [--budget-s T] [--batch B] [--workers W]
                       [--gpu-sizes] [--x64] [--replay SEED] [--json F]
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import json
import os
import subprocess
import sys
import tempfile
import time
from typing import Optional

import jax
import ml_dtypes
import numpy as np

import jax_dynoff as dyn
from jax_dynoff import plan as plan_lib
from jax_dynoff.options import (DIRECT_TILES, GROUPED_TILES, SM90_TILES,
                                KernelOptions)

BF16 = np.dtype(ml_dtypes.bfloat16)
F16 = np.dtype(np.float16)
F32 = np.dtype(np.float32)
I32_MIN, I32_MAX = -2**31, 2**31 - 1

# Unit roundoff of each dtype (the relative error of one rounding).
EPS = {BF16: 2.0**-8, F16: 2.0**-11, F32: 2.0**-24}


# --- The oracle (float64 NumPy) ---------------------------------------------

def clamp(start: int, dim: int, size: int) -> int:
  """lax.dynamic_slice's rule: a negative start counts from the end, then
  the window is moved inside the array."""
  if start < 0:
    start += dim
  return max(0, min(start, dim - size))


@dataclasses.dataclass
class Win:
  """A window of an array: its start per dim (ints, before clamping), its
  (rows, cols) capacity and its valid extents (None: plain)."""
  shape: tuple  # the array's shape
  rows: int
  cols: int
  valid: Optional[tuple] = None
  # A static column start (a Python int in the call, e.g. 0 or a multiple
  # of 8: what the SM90 paths' alignment proof needs), or None: traced.
  static_col: Optional[int] = None

  def placed(self, starts, valid=None):
    """(index tuple of the window's valid part, valid rows, valid cols)
    for these starts and valid extents."""
    r = len(self.shape)
    vr, vc = self.rows, self.cols
    if self.valid is not None:
      vr = max(0, min(int(valid[0]), self.rows))
      vc = max(0, min(int(valid[1]), self.cols))
    sizes = [1] * (r - 2) + [vr, vc]
    starts = list(starts)
    if self.static_col is not None:
      starts[-1] = self.static_col
    s = [clamp(int(st), d, z) for st, d, z in zip(starts, self.shape, sizes)]
    idx = tuple(s[:r - 2]) + (slice(s[-2], s[-2] + vr),
                              slice(s[-1], s[-1] + vc))
    return idx, vr, vc

  def read(self, x, starts, valid=None):
    """The (rows, cols) window of x in float64, zeros outside the valid
    part."""
    idx, vr, vc = self.placed(starts, valid)
    w = np.zeros((self.rows, self.cols))
    w[:vr, :vc] = np.asarray(x, np.float64)[idx]
    return w


def oracle(p, arrays, starts, valid):
  """The call's result in float64 and the bound on its error: (want,
  bound, index of the written part or None for a fresh result)."""
  a = p.a.read(arrays["a"], starts["a"], valid.get("a"))
  b = p.b.read(arrays["b"], starts["b"], valid.get("b"))
  a = a.T if p.ta else a
  b = b.T if p.tb else b
  want = p.alpha * (a @ b)
  absval = abs(p.alpha) * (np.abs(a) @ np.abs(b))
  if p.c_mode != "none":
    src = arrays["out"] if p.c_mode == "from_out" else arrays["c"]
    c = p.c.read(src, starts["c"], valid.get("c"))
    want = want + p.beta * c
    absval = absval + abs(p.beta) * np.abs(c)
  return want, bound(p, absval, want)


def bound(p, absval, want, k=None, out_dtype=None, eps_operand=0.0):
  """A sound error bound: input rounding (TF32 for float32 at default
  precision on a GPU, 3xTF32 at HIGHEST; `eps_operand`: an operand's own
  rounding, a float32 cotangent of 16-bit inputs), float32 accumulation
  over k (default p.k) terms, and the rounding to out_dtype (default
  p.out_dtype)."""
  k = p.k if k is None else k
  out_dtype = p.out_dtype if out_dtype is None else out_dtype
  gpu = jax.default_backend() == "gpu"
  if p.in_dtype == F32 and gpu:
    eps_in = 2.0**-18 if p.highest else 2.0**-10
  else:
    eps_in = 0.0  # 16-bit products are exact in float32; CPU: float32
  acc = (k + 2) * 2.0**-24
  # The output's subnormals round to a fixed absolute step.
  tiny = float(ml_dtypes.finfo(out_dtype).smallest_subnormal)
  return (4 * (eps_in + eps_operand + acc) * absval
          + 2 * EPS[out_dtype] * np.abs(want) + tiny + 1e-30)


# --- Problems ---------------------------------------------------------------

@dataclasses.dataclass
class Problem:
  seed: int
  kind: str            # "gemm", "vmap" or "ragged_dot"
  in_dtype: np.dtype
  out_dtype: np.dtype
  m: int
  n: int
  k: int
  ta: bool = False
  tb: bool = False
  alpha: float = 1.0
  beta: float = 0.0
  highest: bool = False
  c_mode: str = "none"  # "none", "own", "from_out"
  a: Optional[Win] = None
  b: Optional[Win] = None
  c: Optional[Win] = None
  out: Optional[Win] = None  # None: a fresh (m, n) result
  batch: int = 0             # vmap: items (A's starts batched)
  groups: int = 0            # ragged_dot: groups of group_sizes
  experts: int = 0           # ragged_dot: rhs's groups (< groups: an offset)
  group_offset: bool = False  # ragged_dot: rhs's first group a traced start
  grad: bool = False          # ragged_dot: and its gradient wrt lhs and rhs
  # ragged_dot: its activation (None, or "swiglu": rhs's n columns gate
  # and up interleaved, the result n / 2 wide; forward only).
  activation: Optional[str] = None
  # The integer dtype of every traced start, valid extent, group size and
  # group offset (any integer dtype, as lax.dynamic_slice takes): values
  # drawn are cut to its range.
  index_dtype: str = "int32"
  # Kernel options (any: they choose kernels, never results): they reach
  # the paths the planner takes only when asked, split-K and forced tiles.
  opts: KernelOptions = KernelOptions()
  # How the program computes each traced start of a "gemm" problem (every
  # form gives the drawn value; START_FORMS): the handler's ways of reading
  # a start, each on every kernel family.
  start_form: str = "plain"
  form_add: int = 0     # "affine": the start is x * form_mul + form_add
  form_mul: int = 1
  form_div: int = 1     # "divided": table[q // form_div] or table[q % T]
  form_mod: bool = False


def _sizes(r, gpu: bool):
  if gpu and r.random() < 0.85:
    if r.random() < 0.05:  # the large and wide tiles' sizes
      return int(r.choice([1024, 1032, 1536]))
    return int(r.choice([8, 16, 64, 128, 136, 256, 264, 512]))
  return int(r.integers(1, 40 if not gpu else 300))


def _forced_direct(r, tile: str) -> KernelOptions:
  """Options that force direct tile `tile` together with the path it
  stands in for (split-K for its tile)."""
  if tile == "split_k":
    return KernelOptions(split_k=True, direct_tile=tile,
                         deterministic=bool(r.random() < 0.8))
  path = plan_lib.DIRECT_TILE_PATHS[tile].removeprefix("sm90_")
  return KernelOptions(tile=path, direct_tile=tile)


def _opts(r) -> KernelOptions:
  """Mostly the defaults; else options that steer the kernel choice: a
  direct tile forced together with the path it stands in for (each field
  drawn alone rarely makes that pair), or fields drawn one by one."""
  if r.random() < 0.6:
    return KernelOptions()
  if r.random() < 0.35:
    return _forced_direct(r, str(r.choice(DIRECT_TILES)))
  pick = lambda names: (str(r.choice(names)) if r.random() < 0.3 else None)
  return KernelOptions(
      tile=pick(SM90_TILES), grouped_tile=pick(GROUPED_TILES),
      direct=bool(r.random() < 0.8),
      direct_tile=pick(DIRECT_TILES), skinny=bool(r.random() < 0.8),
      split_k=bool(r.random() < 0.4), deterministic=bool(r.random() < 0.8))


def _array_shape(r, rows, cols, gpu):
  """An array holding a (rows, cols) window: rank 2-4, each dim at least
  the window's, sometimes larger."""
  rank = int(r.integers(2, 5))
  lead = tuple(int(r.integers(1, 4)) for _ in range(rank - 2))
  grow = lambda v: v + (int(r.integers(0, 9)) if r.random() < 0.6 else 0)
  if gpu and r.random() < 0.9:  # aligned trailing dims: the TMA paths
    grow = lambda v: v + 8 * int(r.integers(0, 3))
  return lead + (grow(rows), grow(cols))


def _index_dtype(seed: int) -> str:
  """Mostly int32 (int64 with --x64); else a narrower or unsigned one.
  From a generator of its own: the rest of the problem is the same
  whichever it is."""
  r = np.random.default_rng([seed, 7])
  names = ["int32"] * 6 + ["int16", "int8", "uint8", "uint16", "uint32"]
  if _x64():
    names += ["int64"] * 6 + ["uint64"]
  return str(r.choice(names))


def _fit(v: int, dtype: str):
  """v as a value of dtype: cut to its range (not wrapped)."""
  info = np.iinfo(np.dtype(dtype))
  return np.asarray(min(max(int(v), int(info.min)), int(info.max)),
                    np.dtype(dtype))


# How a start reaches the call (Problem.start_form): a plain traced value;
# `table[i]` (an index past the end or below zero, wrapped); an affine map
# of a traced value (`x * mul + add`, wrapping as the index dtype does);
# `table[q // c]` or `table[q % T]` (a divided index); a product with a
# traced 1, which no form reads and so goes through the offsets vector.
START_FORMS = ("plain", "lookup", "affine", "divided", "computed")


def _start_form(p: Problem) -> None:
  """Draws p's start form and its constants, from a generator of its own:
  the rest of the problem is the same whichever it is."""
  r = np.random.default_rng([p.seed, 11])
  p.start_form = str(r.choice(["plain"] * 3 + list(START_FORMS[1:])))
  signed = np.issubdtype(np.dtype(p.index_dtype), np.signedinteger)
  p.form_mul = int(r.choice([1, -1])) if signed else 1
  p.form_add = int(r.integers(-100, 101)) if signed else int(
      r.integers(0, 101))
  p.form_div = int(r.choice([1, 2, 3, 8]))
  p.form_mod = bool(r.random() < 0.5)


def make_problem(seed: int, gpu: bool = False) -> Problem:
  p = _make_problem(seed, gpu)
  p.index_dtype = _index_dtype(seed)
  if p.kind == "gemm":
    _start_form(p)
  return p


DTYPES = {"bfloat16": BF16, "float16": F16, "float32": F32}


@dataclasses.dataclass
class Aim:
  """What a problem aimed at one catalogue line fixes (the rest is drawn
  as for any problem): its dtypes and transposes, the options that steer
  the choice to the line's family and tile, and the shape of the call."""
  line: object              # plan_lib.CatalogueLine
  kind: str                 # "gemm", "vmap" or "ragged_dot"
  ta: bool
  tb: bool
  opts: KernelOptions
  aligned: bool = True      # windows the TMA kernels can read
  small_m: bool = False     # m <= 16 (skinny) or <= 64 (split-K)
  highest: bool = False
  ragged_rows: bool = False  # gemm: A's rows a traced valid extent
  grad: bool = False        # ragged_dot: and its gradients (NT, TN)


def _aim(r) -> Aim:
  """A catalogue line drawn uniformly, and how to reach it.  The planner
  still decides: the line is a bias, reached where the drawn sizes and
  windows suit its kernel (tests/test_fuzz.py checks that every line is
  reached within a few thousand problems)."""
  line = plan_lib.CATALOGUE[int(r.integers(0, len(plan_lib.CATALOGUE)))]
  layout = str(r.choice(line.layouts))
  ta, tb = layout[0] == "T", layout[1] == "T"
  tile = str(r.choice(line.tiles)) if line.tiles else None
  aim = Aim(line, "gemm", ta, tb, KernelOptions())
  f32 = line.in_dtype == "float32"
  if line.family == "generic":  # unaligned; float32 exact (HIGHEST)
    aim.aligned, aim.highest = False, f32
    aim.kind = str(r.choice(["gemm", "vmap"]))
  elif line.family == "tf32":
    aim.aligned = False
  elif line.family in ("sm90", "sm90_tf32_highest"):
    aim.opts = KernelOptions(tile=tile, direct=False)
    aim.highest = line.family == "sm90_tf32_highest"
    aim.kind = str(r.choice(["gemm", "vmap"]))
  elif line.family == "sm90_split_k":
    aim.opts = KernelOptions(split_k=True, direct=False)
    aim.small_m = True
  elif line.family == "sm90_direct":
    aim.opts = _forced_direct(r, tile)
    aim.small_m = tile == "split_k"
  elif line.family == "sm90_grouped":
    # The tile forced, "small_groups" included (the small-group lines:
    # the weight-gradient kernel's, TN, and the forward kernel's, NN and
    # NT; planned unforced only where the items hold few rows on average,
    # which the drawn sizes rarely give).  Forced, they run whatever the
    # rows: the forward kernel's tall items take several 64-row chunks.
    aim.opts = KernelOptions(grouped_tile=tile)
    # ragged_dot runs NN forward; its gradient NT and TN in the input
    # dtype.  Other pairs: one call whose A has ragged rows.
    if layout == "NN" and r.random() < 0.5:
      aim.kind = "ragged_dot"
    elif layout != "NN" and line.out_dtype == line.in_dtype and (
        r.random() < 0.5):
      aim.kind, aim.grad = "ragged_dot", True
    else:
      aim.ragged_rows = True
  elif line.family == "sm90_grouped_swiglu":
    # ragged_dot(activation="swiglu") in the line's dtype: the fused call,
    # its tile forced (small_groups: the small-group forward kernel's
    # swiglu lines, which the planner runs only forced).
    aim.opts = KernelOptions(grouped_tile=tile)
    aim.kind = "ragged_dot"
  elif line.family == "sm90_skinny":  # the tile forced: wide or narrow
    aim.opts = KernelOptions(skinny_tile=tile)
    aim.small_m = True
  return aim


def _make_problem(seed: int, gpu: bool) -> Problem:
  r = np.random.default_rng(seed)
  # With --gpu-sizes, 40% of the problems aim at a kernel line (Aim).
  aim = _aim(r) if gpu and r.random() < 0.4 else None
  kind = r.choice(["gemm"] * 7 + ["vmap"] * 2 + ["ragged_dot"])
  in_dtype = [BF16, F16, F32][int(r.integers(0, 3))]
  out_dtype = F32 if r.random() < 0.3 else in_dtype
  m, n, k = _sizes(r, gpu), _sizes(r, gpu), _sizes(r, gpu)
  if gpu and r.random() < 0.25:  # the skinny and split-K rows
    m = int(r.integers(1, 17))
  if r.random() < 0.05:
    k = 0
  aligned = gpu
  if aim is not None:
    kind = aim.kind
    in_dtype = DTYPES[aim.line.in_dtype]
    out_dtype = DTYPES[aim.line.out_dtype]
    aligned = aim.aligned
    if not aligned:  # sizes of any value
      m, n, k = _sizes(r, False), _sizes(r, False), _sizes(r, False)
    if aim.line.family == "sm90_direct":  # the direct kernels' store
      # and K rules: tile multiples
      m, n = int(r.choice([128, 256, 512])), int(r.choice([256, 512]))
      k = int(r.choice([64, 128, 192, 256, 512]))
    if aim.small_m:
      m = int(r.integers(1, 17 if aim.line.family == "sm90_skinny" else 65))
    if aim.opts.split_k:  # a K that splits into slices
      k = int(r.choice([512, 1024, 2048]))
    k = max(k, 1)
  p = Problem(seed, str(kind), in_dtype, out_dtype, m, n, k)
  p.opts = _opts(r) if aim is None else aim.opts
  if kind == "ragged_dot":
    p.groups = p.experts = int(r.integers(1, 6))
    if r.random() < 0.3:  # one expert-parallel shard's experts
      p.group_offset = True
      p.experts = int(r.integers(1, p.groups + 1))
    p.grad = bool(r.random() < 0.4) if aim is None else aim.grad
    # Drawn last, so that the draws above are what they were before it.
    swiglu = (aim.line.family == "sm90_grouped_swiglu" if aim is not None
              else r.random() < 0.2)
    if swiglu:
      p.activation, p.grad = "swiglu", False
      # Even n; for the fused line a multiple of 16 (out's n / 2 columns
      # whole 16-byte vectors, the planner's rule), else any even n.
      step = 16 if aim is not None else 2
      p.n = max(step, p.n - p.n % step)
    return p
  # With --gpu-sizes fewer calls with both operands transposed, which no
  # SM90 kernel serves (they plan the generic path).
  t = 0.2 if gpu else 0.3
  p.ta, p.tb = bool(r.random() < t), bool(r.random() < t)
  p.alpha = float(r.choice([1.0, -0.5, 2.0, float(r.uniform(-2, 2))]))
  p.highest = bool(in_dtype == F32 and r.random() < 0.3)
  ragged = kind == "gemm" and r.random() < 0.2
  if aim is not None:
    p.ta, p.tb, p.highest = aim.ta, aim.tb, aim.highest
    ragged = aim.ragged_rows
  ar, ac = (k, m) if p.ta else (m, k)
  br, bc = (n, k) if p.tb else (k, n)
  a_valid = _ragged_dims(r) if ragged and r.random() < 0.7 else None
  if aim is not None and aim.ragged_rows:
    a_valid = (True, False)
  p.a = Win(_array_shape(r, ar, ac, aligned), ar, ac, valid=a_valid)
  p.b = Win(_array_shape(r, br, bc, aligned), br, bc)
  if aligned:  # static column starts, 16-byte multiples: the SM90 paths
    for w in (p.a, p.b):
      if r.random() < 0.92:
        w.static_col = 8 * int(r.integers(0, (w.shape[-1] - w.cols) // 8 + 1))
  if kind == "vmap":
    p.batch = int(r.integers(1, 4))
    return p
  if r.random() < 0.6:
    p.out = Win(_array_shape(r, m, n, aligned), m, n,
                valid=_ragged_dims(r) if ragged and r.random() < 0.5 else None)
    if aim is not None and aim.ragged_rows and p.out.valid is not None:
      p.out.valid = (True, False)
    if aligned and r.random() < 0.92:
      p.out.static_col = 8 * int(
          r.integers(0, (p.out.shape[-1] - n) // 8 + 1))
  u = r.random()
  if aim is not None and aim.line.family == "sm90_grouped":
    u = 1.0  # no C: the grouped epilogue has no source
  if u < 0.3:
    p.c_mode = "own"
    p.c = Win(_array_shape(r, m, n, aligned), m, n)
  elif u < 0.5 and p.out is not None and p.out.valid is None:
    p.c_mode = "from_out"
    p.c = Win(p.out.shape, m, n)
  if p.c_mode != "none":
    p.beta = float(r.choice([1.0, 0.5, -1.5]))
    if aligned and r.random() < 0.92:
      p.c.static_col = 8 * int(r.integers(0, (p.c.shape[-1] - n) // 8 + 1))
  return p


def _ragged_dims(r) -> tuple:
  """Which of a window's (rows, cols) have a traced valid extent (the
  others' valid extent is the window's own, static).  Rows alone keep the
  grouped kernel's rule (every extent along a contiguous dim static)."""
  return [(True, True), (True, False), (True, False), (False, True)][
      int(r.integers(0, 4))]


I64_MIN, I64_MAX = -2**63, 2**63 - 1


def _x64() -> bool:
  return bool(jax.config.jax_enable_x64)


def random_start(r, dim: int, size: int) -> int:
  """In range mostly; else negative, below -dim, past dim, or an int32
  extreme (int64 ones too with --x64, where the starts are int64)."""
  u = r.random()
  if u < 0.55:
    return int(r.integers(0, max(dim - size, 0) + 1))
  if u < 0.7:
    return int(r.integers(-dim, 0)) if dim else -1
  if u < 0.8:
    return int(r.integers(I32_MIN // 2, -dim)) if dim else -5
  if u < 0.9:
    return int(r.integers(dim, dim + 1000))
  extremes = [I32_MIN, I32_MAX, I32_MIN + 1, I32_MAX - 1]
  if _x64():
    extremes += [I64_MIN, I64_MAX, I64_MIN + 1, I64_MAX - 1]
  return int(r.choice(extremes))


def random_valid(r, cap: int) -> int:
  u = r.random()
  if u < 0.7:
    return int(r.integers(0, cap + 1))
  return int(r.choice([-3, cap + 5, I32_MAX, I32_MIN]))


def _rand(r, shape, dtype):
  return r.uniform(-1, 1, shape).astype(dtype)


# --- One problem ------------------------------------------------------------

def _encode_start(p: Problem, r, s):
  """What the program is given for start value s (an index-dtype scalar,
  or a batched vmap start: plain), for p.start_form; `_decode_start`
  computes s back from it inside the jitted call."""
  it = np.dtype(p.index_dtype)
  if np.ndim(s) or p.start_form == "plain":
    return {"v": s}
  if p.start_form == "computed":
    return {"v": s, "one": np.asarray(1, it)}
  if p.start_form == "affine":
    # x with x * mul + add == s in the index dtype's wrapping arithmetic.
    x = np.asarray([s], it) - np.asarray([p.form_add], it)
    if p.form_mul == -1:
      x = np.zeros(1, it) - x
    return {"x": x.reshape(())}
  # A table of T entries holding s at entry j, the others other starts.
  size = int(r.integers(1, 6))
  j = int(r.integers(0, size))
  table = np.asarray([_fit(random_start(r, 64, 8), it) for _ in range(size)],
                     it)
  table[j] = s
  signed = np.issubdtype(it, np.signedinteger)
  if signed and r.random() < 0.5:
    j -= size  # a negative index: jnp wraps it
  if p.start_form == "lookup":
    return {"t": table, "i": np.asarray(j, it)}
  if p.form_mod:  # table[q % size], q another index of entry j
    q = j + size * int(r.integers(-3, 4) if signed else r.integers(0, 4))
    return {"t": table, "q": np.asarray(q, it)}
  q = j * p.form_div + int(r.integers(0, p.form_div))  # q // div == j
  return {"t": table, "q": np.asarray(q, it)}


def _decode_start(p: Problem, e):
  """The start from `_encode_start`'s pieces, as the program computes it."""
  if "one" in e:
    return e["v"] * e["one"]
  if "v" in e:
    return e["v"]
  if "x" in e:
    return e["x"] * p.form_mul + p.form_add
  if "i" in e:
    return e["t"][e["i"]]
  if p.form_mod:
    return e["t"][e["q"] % e["t"].shape[0]]
  return e["t"][e["q"] // p.form_div]


def _call(p: Problem):
  """The call of `p`: (arrays, starts, valid) -> result."""
  prec = jax.lax.Precision.HIGHEST if p.highest else None

  def win(name, x, st, vd):
    w = getattr(p, name)
    valid = None
    if w.valid is not None:  # a traced extent, or the window's own
      valid = tuple(v if dyn_ else z
                    for v, dyn_, z in zip(vd, w.valid, (w.rows, w.cols)))
    st = tuple(st)
    if w.static_col is not None:
      st = st[:-1] + (w.static_col,)
    return dyn.window(x, st, (w.rows, w.cols), valid=valid)

  def f(arrays, encoded, valid):
    starts = {name: [_decode_start(p, e) for e in st]
              for name, st in encoded.items()}
    a = win("a", arrays["a"], starts["a"], valid.get("a"))
    b = win("b", arrays["b"], starts["b"], valid.get("b"))
    out = c = None
    if p.out is not None:
      out = win("out", arrays["out"], starts["out"], valid.get("out"))
    if p.c_mode == "own":
      c = win("c", arrays["c"], starts["c"], ())
    elif p.c_mode == "from_out":
      st = tuple(starts["c"])
      if p.c.static_col is not None:
        st = st[:-1] + (p.c.static_col,)
      c = dyn.window(arrays["out"], st, (p.m, p.n))
    return dyn.gemm(a, b, c, out=out, alpha=p.alpha, beta=p.beta,
                    transpose_a=p.ta, transpose_b=p.tb, precision=prec,
                    preferred_element_type=(p.out_dtype if p.out is None
                                            else None), opts=p.opts)

  if p.kind == "vmap":
    def fv(arrays, encoded, valid):
      return jax.vmap(
          lambda sa: f(arrays, dict(encoded, a=[{"v": v} for v in sa]),
                       valid))([e["v"] for e in encoded["a"]])
    return fv
  return f


def _arrays(p: Problem, r):
  arrays = {"a": _rand(r, p.a.shape, p.in_dtype),
            "b": _rand(r, p.b.shape, p.in_dtype)}
  if p.c_mode == "own":
    arrays["c"] = _rand(r, p.c.shape, p.out_dtype)
  if p.out is not None:
    arrays["out"] = np.full(p.out.shape, np.nan, p.out_dtype)
  return arrays


def _starts(p: Problem, r):
  it = p.index_dtype
  starts, valid = {}, {}
  for name in ("a", "b", "c", "out"):
    w = getattr(p, name)
    if w is None:
      continue
    sizes = [1] * (len(w.shape) - 2) + [w.rows, w.cols]
    st = [random_start(r, d, z) for d, z in zip(w.shape, sizes)]
    if name == "a" and p.kind == "vmap":
      st = [np.stack([_fit(random_start(r, d, z), it)
                      for _ in range(p.batch)])
            for d, z in zip(w.shape, sizes)]
    starts[name] = [_fit(s, it) if np.ndim(s) == 0 else s for s in st]
    if w.valid is not None:
      valid[name] = [_fit(random_valid(r, z), it) if dyn_ else z
                     for dyn_, z in zip(w.valid, (w.rows, w.cols))]
  return starts, valid


def _close(got, want, bnd) -> bool:
  got = np.asarray(got, np.float64)
  return bool(np.all(np.abs(got - want) <= bnd) and np.all(np.isfinite(got)))


@dataclasses.dataclass
class Case:
  """A problem as the runner needs it: `fn`, the function to jit, and
  `draw(r, t)` -> (args of fn, check(got) -> failures) for start set t."""
  fn: object
  draw: object


def gemm_case(p: Problem) -> Case:
  f = _call(p)

  def draw(r, t):
    arrays = _arrays(p, r)
    starts, valid = _starts(p, r)
    if p.c_mode == "from_out":  # C's window of out holds values
      idx, _, _ = p.c.placed(starts["c"])
      region = arrays["out"][idx]
      arrays["out"][idx] = _rand(r, region.shape, p.out_dtype)
    before = {k: v.copy() for k, v in arrays.items()}
    encoded = {name: [_encode_start(p, r, v) for v in st]
               for name, st in starts.items()}
    return (arrays, encoded, valid), lambda got: _check_gemm(
        p, t, np.asarray(got), before, starts, valid)

  return Case(f, draw)


def _check_gemm(p, t, got, before, starts, valid) -> list[str]:
  fails = []
  if p.kind == "vmap":
    for i in range(p.batch):
      sa = [int(s[i]) for s in starts["a"]]
      want, bnd = oracle(p, before, dict(starts, a=sa), valid)
      if not _close(got[i], want, bnd):
        fails.append(f"start set {t}, item {i}: values")
    return fails
  want, bnd = oracle(p, before, starts, valid)
  if p.out is None:
    if got.shape != (p.m, p.n) or not _close(got, want, bnd):
      fails.append(f"start set {t}: values")
    return fails
  idx, vr, vc = p.out.placed(starts["out"], valid.get("out"))
  written = np.zeros(p.out.shape, bool)
  written[idx] = True
  if not _close(got[idx], want[:vr, :vc], bnd[:vr, :vc]):
    fails.append(f"start set {t}: values in the window")
  keep = before["out"].view(np.uint8 if p.out_dtype.itemsize == 1 else
                            {2: np.uint16, 4: np.uint32}[
                                p.out_dtype.itemsize])
  gotb = got.astype(p.out_dtype).view(keep.dtype)
  if not np.array_equal(gotb[~written], keep[~written]):
    fails.append(f"start set {t}: an element outside the window changed")
  return fails


def ragged_dot_case(p: Problem) -> Case:
  def fn(lhs, rhs, sizes, offset, ct):
    def fwd(lhs, rhs):
      return dyn.ragged_dot(
          lhs, rhs, sizes, preferred_element_type=p.out_dtype, opts=p.opts,
          group_offset=offset if p.group_offset else None,
          activation=p.activation)
    if not p.grad:
      return (fwd(lhs, rhs),)
    out, vjp = jax.vjp(fwd, lhs, rhs)
    return (out,) + tuple(vjp(ct))

  def draw(r, t):
    lhs = _rand(r, (p.m, p.k), p.in_dtype)
    rhs = _rand(r, (p.experts, p.k, p.n), p.in_dtype)
    sizes = r.integers(0, max(2, 2 * p.m // p.groups), p.groups)
    sizes[r.random(p.groups) < 0.3] = 0  # empty groups
    sizes = np.stack([_fit(v, p.index_dtype) for v in sizes])
    offset = _fit(random_start(r, p.groups, p.experts), p.index_dtype)[None]
    ct = _rand(r, (p.m, p.n // 2 if p.activation else p.n), p.out_dtype)
    args = (lhs, rhs, sizes, offset, ct)
    return args, lambda got: _check_ragged(p, got, *args)

  return Case(fn, draw)


def _check_ragged(p, got, lhs, rhs, sizes, offset, ct) -> list[str]:
  """Group g (rows in order, cut at m) of the global sizes is rhs's group
  g - first, first the offset clamped to [0, groups - experts]; rows of
  groups outside rhs are zeros, and so is their gradient."""
  first = clamp(int(offset[0]), p.groups, p.experts) if p.group_offset else 0
  f64 = lambda x: np.asarray(x, np.float64)
  want, absval = np.zeros((p.m, p.n)), np.zeros((p.m, p.n))
  dl, dl_abs = np.zeros((p.m, p.k)), np.zeros((p.m, p.k))
  dw, dw_abs = np.zeros((p.experts, p.k, p.n)), np.zeros(
      (p.experts, p.k, p.n))
  row, rows_k = 0, 0
  for g, s in enumerate(sizes):
    s = int(min(s, p.m - row))
    e = g - first
    if 0 <= e < p.experts:
      x, w, c = f64(lhs[row:row + s]), f64(rhs[e]), f64(ct[row:row + s])
      want[row:row + s], absval[row:row + s] = x @ w, np.abs(x) @ np.abs(w)
      if not p.grad:  # (a swiglu problem's cotangent is n / 2 wide)
        row += s
        continue
      dl[row:row + s] = c @ w.T
      dl_abs[row:row + s] = np.abs(c) @ np.abs(w).T
      dw[e], dw_abs[e] = x.T @ c, np.abs(x).T @ np.abs(c)
      rows_k = max(rows_k, s)
    row += s
  fails = []
  bnd = bound(p, absval, want)
  if p.activation == "swiglu":
    want, bnd = _swiglu_oracle(p, want, absval)
  if not _close(f64(got[0]), want, bnd):
    fails.append(f"group sizes {sizes.tolist()}, offset {offset.tolist()}: "
                 "values")
  if p.grad:
    # The cotangent is rounded to the inputs' dtype where it is wider.
    eps_ct = EPS[p.in_dtype] if p.out_dtype != p.in_dtype else 0.0
    if not _close(f64(got[1]), dl, bound(p, dl_abs, dl, p.n, p.in_dtype,
                                         eps_ct)):
      fails.append(f"group sizes {sizes.tolist()}, offset "
                   f"{offset.tolist()}: gradient wrt lhs")
    if not _close(f64(got[2]), dw, bound(p, dw_abs, dw, rows_k, p.in_dtype,
                                         eps_ct)):
      fails.append(f"group sizes {sizes.tolist()}, offset "
                   f"{offset.tolist()}: gradient wrt rhs")
  return fails


def _swiglu_oracle(p, h, absval):
  """silu(gate) * up of the float64 product h (columns 2j gate, 2j + 1
  up) and a bound on its error: h's own (float32, as the kernels keep
  it) carried through the activation (|silu'| <= 1.1, |silu(g)| <= |g|),
  the float32 exp and division, and the rounding to the output dtype."""
  g, u = h[:, 0::2], h[:, 1::2]
  eh = bound(p, absval, h, out_dtype=F32)
  eg, eu = eh[:, 0::2], eh[:, 1::2]
  want = g / (1 + np.exp(-g)) * u
  tiny = float(ml_dtypes.finfo(p.out_dtype).smallest_subnormal)
  bnd = (1.1 * (np.abs(u) + eu) * eg + (np.abs(g) + eg) * eu
         + (2 * EPS[p.out_dtype] + 2.0**-18) * np.abs(want) + tiny + 1e-30)
  return want, bnd


def case(p: Problem) -> Case:
  return ragged_dot_case(p) if p.kind == "ragged_dot" else gemm_case(p)


def check_problems(ps: list, n_starts: int) -> list[list[str]]:
  """Runs the problems ps at n_starts start sets each, all of them in one
  jitted function (one XLA compile for the lot: a GPU compile costs far
  more than the calls); returns each one's failures.  Each problem draws
  its data from its own generator, so its start sets are the same run
  alone or beside others (--replay)."""
  cases = [case(p) for p in ps]
  rngs = [np.random.default_rng(p.seed + 1) for p in ps]
  f = jax.jit(lambda args: [c.fn(*a) for c, a in zip(cases, args)])
  fails = [[] for _ in ps]
  for t in range(n_starts):
    drawn = [c.draw(r, t) for c, r in zip(cases, rngs)]
    outs = f([args for args, _ in drawn])
    for i, ((_, check), got) in enumerate(zip(drawn, outs)):
      fails[i] += check(got)
  return fails


def _specs(p: Problem) -> list:
  c = case(p)
  args, _ = c.draw(np.random.default_rng(0), 0)
  return plan_lib.traced_specs(c.fn, *args)


def kernel_lines(p: Problem) -> list[str]:
  """The catalogue line each of p's calls runs on an H200 with aligned
  buffers (the choice function, jax_dynoff.plan.launch_choice), on any
  machine."""
  return [plan_lib.launch_choice(s)["kernel"] for s in _specs(p)]


def families(p: Problem, gpu: bool) -> list[str]:
  """The CUDA path the planner chose for each of p's calls (a gradient has
  several); on a GPU also the kernel the handler launches for it with
  aligned buffers (kernel_lines)."""
  try:
    specs = _specs(p)
    if not specs:
      return ["no call"]
    on_gpu = gpu and jax.default_backend() == "gpu"
    return sorted({plan_lib.plan(spec).path + (
        f": {plan_lib.launch_choice(spec)['kernel']}" if on_gpu else "")
                   for spec in specs})
  except Exception as e:  # pylint: disable=broad-except
    return [f"plan failed: {type(e).__name__}"]


def _raised(e) -> str:
  return f"raised {type(e).__name__}: {e}"[:400]


def run_problems(seeds: list, n_starts: int, gpu: bool):
  """The problems of these seeds in one batch: [(problem, failures)].
  Should the batch raise, each problem runs alone, so that the error is
  laid at the right seed."""
  ps = [make_problem(s, gpu) for s in seeds]
  try:
    return list(zip(ps, check_problems(ps, n_starts)))
  except Exception as e:  # pylint: disable=broad-except
    if len(ps) == 1:
      return [(ps[0], [_raised(e)])]
  res = []
  for p in ps:
    try:
      res.append((p, check_problems([p], n_starts)[0]))
    except Exception as e:  # pylint: disable=broad-except
      res.append((p, [_raised(e)]))
  return res


def run_problem(seed: int, n_starts: int, gpu: bool):
  return run_problems([seed], n_starts, gpu)[0]


def run(seed: int, problems: int, n_starts: int, budget_s: float,
        gpu: bool, out=sys.stdout, batch: int = 1, first: int = 0) -> dict:
  """Problems seed * 100000 + i, first <= i < first + problems, within
  budget_s seconds, `batch` of them per jitted function."""
  t0 = time.time()
  by_path = collections.Counter()  # problems per planned path (and kernel)
  failures = []
  done = calls = 0
  end = first + problems
  for i0 in range(first, end, batch):
    if time.time() - t0 > budget_s:
      break
    seeds = [seed * 100000 + i for i in range(i0, min(i0 + batch, end))]
    for p, fails in run_problems(seeds, n_starts, gpu):
      fams = families(p, gpu)
      by_path.update(fams)
      fam = ", ".join(fams)
      done += 1
      calls += n_starts * max(p.batch, 1)
      flags = " --gpu-sizes" if gpu else ""
      for fl in fails:
        failures.append((p.seed, fl))
        print(f"FAIL seed {p.seed} ({p.kind}, {fam}, starts "
              f"{p.start_form}): {fl}\n  replay: python "
              f"tests/fuzz.py --replay {p.seed}{flags}"
              + (f" (its batch: --seed {seed} --first {i0} --problems "
                 f"{len(seeds)} --batch {len(seeds)}{flags})"
                 if len(seeds) > 1 else ""), file=out, flush=True)
  return {"problems": done, "calls": calls, "failures": failures,
          "families": dict(by_path), "seconds": time.time() - t0}


def run_workers(a) -> dict:
  """`a.workers` processes of this script side by side (a compile keeps
  one CPU core busy; the GPU idles between calls), worker w with seed
  a.seed + w; their reports merged."""
  # One BLAS thread each: the oracle's float64 products are small, and a
  # pool of spinning BLAS threads per worker starved the others (14
  # workers ran at a sixth of the rate of 4 on a 16-core H200 host).
  env = dict(os.environ, XLA_PYTHON_CLIENT_PREALLOCATE="false",
             OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1",
             MKL_NUM_THREADS="1")
  with tempfile.TemporaryDirectory() as tmp:
    procs = []
    for w in range(a.workers):
      cmd = [sys.executable, __file__, "--seed", str(a.seed + w),
             "--problems", str(a.problems), "--starts", str(a.starts),
             "--budget-s", str(a.budget_s), "--batch", str(a.batch),
             "--json", f"{tmp}/w{w}.json"]
      cmd += ["--gpu-sizes"] if a.gpu_sizes else []
      cmd += ["--x64"] if a.x64 else []
      procs.append(subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE,
                                    stderr=subprocess.STDOUT, text=True))
    merged = {"problems": 0, "calls": 0, "failures": [], "families":
              collections.Counter(), "seconds": 0.0}
    for w, pr in enumerate(procs):
      log = pr.communicate()[0]
      for line in log.splitlines():
        if line.startswith(("FAIL", "  replay")):
          print(line, flush=True)
      try:
        with open(f"{tmp}/w{w}.json") as fh:
          res = json.load(fh)
      except OSError:
        merged["failures"].append((None, f"worker {w} ended without a "
                                   f"report (exit {pr.returncode}): "
                                   + log[-2000:]))
        continue
      for key in ("problems", "calls"):
        merged[key] += res[key]
      merged["failures"] += [tuple(f) for f in res["failures"]]
      merged["families"].update(res["families"])
      merged["seconds"] = max(merged["seconds"], res["seconds"])
  merged["families"] = dict(merged["families"])
  return merged


def main(argv=None) -> int:
  ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  ap.add_argument("--problems", type=int, default=1000)
  ap.add_argument("--first", type=int, default=0,
                  help="the index of the first problem (a batch's replay)")
  ap.add_argument("--starts", type=int, default=20)
  ap.add_argument("--seed", type=int, default=1)
  ap.add_argument("--budget-s", type=float, default=1e9)
  ap.add_argument("--batch", type=int, default=1,
                  help="problems per jitted function (one XLA compile)")
  ap.add_argument("--workers", type=int, default=1,
                  help="processes side by side, seeds seed .. seed+W-1")
  ap.add_argument("--gpu-sizes", action="store_true",
                  help="larger, often aligned shapes: the SM90 paths")
  ap.add_argument("--replay", type=int, default=None)
  ap.add_argument("--x64", action="store_true",
                  help="enable int64 (jax_enable_x64) for the whole run")
  ap.add_argument("--json", default=None, help="write the report here too")
  a = ap.parse_args(argv)
  if a.x64:
    jax.config.update("jax_enable_x64", True)
  if a.replay is not None:
    p, fails = run_problem(a.replay, a.starts, a.gpu_sizes)
    print(p)
    print("\n".join(fails) or "ok")
    return 1 if fails else 0
  if a.workers > 1:
    res = run_workers(a)
  else:
    res = run(a.seed, a.problems, a.starts, a.budget_s, a.gpu_sizes,
              batch=a.batch, first=a.first)
  if a.json:
    with open(a.json, "w") as fh:
      json.dump(res, fh)
  fams = ", ".join(f"{k}: {v}" for k, v in sorted(res["families"].items()))
  print(f"{res['problems']} problems, {res['calls']} calls, "
        f"{len(res['failures'])} failures in {res['seconds']:.0f} s; "
        f"by planned path: {fams}")
  return 1 if res["failures"] else 0


if __name__ == "__main__":
  sys.exit(main())
