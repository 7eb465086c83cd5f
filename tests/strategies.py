"""Hypothesis strategies and helpers shared by the jax_dynoff CPU tests.

A `GemmCase` describes one call of `gemm` completely (shapes, dtypes, flags,
windows with their starts and whether each start is a Python int or a traced
scalar).  `run_case` builds the call as a jitted function, with every traced
start passed as a jit argument, runs it through `dyn.gemm` and
`dyn.reference.gemm`, and `check_case` compares both with an independent
numpy oracle (float64 arithmetic, the clamping rule written out here again).
"""

from __future__ import annotations

import dataclasses
import os
from typing import Optional

import jax
import jax.numpy as jnp
import ml_dtypes
from jax.extend import core as jex_core
import numpy as np
from hypothesis import strategies as st

import jax_dynoff as dyn

BF16 = np.dtype(ml_dtypes.bfloat16)
F16 = np.dtype(np.float16)
F32 = np.dtype(np.float32)
DTYPES = (BF16, F16, F32)

# Tolerance per *output* dtype, relative to the largest |reference| element.
TF32_TOL = 2e-3   # relative, k <= a few hundred
TOL = {BF16: 1e-2, F16: 2e-3, F32: 1e-5}

INT32_MIN, INT32_MAX = -2**31, 2**31 - 1
INT64_MIN, INT64_MAX = -2**63, 2**63 - 1

PRIM_NAME = "jax_dynoff_gemm"


def examples(n: int) -> int:
  """A property's example count, scaled by JAX_DYNOFF_HYPOTHESIS_SCALE
  (e.g. 10 for a long soak, 0.2 for a smoke run)."""
  scale = float(os.environ.get("JAX_DYNOFF_HYPOTHESIS_SCALE", "1"))
  return max(1, int(round(n * scale)))


# ----------------------------------------------------------------------------
# numpy helpers
# ----------------------------------------------------------------------------

def clamp_start(s: int, dim: int, size: int) -> int:
  """lax.dynamic_slice's rule, written out: negative from the end, clamp."""
  s = int(s)
  if s < 0:
    s += dim
  return min(max(s, 0), dim - size)


def random_array(rng: np.random.Generator, shape, dtype) -> np.ndarray:
  """Uniform in [-1, 1], rounded to `dtype`, never exactly zero."""
  x = rng.uniform(-1.0, 1.0, size=shape)
  x = np.where(np.abs(x) < 1e-3, 0.5, x)
  return x.astype(np.float32).astype(dtype)


def uint_view(x: np.ndarray) -> np.ndarray:
  x = np.asarray(x)
  return x.view({2: np.uint16, 4: np.uint32, 8: np.uint64}[x.dtype.itemsize])


def poison_array(rng: np.random.Generator, shape, dtype, kind: str):
  """An `out` buffer whose every element is recognisable bit for bit.

  nan:  all NaN.
  bits: random bit patterns (NaNs with payloads, infs, denormals included).
  finite: random finite values (needed when `c` reads from `out`).
  """
  dtype = np.dtype(dtype)
  if kind == "nan":
    return np.full(shape, np.nan, dtype)
  if kind == "bits":
    u = {2: np.uint16, 4: np.uint32}[dtype.itemsize]
    info = np.iinfo(u)
    return rng.integers(0, int(info.max) + 1, size=shape,
                        dtype=np.uint64).astype(u).view(dtype)
  if kind == "finite":
    return random_array(rng, shape, dtype)
  raise ValueError(kind)


def assert_close(got, want, tol, what=""):
  got = np.asarray(got).astype(np.float64)
  want = np.asarray(want).astype(np.float64)
  assert got.shape == want.shape, (what, got.shape, want.shape)
  assert np.all(np.isfinite(got)), f"{what}: non-finite values in result"
  scale = float(np.max(np.abs(want), initial=0.0))
  err = float(np.max(np.abs(got - want), initial=0.0))
  assert err <= tol * scale + 1e-30, (
      f"{what}: max abs error {err:.3g} > {tol:g} * max|ref| ({scale:.3g})")


