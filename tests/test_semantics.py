"""dyn.gemm == dyn.reference.gemm (and both == a numpy oracle) on CPU.

Property tests over shapes (1..130, non-multiples of 8), ranks 2-4, dtypes,
transposes, alpha/beta, windows with in-range, negative and out-of-range
starts given as Python ints and as traced int32 / int64 scalars, `out` given
or not (poisoned with NaN or random bit patterns: everything outside the
window must come back bit for bit), and `c` a window of `out`'s array.
"""

from __future__ import annotations

import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jax import lax

import jax_dynoff as dyn
from strategies import (BF16, DTYPES, F16, F32, INT32_MAX, INT32_MIN,
                        INT64_MAX, INT64_MIN, TOL, GemmCase, Operand,
                        assert_bits_equal, assert_close, check_case,
                        clamp_start, examples, gemm_cases, poison_array,
                        random_array)


# ----------------------------------------------------------------------------
# Property tests
# ----------------------------------------------------------------------------

@settings(max_examples=examples(30))
@given(gemm_cases(allow_plain="always", ranks=(2,), with_out=False,
                  c_from_out=False))
def test_plain_arrays(case):
  """Rank-2 arrays, no windows: dtypes, transposes, alpha, beta, c."""
  check_case(case)


@settings(max_examples=examples(30))
@given(gemm_cases(kinds=("static",)))
def test_windows_python_int_starts(case):
  """Windows with Python int starts anywhere in the int64 range."""
  check_case(case)


@settings(max_examples=examples(30))
@given(gemm_cases(kinds=("traced",), allow_plain=False))
def test_windows_traced_int32_starts(case):
  """Every start a traced int32 scalar (a jit argument)."""
  check_case(case)


@settings(max_examples=examples(30))
@given(gemm_cases(kinds=("static", "traced")))
def test_windows_mixed_starts(case):
  """Python int and traced int32 starts mixed within one window."""
  check_case(case)


@settings(max_examples=examples(25))
@given(gemm_cases(kinds=("static", "traced"), start_dtype="int64"))
def test_windows_traced_int64_starts(case):
  """Traced int64 starts (x64 on, inside a context), int64 extremes and
  values whose low 32 bits would land inside the array included."""
  with jax.enable_x64(True):
    check_case(case)


@settings(max_examples=examples(30))
@given(gemm_cases(with_out=True, c_from_out=False))
def test_poisoned_out(case):
  """`out` full of NaN or random bits: only the window changes."""
  check_case(case)


@settings(max_examples=examples(30))
@given(gemm_cases(with_out=True, c_from_out=True))
def test_c_is_a_window_of_out(case):
  """c and out windows of one array: equal, overlapping or disjoint."""
  check_case(case)


# ----------------------------------------------------------------------------
# The clamping rule, start by start, with one compiled function per kind
# ----------------------------------------------------------------------------

_STARTS_32 = [INT32_MIN, INT32_MIN + 1, -1000, -21, -20, -19, -13, -5, -1, 0,
              1, 3, 7, 8, 9, 19, 20, 1000, INT32_MAX - 1, INT32_MAX]
_STARTS_64 = _STARTS_32 + [INT64_MIN, INT64_MIN + 1, INT64_MAX, 2**31,
                           -2**31 - 1, 2**32, 2**32 + 3, -2**32 + 3,
                           -2**32 - 3, 2**40 + 5, -(2**40) + 5]


def _clamp_case_arrays(dtype=np.float32):
  rng = np.random.default_rng(0)
  x = random_array(rng, (20, 13), dtype)       # A's array: rows 20
  b = random_array(rng, (13 - 2, 6), dtype)     # window cols 11
  o = poison_array(rng, (3, 20, 9), dtype, "nan")
  return x, b, o