def assert_bits_equal(got, want, what="", nan_payload=True):
  """Bit-for-bit equality.  nan_payload=False accepts any NaN for a NaN
  (XLA:CPU quiets / canonicalises bfloat16 NaNs in its own ops, e.g. in
  lax.dynamic_update_slice, so the reference cannot keep payloads)."""
  g, w = uint_view(got), uint_view(want)
  assert g.shape == w.shape, (what, g.shape, w.shape)
  neq = g != w
  if not nan_payload:
    both_nan = (np.isnan(np.asarray(got).astype(np.float32)) &
                np.isnan(np.asarray(want).astype(np.float32)))
    neq &= ~both_nan
  bad = np.argwhere(neq)
  assert bad.size == 0, (
      f"{what}: {len(bad)} elements changed outside the window, first at "
      f"{tuple(bad[0])}: {w[tuple(bad[0])]:#x} -> {g[tuple(bad[0])]:#x}")


def assert_matches(got, want, tol, what=""):
  """Close where `want` is finite, bit-identical where it is not (poison)."""
  got, want = np.asarray(got), np.asarray(want)
  assert got.dtype == want.dtype and got.shape == want.shape, (
      what, got.dtype, got.shape, want.dtype, want.shape)
  fin = np.isfinite(want.astype(np.float32))
  assert_bits_equal(got[~fin], want[~fin], f"{what} (poisoned elements)")
  assert_close(got[fin], want[fin], tol, what)


# ----------------------------------------------------------------------------
# Operands and cases
# ----------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Operand:
  """One operand: a whole rank-2 array (start None) or a window of one."""

  shape: tuple            # the array's shape
  win: tuple              # (rows, cols): the window's extent
  start: Optional[tuple] = None   # one int per dim (any int64 value)
  kinds: Optional[tuple] = None   # per dim: "static" or "traced"

  @property
  def is_window(self) -> bool:
    return self.start is not None

  @property
  def full_win(self) -> tuple:
    return (1,) * (len(self.shape) - 2) + tuple(self.win)

  def clamped(self) -> tuple:
    if not self.is_window:
      return (0,) * len(self.shape)
    return tuple(clamp_start(s, d, w)
                 for s, d, w in zip(self.start, self.shape, self.full_win))

  def index(self) -> tuple:
    """numpy index of the (clamped) window, as a 2-d view."""
    c = self.clamped()
    lead = tuple(c[:-2])
    r, q = c[-2], c[-1]
    return lead + (slice(r, r + self.win[0]), slice(q, q + self.win[1]))

  def mask(self) -> np.ndarray:
    m = np.zeros(self.shape, bool)
    m[self.index()] = True
    return m

  def traced_values(self) -> list:
    if not self.is_window:
      return []
    return [s for s, k in zip(self.start, self.kinds) if k == "traced"]

  def make(self, x, traced: list):
    """The operand as passed to gemm: x itself or dyn.window(x, ...)."""
    if not self.is_window:
      return x
    it = iter(traced)
    start = tuple(next(it) if k == "traced" else s
                  for s, k in zip(self.start, self.kinds))
    return dyn.window(x, start, tuple(self.win))


@dataclasses.dataclass(frozen=True)
class GemmCase:
  in_dtype: np.dtype
  out_dtype: np.dtype
  m: int
  n: int
  k: int
  transpose_a: bool
  transpose_b: bool
  alpha: float
  beta: float
  a: Operand
  b: Operand
  c: Optional[Operand] = None
  out: Optional[Operand] = None
  c_from_out: bool = False      # c is a window of the same array as out
  pass_pref: bool = False       # pass preferred_element_type (no out only)
  start_dtype: str = "int32"    # dtype of the traced starts
  poison: str = "nan"
  seed: int = 0
  precision: object = None

  @property
  def tol(self) -> float:
    # float32 with an explicit precision below HIGHEST runs on TF32 tensor
    # cores on a GPU (10-bit mantissa): the conftest's "highest" context
    # does not override an explicit precision.
    if (np.dtype(self.in_dtype) == np.float32 and jax.default_backend() ==
        "gpu" and self.precision is not None and
        "HIGHEST" not in str(self.precision)):
      return max(TOL[np.dtype(self.out_dtype)], TF32_TOL)
    return TOL[np.dtype(self.out_dtype)]

  # --- data -----------------------------------------------------------------
  def arrays(self) -> dict:
    rng = np.random.default_rng(self.seed)
    arrs = {"a": random_array(rng, self.a.shape, self.in_dtype),
            "b": random_array(rng, self.b.shape, self.in_dtype)}
    if self.c is not None and not self.c_from_out:
      arrs["c"] = random_array(rng, self.c.shape, self.out_dtype)
    if self.out is not None:
      kind = "finite" if self.c_from_out else self.poison
      arrs["out"] = poison_array(rng, self.out.shape, self.out_dtype, kind)
    return arrs

  def traced(self) -> dict:
    ops = {"a": self.a, "b": self.b, "c": self.c, "out": self.out}
    dt = np.dtype(self.start_dtype)
    return {name: [np.asarray(v, dt) for v in op.traced_values()]
            for name, op in ops.items() if op is not None}

  # --- the call ------------------------------------------------------------
  def fn(self, gemm):
    """f(arrays, traced_starts) calling `gemm` (dyn or reference)."""
    case = self

    def f(arrs, starts):
      a = case.a.make(arrs["a"], starts["a"])
      b = case.b.make(arrs["b"], starts["b"])
      kw = dict(alpha=case.alpha, beta=case.beta,
                transpose_a=case.transpose_a, transpose_b=case.transpose_b)
      if case.precision is not None:
        kw["precision"] = case.precision
      c = None
      if case.c is not None:
        src = arrs["out"] if case.c_from_out else arrs["c"]
        c = case.c.make(src, starts["c"])
      if case.out is not None:
        kw["out"] = case.out.make(arrs["out"], starts["out"])
      elif case.pass_pref:
        kw["preferred_element_type"] = case.out_dtype
      return gemm(a, b, c, **kw)

    return f

  # --- the oracle ----------------------------------------------------------
  def numpy_oracle(self, arrs) -> np.ndarray:
    def get(op, x):
      return np.asarray(x)[op.index()].astype(np.float64)

    a = get(self.a, arrs["a"])
    b = get(self.b, arrs["b"])
    if self.transpose_a:
      a = a.T
    if self.transpose_b:
      b = b.T
    acc = self.alpha * (a @ b)
    if self.c is not None:
      src = arrs["out"] if self.c_from_out else arrs["c"]
      acc = acc + self.beta * get(self.c, src)
    res = acc.astype(np.float32).astype(self.out_dtype)
    if self.out is None:
      return res
    full = np.array(arrs["out"], copy=True)
    full[self.out.index()] = res
    return full


def run_case(case: GemmCase, gemm=None):
  """Runs the case jitted (traced starts as jit args); returns numpy."""
  gemm = dyn.gemm if gemm is None else gemm
  arrs = case.arrays()
  f = jax.jit(case.fn(gemm))
  got = f({k: jnp.asarray(v) for k, v in arrs.items()}, case.traced())
  return np.asarray(got), arrs


def check_result(case: GemmCase, arrs, got, want, what: str,
                 nan_payload: bool = True):
  got = np.asarray(got)
  want = np.asarray(want)
  assert got.dtype == np.dtype(case.out_dtype), (what, got.dtype)
  if case.out is None:
    assert got.shape == (case.m, case.n), (what, got.shape)
    assert_close(got, want, case.tol, what)
    return
  assert got.shape == tuple(case.out.shape), (what, got.shape)
  mask = case.out.mask()
  assert_bits_equal(got[~mask], np.asarray(arrs["out"])[~mask],
                    f"{what} (outside the out window)", nan_payload)
  idx = case.out.index()
  assert_close(got[idx], want[idx], case.tol, f"{what} (inside the window)")