def _check_clamped(fn, starts, int_dtype):
  x, b, o = _clamp_case_arrays()
  rows, cols = 12, 11
  for s0 in starts:
    for s1 in (starts[len(starts) // 2], -1, INT32_MAX):
      got = np.asarray(fn(x, b, o, np.asarray(s0, int_dtype),
                          np.asarray(s1, int_dtype)))
      r, q = clamp_start(s0, 20, rows), clamp_start(s1, 13, cols)
      want_blk = x[r:r + rows, q:q + cols].astype(np.float64) @ b
      lead = clamp_start(s1, 3, 1)
      orow = clamp_start(s0, 20, rows)
      ocol = clamp_start(-s1, 9, 6)
      want = o.copy()
      want[lead, orow:orow + rows, ocol:ocol + 6] = want_blk
      mask = np.zeros(o.shape, bool)
      mask[lead, orow:orow + rows, ocol:ocol + 6] = True
      assert_bits_equal(got[~mask], o[~mask], f"starts ({s0}, {s1})")
      assert_close(got[mask].reshape(rows, 6), want_blk, 1e-5,
                   f"starts ({s0}, {s1})")


def _clamp_fn(gemm):
  @jax.jit
  def f(x, b, o, s0, s1):
    a = dyn.window(x, (s0, s1), (12, 11))
    out = dyn.window(o, (s1, s0, -s1), (12, 6))
    return gemm(a, b, out=out)
  return f


@pytest.mark.parametrize("gemm", ["dyn", "reference"])
def test_clamping_int32_starts(gemm):
  g = dyn.gemm if gemm == "dyn" else dyn.reference.gemm
  _check_clamped(_clamp_fn(g), _STARTS_32, np.int32)


@pytest.mark.parametrize("gemm", ["dyn", "reference"])
def test_clamping_int64_starts(gemm):
  g = dyn.gemm if gemm == "dyn" else dyn.reference.gemm
  with jax.enable_x64(True):
    _check_clamped(_clamp_fn(g), _STARTS_64, np.int64)


@settings(max_examples=examples(100))
@given(st.data())
def test_computed_starts_clamp_as_dynamic_slice(data):
  """A computed start (here `s + z`, z a traced 0) goes through the offsets
  vector, clamped by StableHLO ops the lowering writes (so that a
  `table[i]` start fuses into one kernel) and again on the device: either
  way lax.dynamic_slice's rule, for any int32 / int64 value."""
  wide = data.draw(st.booleans())
  dtype, info = (np.int64, np.iinfo(np.int64)) if wide else (
      np.int32, np.iinfo(np.int32))
  s = data.draw(st.one_of(st.integers(int(info.min), int(info.max)),
                          st.sampled_from([int(info.min), int(info.max), -1,
                                           0, -20, -21, 8, 9])))
  x, b, _ = _clamp_case_arrays()
  with jax.enable_x64(wide):
    got = np.asarray(jax.jit(lambda x, b, s, z: dyn.gemm(
        dyn.window(x, (s + z, 0), (12, 11)), b))(
            x, b, jnp.asarray(s, dtype), jnp.asarray(0, dtype)))
  r = clamp_start(s, 20, 12)
  want = np.asarray(x, np.float64)[r:r + 12, :11] @ np.asarray(b, np.float64)
  np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("s", [INT64_MIN, -2**40, -21, -20, -3, 0, 5, 9,
                               2**31, 2**40, INT64_MAX])
def test_clamping_python_int_starts(s):
  """Python int starts, any int64 value, with x64 off."""
  x, b, _ = _clamp_case_arrays()
  got = np.asarray(dyn.gemm(dyn.window(x, (s, -s if s != INT64_MIN else s),
                                       (12, 11)), b))
  r = clamp_start(s, 20, 12)
  q = clamp_start(-s if s != INT64_MIN else s, 13, 11)
  assert_close(got, x[r:r + 12, q:q + 11].astype(np.float64) @ b, 1e-5)


# ----------------------------------------------------------------------------
# Specific cases
# ----------------------------------------------------------------------------

def _case(**kw):
  base = dict(in_dtype=F32, out_dtype=F32, m=9, n=7, k=5, transpose_a=False,
              transpose_b=False, alpha=1.0, beta=1.0,
              a=Operand((9, 5), (9, 5)), b=Operand((5, 7), (5, 7)), seed=1)
  base.update(kw)
  return GemmCase(**base)


@pytest.mark.parametrize("in_dt", DTYPES, ids=str)
def test_default_result_dtype_is_input_dtype(in_dt):
  rng = np.random.default_rng(2)
  a = random_array(rng, (9, 5), in_dt)
  b = random_array(rng, (5, 7), in_dt)
  got = dyn.gemm(a, b)
  assert got.dtype == in_dt and got.shape == (9, 7)
  ref = dyn.reference.gemm(a, b)
  assert ref.dtype == in_dt
  assert_close(got, ref, TOL[np.dtype(in_dt)])


@pytest.mark.parametrize("in_dt", [BF16, F16], ids=str)
def test_16bit_inputs_f32_output_keeps_precision(in_dt):
  """bf16/f16 inputs accumulated in float32 and returned as float32 keep
  float32 accuracy (no rounding through the input dtype)."""
  rng = np.random.default_rng(3)
  a = random_array(rng, (33, 65), in_dt)
  b = random_array(rng, (65, 17), in_dt)
  want = a.astype(np.float64) @ b.astype(np.float64)
  got = dyn.gemm(a, b, preferred_element_type=jnp.float32)
  assert got.dtype == jnp.float32
  assert_close(got, want, 1e-5)
  out = np.full((40, 20), np.nan, np.float32)
  got = np.asarray(dyn.gemm(a, b, out=dyn.window(out, (3, 2), (33, 17))))
  assert_close(got[3:36, 2:19], want, 1e-5)


def test_beta_without_c_is_ignored():
  rng = np.random.default_rng(4)
  a = random_array(rng, (9, 5), F32)
  b = random_array(rng, (5, 7), F32)
  base = np.asarray(dyn.gemm(a, b, alpha=0.5))
  for beta in (0.0, 2.0, -3.0):
    np.testing.assert_array_equal(
        np.asarray(dyn.gemm(a, b, alpha=0.5, beta=beta)), base)


def test_alpha_zero_with_poisoned_out_writes_beta_c():
  check_case(_case(alpha=0.0, beta=0.5, c=Operand((9, 7), (9, 7)),
                   out=Operand((2, 12, 9), (9, 7), (1, 2, 1),
                               ("traced", "static", "traced"))))


@pytest.mark.parametrize("precision", [
    None, lax.Precision.DEFAULT, lax.Precision.HIGH, lax.Precision.HIGHEST,
    (lax.Precision.HIGHEST, lax.Precision.HIGHEST)])
@pytest.mark.parametrize("in_dt", DTYPES, ids=str)
def test_precision_is_accepted(precision, in_dt):
  check_case(_case(in_dtype=in_dt, out_dtype=in_dt, precision=precision,
                   m=17, n=9, k=33, a=Operand((17, 33), (17, 33)),
                   b=Operand((33, 9), (33, 9))))


def test_eager_call_with_concrete_array_starts():
  """Outside jit: starts as concrete jnp int32 scalars and Python ints."""
  rng = np.random.default_rng(5)
  x = random_array(rng, (4, 30, 20), F32)
  b = random_array(rng, (11, 6), F32)
  o = poison_array(rng, (25, 25), F32, "bits")
  a = dyn.window(jnp.asarray(x), (jnp.int32(-2), 7, jnp.int32(100)), (10, 11))
  out = dyn.window(jnp.asarray(o), (jnp.int32(-30), 4), (10, 6))
  got = np.asarray(dyn.gemm(a, b, out=out))
  want = x[2, 7:17, 9:20].astype(np.float64) @ b
  mask = np.zeros(o.shape, bool)
  mask[0:10, 4:10] = True
  assert_bits_equal(got[~mask], o[~mask])
  assert_close(got[0:10, 4:10], want, 1e-5)


def test_largest_sizes_f32():
  check_case(_case(m=130, n=129, k=127, a=Operand((130, 127), (130, 127)),
                   b=Operand((127, 129), (127, 129)),
                   c=Operand((131, 140), (130, 129), (-1, 5),
                             ("traced", "static"))))


@pytest.mark.parametrize("ta", [False, True])
@pytest.mark.parametrize("tb", [False, True])
def test_a_b_and_out_windows_of_one_array(ta, tb):
  """a, b, c and out all windows of one buffer (overlapping): the result is
  computed from the buffer's old contents (functional semantics)."""
  rng = np.random.default_rng(6)
  buf = random_array(rng, (40, 40), F32)
  m, n, k = 12, 10, 14

  def f(gemm, x, s):
    a = dyn.window(x, (s, 0), (k, m) if ta else (m, k))
    b = dyn.window(x, (s + 3, 2), (n, k) if tb else (k, n))
    c = dyn.window(x, (s + 1, 5), (m, n))
    out = dyn.window(x, (s + 2, 4), (m, n))
    return gemm(a, b, c, out=out, transpose_a=ta, transpose_b=tb, alpha=0.5,
                beta=-1.0)

  s = np.int32(5)
  got = np.asarray(jax.jit(lambda x, s: f(dyn.gemm, x, s))(buf, s))
  ref = np.asarray(jax.jit(lambda x, s: f(dyn.reference.gemm, x, s))(buf, s))
  a = buf[5:5 + (k if ta else m), 0:(m if ta else k)].astype(np.float64)
  b = buf[8:8 + (n if tb else k), 2:2 + (k if tb else n)].astype(np.float64)
  a = a.T if ta else a
  b = b.T if tb else b
  want = buf.copy()
  want[7:7 + m, 4:4 + n] = 0.5 * a @ b - buf[6:6 + m, 5:5 + n]
  mask = np.zeros(buf.shape, bool)
  mask[7:7 + m, 4:4 + n] = True
  for res, what in ((ref, "reference"), (got, "gemm")):
    assert_bits_equal(res[~mask], buf[~mask], what)
    assert_close(res[mask], want[mask], 1e-5, what)


def test_out_plain_array_is_overwritten_whole():
  check_case(_case(out=Operand((9, 7), (9, 7)), poison="bits"))
  check_case(_case(out=Operand((9, 7), (9, 7)), c=Operand((9, 7), (9, 7)),
                   c_from_out=True))


def test_nan_in_out_does_not_leak_into_result_without_c():
  """out is write-only when c is not a window of it."""
  check_case(_case(out=Operand((9, 7), (9, 7)), poison="nan",
                   c=Operand((9, 7), (9, 7))))


@pytest.mark.parametrize("c_from_out", [False, True])
@pytest.mark.parametrize("dtype", [F32, BF16], ids=str)
def test_beta_zero_does_not_read_c(c_from_out, dtype):
  """BLAS convention (README): with beta == 0, C is not read, so NaN / Inf
  in C do not reach the result."""
  rng = np.random.default_rng(7)
  a = random_array(rng, (6, 5), dtype)
  b = random_array(rng, (5, 4), dtype)
  c = poison_array(rng, (8, 9), dtype, "nan")
  c[0, 0] = np.inf
  want = a.astype(np.float64) @ b.astype(np.float64) * 0.5

  def fn(gemm):
    def f(a, b, c, s):
      if c_from_out:
        return gemm(a, b, dyn.window(c, (s, 1), (6, 4)),
                    out=dyn.window(c, (s + 1, 0), (6, 4)), alpha=0.5,
                    beta=0.0)
      return gemm(a, b, dyn.window(c, (s, 1), (6, 4)), alpha=0.5, beta=0.0)
    return jax.jit(f)

  for gemm in (dyn.gemm, dyn.reference.gemm):
    got = np.asarray(fn(gemm)(a, b, c, np.int32(1)))
    if c_from_out:
      mask = np.zeros(c.shape, bool)
      mask[2:8, 0:4] = True
      assert_bits_equal(got[~mask], c[~mask], nan_payload=False)
      got = got[2:8, 0:4]
    assert_close(got, want, TOL[np.dtype(dtype)])


@pytest.mark.parametrize("dtype", [np.float16, jnp.bfloat16], ids=str)
def test_16_bit_values_round_trip_exactly(dtype):
  """a @ I is a exactly, for every kind of finite 16-bit value (subnormals,
  the largest; -0 aside, which the sum of products makes +0): the
  handlers' conversions to float32 and back (vectorised where the CPU has
  the instructions) lose nothing."""
  info = jnp.finfo(dtype)
  special = [0.0, float(info.tiny), -float(info.tiny), float(info.max),
             -float(info.max), 1.0, -1.5, 3.0e-3]
  if dtype == np.float16:  # bfloat16's are float32 subnormals, which the
    # CPU runtime flushes to zero in arithmetic (as XLA's own dot does)
    special += [float(info.smallest_subnormal),
                -float(info.smallest_subnormal)]
  special = np.array(special, np.float32)
  rng = np.random.default_rng(8)
  a = np.concatenate([special, rng.standard_normal(37 * 16 - special.size)
                      .astype(np.float32) * 100]).reshape(37, 16)
  a = jnp.asarray(a).astype(dtype)
  eye = jnp.eye(16, dtype=dtype)
  got = jax.jit(lambda a, b: dyn.gemm(a, b))(a, eye)
  np.testing.assert_array_equal(np.asarray(got).view(np.uint16),
                                np.asarray(a).view(np.uint16))


_NO_BLAS_SCRIPT = r"""
import sys
sys.modules["scipy_openblas32"] = None  # the package's BLAS unavailable
import jax, numpy as np, jax.numpy as jnp
import jax_dynoff as dyn
from jax_dynoff import lowering
assert lowering.cpu_blas() == "", lowering.cpu_blas()
rng = np.random.default_rng(0)
for m, n, k, ta, tb, dt in [(70, 9, 33, False, False, np.float32),
                            (6, 300, 40, True, False, np.float32),
                            (40, 41, 17, False, True, jnp.bfloat16),
                            (5, 700, 130, True, True, np.float16)]:
  a = jnp.asarray(rng.standard_normal((k, m) if ta else (m, k)), dt)
  b = jnp.asarray(rng.standard_normal((n, k) if tb else (k, n)), dt)
  c = jnp.asarray(rng.standard_normal((m, n)), dt)
  f = lambda g: jax.jit(lambda a, b, c: g(a, b, c, alpha=0.5, beta=-2.0,
                                          transpose_a=ta, transpose_b=tb))
  got = np.asarray(f(dyn.gemm)(a, b, c), np.float64)
  want = np.asarray(f(dyn.reference.gemm)(a, b, c), np.float64)
  err = np.abs(got - want).max() / np.abs(want).max()
  assert err < 1e-2, (m, n, k, ta, tb, dt, err)
print("OK")
"""


def test_cpu_handler_without_blas():
  """Where the package's BLAS cannot be loaded, the CPU handler multiplies
  with its own loops, in blocks of rows or of columns: the same results as
  the reference (transposes, C, every dtype)."""
  import subprocess
  import sys
  r = subprocess.run([sys.executable, "-c", _NO_BLAS_SCRIPT],
                     capture_output=True, text=True, timeout=300,
                     env=dict(os.environ, JAX_PLATFORMS="cpu"))
  assert r.returncode == 0 and "OK" in r.stdout, r.stdout + r.stderr