def check_case(case: GemmCase):
  """dyn.gemm == reference.gemm, and reference.gemm == the numpy oracle."""
  got, arrs = run_case(case, dyn.gemm)
  ref, _ = run_case(case, dyn.reference.gemm)
  oracle = case.numpy_oracle(arrs)
  # The reference runs XLA:CPU's dynamic_update_slice, which canonicalises
  # bfloat16 NaN payloads; dyn.gemm itself must keep every bit.
  check_result(case, arrs, ref, oracle, "reference.gemm vs numpy oracle",
               nan_payload=np.dtype(case.out_dtype) != BF16)
  check_result(case, arrs, got, ref, "gemm vs reference.gemm")


# ----------------------------------------------------------------------------
# Strategies
# ----------------------------------------------------------------------------

def extents(hi: int = 130):
  """Matrix extents 1..hi, biased to small sizes and non-multiples of 8."""
  return st.one_of(st.integers(1, 9), st.integers(1, hi),
                   st.sampled_from([7, 8, 15, 16, 17, 31, 33, 63, 65, 127,
                                    128, 129, 130]).filter(lambda v: v <= hi))


def start_values(dim: int, size: int, lo: int = INT32_MIN,
                 hi: int = INT32_MAX):
  """Start values that exercise every branch of the clamping rule."""
  edge = [v for v in (lo, lo + 1, hi, hi - 1, -dim, -dim - 1, dim, -1,
                      dim - size, dim - size + 1) if lo <= v <= hi]
  opts = [st.integers(0, dim - size),                       # in range
          st.integers(-dim, -1),                             # from the end
          st.integers(dim - size + 1, 2 * dim + 3),          # past the end
          st.integers(-3 * dim - 3, -dim - 1),               # far negative
          st.sampled_from(edge)]
  if hi > INT32_MAX:  # int64: values that truncate to small int32 values
    big = [2**32 + 1, 2**32 + dim - size, -2**32 + 1, -2**32 - 1, 2**40,
           -2**40, 2**31, -2**31 - 1]
    opts.append(st.sampled_from(big))
  return st.one_of(*opts)


@st.composite
def operands(draw, rows: int, cols: int, *, ranks=(2, 3, 4),
             allow_plain: bool = True, kinds=("static", "traced"),
             lo: int = INT32_MIN, hi: int = INT32_MAX,
             max_extra: int = 9):
  """A plain (rows, cols) array or a window of that extent in a bigger one.

  allow_plain: True (sometimes plain), False (never), "always".
  """
  if allow_plain == "always" or (allow_plain and
                                 draw(st.integers(0, 3)) == 0):
    return Operand((rows, cols), (rows, cols))
  rank = draw(st.sampled_from(ranks))
  lead = tuple(draw(st.integers(1, 3)) for _ in range(rank - 2))
  shape = lead + (rows + draw(st.integers(0, max_extra)),
                  cols + draw(st.integers(0, max_extra)))
  win = (1,) * (rank - 2) + (rows, cols)
  start = tuple(draw(start_values(d, w, lo, hi)) for d, w in zip(shape, win))
  kind = tuple(draw(st.sampled_from(kinds)) for _ in shape)
  return Operand(shape, (rows, cols), start, kind)


def dtype_pairs(out_f32: bool = True):
  """(input dtype, output dtype) pairs the spec allows."""
  pairs = [(d, d) for d in DTYPES]
  if out_f32:
    pairs += [(BF16, F32), (F16, F32)]
  return st.sampled_from(pairs)


ALPHAS = st.sampled_from([1.0, -1.0, 0.5, 2.0, -0.75, 0.3])
BETAS = st.sampled_from([1.0, -1.0, 0.5, 0.0, 2.0, -0.25])


@st.composite
def gemm_cases(draw, *, with_c=None, with_out=None, c_from_out=None,
               kinds=("static", "traced"), start_dtype="int32",
               ranks=(2, 3, 4), allow_plain=True, hi_extent=130,
               poison=("nan", "bits")):
  """A complete GemmCase.  None for a flag means: let hypothesis choose."""
  in_dt, out_dt = draw(dtype_pairs())
  m, n, k = draw(extents(hi_extent)), draw(extents(hi_extent)), draw(
      extents(hi_extent))
  ta, tb = draw(st.booleans()), draw(st.booleans())
  # Python int starts may hold any int64 value; traced int32 ones only
  # int32 values.
  if start_dtype == "int64" or "traced" not in kinds:
    lo, hi = INT64_MIN, INT64_MAX
  else:
    lo, hi = INT32_MIN, INT32_MAX
  ops = dict(ranks=ranks, allow_plain=allow_plain, kinds=kinds, lo=lo, hi=hi)
  a = draw(operands(*((k, m) if ta else (m, k)), **ops))
  b = draw(operands(*((n, k) if tb else (k, n)), **ops))
  if with_out is None:
    with_out = draw(st.booleans())
  out = draw(operands(m, n, **ops)) if with_out else None
  if c_from_out is None:
    c_from_out = with_out and draw(st.booleans())
  if c_from_out:
    assert out is not None
    # c: a window of out's array, the same window or a partly overlapping /
    # disjoint one (shifted by a small amount in the trailing dims).
    if not out.is_window:
      c = out
    elif draw(st.booleans()):
      c = out
    else:
      shift = (draw(st.integers(-(m + 2), m + 2)),
               draw(st.integers(-(n + 2), n + 2)))
      cl = out.clamped()
      lead = tuple(cl[:-2]) if draw(st.booleans()) else tuple(
          draw(st.integers(0, d - 1)) for d in out.shape[:-2])
      start = lead + (cl[-2] + shift[0], cl[-1] + shift[1])
      start = tuple(clamp_start(s, d, w) for s, d, w in
                    zip(start, out.shape, out.full_win))
      kind = tuple(draw(st.sampled_from(kinds)) for _ in out.shape)
      c = Operand(out.shape, (m, n), start, kind)
  else:
    if with_c is None:
      with_c = draw(st.booleans())
    c = draw(operands(m, n, **ops)) if with_c else None
  pass_pref = (out is None and (out_dt != in_dt or draw(st.booleans())))
  return GemmCase(
      in_dtype=in_dt, out_dtype=out_dt, m=m, n=n, k=k, transpose_a=ta,
      transpose_b=tb, alpha=draw(ALPHAS), beta=draw(BETAS), a=a, b=b, c=c,
      out=out, c_from_out=c_from_out, pass_pref=pass_pref,
      start_dtype=start_dtype, poison=draw(st.sampled_from(poison)),
      seed=draw(st.integers(0, 2**32 - 1)))


# ----------------------------------------------------------------------------
# jaxpr / HLO inspection
# ----------------------------------------------------------------------------

def count_primitive(jaxpr, name: str = PRIM_NAME) -> int:
  """Occurrences of primitive `name` in a (closed) jaxpr and its sub-jaxprs."""
  jaxpr = getattr(jaxpr, "jaxpr", jaxpr)
  total = 0
  for eqn in jaxpr.eqns:
    if eqn.primitive.name == name:
      total += 1
    for sub in jex_core.jaxprs_in_params(eqn.params):
      total += count_primitive(sub, name)
  return total


def primitive_names(jaxpr) -> list:
  jaxpr = getattr(jaxpr, "jaxpr", jaxpr)
  out = []
  for eqn in jaxpr.eqns:
    out.append(eqn.primitive.name)
    for sub in jex_core.jaxprs_in_params(eqn.params):
      out.extend(primitive_names(sub))
  return out


def float_primitive_names(jaxpr) -> list:
  """Names of the primitives that take at least one floating-point input
  (so indexing of integer start vectors does not count)."""
  jaxpr = getattr(jaxpr, "jaxpr", jaxpr)
  out = []
  for eqn in jaxpr.eqns:
    if any(hasattr(v, "aval") and hasattr(v.aval, "dtype") and
           jnp.issubdtype(v.aval.dtype, jnp.floating) for v in eqn.invars):
      out.append(eqn.primitive.name)
    for sub in jex_core.jaxprs_in_params(eqn.params):
      out.extend(float_primitive_names(sub))
  return out
