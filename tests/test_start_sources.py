"""Where a call's dynamic starts come from: plain values and `table[i]`
look-ups, also through an affine map (`table[i] * m + c`), reach the
handler as they are and are read (mapped, clamped) on the device; other
computed starts go through one offsets vector.  Every source must
give exactly the reference's windows, whatever the values: negative and
out-of-range indices into the table, table entries far outside the array,
int32 and int64 tables, one table or index feeding several starts.

Runs on the default backend: on a GPU machine these exercise the CUDA
kernels that read the starts themselves (direct, skinny, pointer-kernel
and generic paths), on CPU the CPU handler.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

import jax_dynoff as dyn
from strategies import (BF16, F32, TF32_TOL, TOL, assert_bits_equal,
                        assert_matches, poison_array, random_array)


def tol(dtype) -> float:
  """The tolerance against the reference: these tests run at the default
  precision, where a GPU multiplies float32 on TF32 tensor cores, ours and
  XLA's (the reference) each in its own way, or in full float32 where a
  window's address rules the TF32 kernel out."""
  if np.dtype(dtype) == F32 and jax.default_backend() == "gpu":
    return TF32_TOL
  return TOL[np.dtype(dtype)]


def both(build, *args):
  got = jax.jit(build(dyn.gemm))(*args)
  ref = jax.jit(build(dyn.reference.gemm))(*args)
  return np.asarray(got), np.asarray(ref)


# (m, n, k, dtype, transpose_a): the shapes pick, on an H200, the skinny
# kernel (m <= 16), a direct tile (64 x 128 x 128), the pointer kernel
# (transposed A) and the TF32 kernel (float32).
CASES = [(8, 128, 128, BF16, False), (64, 128, 128, BF16, False),
         (64, 128, 128, BF16, True), (24, 40, 48, F32, False)]
# Index values: in range, negative (wrap once), below -L (clamp to 0) and
# past the end (clamp to L - 1).
INDICES = [(1, 2), (-1, -3), (-9, 7), (5, -2)]


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0]}x{c[1]}x{c[2]}"
                         f"_{np.dtype(c[3]).name}{'_ta' if c[4] else ''}")
@pytest.mark.parametrize("table_dtype", [np.int32, np.int64], ids=str)
@pytest.mark.parametrize("indices", INDICES, ids=str)
def test_lookup_starts_match_the_reference(case, table_dtype, indices):
  m, n, k, dtype, ta = case
  L = 4
  rng = np.random.default_rng(m + n + k + indices[0])
  a_rows = 3 * m + 5
  a = random_array(rng, (k, a_rows) if ta else (a_rows, k), dtype)
  w = random_array(rng, (L, k, n), dtype)
  buf = poison_array(rng, (5 * m, n), dtype, "nan")
  # Entries beyond either end of the arrays: the starts clamp.
  rows_a = np.array([0, a_rows - m, -4, 10 * a_rows], table_dtype)
  rows_d = np.array([4 * m, -m, m + 3, -10 * m], table_dtype)
  i, j = (np.array(v, table_dtype) for v in indices)

  def build(gemm):
    def f(a, w, buf, rows_a, rows_d, i, j):
      xa = (dyn.window(a, (0, rows_a[i]), (k, m)) if ta else
            dyn.window(a, (rows_a[i], 0), (m, k)))
      return gemm(xa, dyn.window(w, (i, 0, 0), (k, n)),
                  out=dyn.window(buf, (rows_d[j], 0), (m, n)),
                  transpose_a=ta)
    return f

  with jax.enable_x64(table_dtype == np.int64):
    got, ref = both(build, a, w, buf, rows_a, rows_d, i, j)
  assert_matches(got, ref, tol(dtype), "vs reference")
  def clamp(s, dim, size):  # lax.dynamic_slice's rule
    s = int(s)
    s = s + dim if s < 0 else s
    return min(max(s, 0), dim - size)

  start = clamp(rows_d[clamp(j, L, 1)], buf.shape[0], m)
  written = np.zeros(buf.shape[0], bool)
  written[start:start + m] = True
  assert_bits_equal(got[~written], buf[~written], "rows outside the window")


def test_lookups_in_a_loop_with_a_constant_table():
  """A table closed over as a constant and the loop counter: the body's
  starts need no XLA op; results as the reference, every iteration."""
  L, m, n, k = 5, 16, 64, 64
  rng = np.random.default_rng(3)
  x = random_array(rng, (m, k), BF16)
  w = random_array(rng, (L, k, n), BF16)
  buf = poison_array(rng, (L * m, n), BF16, "nan")
  rows = (rng.permutation(L) * m).astype(np.int32)

  def build(gemm):
    def f(x, w, buf):
      def body(i, buf):
        return gemm(x, dyn.window(w, (i, 0, 0), (k, n)),
                    out=dyn.window(buf, (jnp.asarray(rows)[i], 0), (m, n)))
      return lax.fori_loop(0, L, body, buf)
    return f

  got, ref = both(build, x, w, buf)
  assert_matches(got, ref, tol(BF16), "vs reference")


def test_one_table_feeds_several_starts():
  """The same table at two indices, and the same index into two tables."""
  m, n, k = 8, 16, 24
  rng = np.random.default_rng(4)
  a = random_array(rng, (6 * m, k), F32)
  b = random_array(rng, (k, n), F32)
  c = random_array(rng, (6 * m, n), F32)
  buf = poison_array(rng, (6 * m, n), F32, "nan")
  t1 = np.array([0, m, 3 * m, 5 * m], np.int32)
  t2 = np.array([2 * m, 4 * m, 0, m], np.int32)

  def build(gemm):
    def f(a, b, c, buf, t1, t2, i, j):
      return gemm(dyn.window(a, (t1[i], 0), (m, k)), b,
                  dyn.window(c, (t1[j], 0), (m, n)),
                  out=dyn.window(buf, (t2[i], 0), (m, n)), beta=0.5)
    return f

  for i, j in [(1, 2), (3, 0), (-1, 9)]:
    got, ref = both(build, a, b, c, buf, t1, t2, np.int32(i), np.int32(j))
    assert_matches(got, ref, tol(F32), f"i={i} j={j}")


def test_computed_and_batched_starts_still_go_through_the_vector():
  """A computed start (`rows[i] // 2 + 1`) and a vmapped one: the offsets
  vector, same results as the reference."""
  m, n, k = 8, 16, 24
  rng = np.random.default_rng(5)
  a = random_array(rng, (6 * m, k), F32)
  b = random_array(rng, (k, n), F32)
  rows = np.array([0, m, 2 * m], np.int32)

  def build(gemm):
    def f(a, b, rows, i):
      return gemm(dyn.window(a, (rows[i] // 2 + 1, 0), (m, k)), b)
    return f

  got, ref = both(build, a, b, rows, np.int32(2))
  assert_matches(got, ref, tol(F32), "computed")

  def vbuild(gemm):
    return jax.vmap(build(gemm), in_axes=(None, None, None, 0))

  got, ref = both(vbuild, a, b, rows, np.array([0, 2, -1], np.int32))
  assert_matches(got, ref, tol(F32), "vmapped")


def test_look_up_without_the_wrap_keeps_its_own_rule():
  """`lax.dynamic_slice(rows, (i,), (1,), allow_negative_indices=False)`
  clamps i = -1 to 0 (no wrap): the same as the reference, not the
  wrapped look-up the kernels do for `rows[i]`."""
  m, n, k = 8, 16, 24
  rng = np.random.default_rng(6)
  a = random_array(rng, (6 * m, k), F32)
  b = random_array(rng, (k, n), F32)
  rows = np.array([0, m, 3 * m], np.int32)

  def build(gemm):
    def f(a, b, rows, i):
      r = lax.dynamic_slice(rows, (i,), (1,), allow_negative_indices=False)
      return gemm(dyn.window(a, (r[0], 0), (m, k)), b)
    return f

  for i in (-1, -3, 1, 5):
    got, ref = both(build, a, b, rows, np.int32(i))
    assert_matches(got, ref, tol(F32), f"i={i}")


# Affine maps of a look-up and of the index, in int32 or int64, with values
# whose products wrap (int32: 2**29 * 8 is -2**32 + ... after the wrap) and
# land anywhere: in range, negative, far outside the arrays.
AFFINE_TABLE = [0, 3, -2, 2 ** 29 + 1, -(2 ** 30) - 7, 2 ** 31 - 1]


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0]}x{c[1]}x{c[2]}"
                         f"_{np.dtype(c[3]).name}{'_ta' if c[4] else ''}")
@pytest.mark.parametrize("table_dtype", [np.int32, np.int64], ids=str)
def test_affine_starts_match_the_reference(case, table_dtype):
  """`rows[i] * m + c` for A's rows and `c - 8 * i` for D's rows, at every
  index of a table whose entries overflow the products: the same windows
  as the reference (whose XLA ops wrap the same way), nothing written
  outside D's."""
  m, n, k, dtype, ta = case
  rng = np.random.default_rng(m + n + k + 17)
  a_rows = 3 * m + 5
  a = random_array(rng, (k, a_rows) if ta else (a_rows, k), dtype)
  b = random_array(rng, (k, n), dtype)
  buf = poison_array(rng, (5 * m, n), dtype, "nan")
  rows = np.array(AFFINE_TABLE, table_dtype)

  def build(gemm):
    def f(a, b, buf, rows, i):
      sa = rows[i] * m + 3
      sd = 2 * m - 8 * i
      xa = (dyn.window(a, (0, sa), (k, m)) if ta else
            dyn.window(a, (sa, 0), (m, k)))
      return gemm(xa, b, out=dyn.window(buf, (sd, 0), (m, n)),
                  transpose_a=ta)
    return f

  with jax.enable_x64(table_dtype == np.int64):
    for i in range(-len(rows) - 1, len(rows) + 1):
      idx = np.array(i, table_dtype)
      got, ref = both(build, a, b, buf, rows, idx)
      assert_matches(got, ref, tol(dtype), f"i={i}")
      sd = 2 * m - 8 * i           # lax.dynamic_slice's rule for D's start
      sd = sd + buf.shape[0] if sd < 0 else sd
      sd = min(max(sd, 0), buf.shape[0] - m)
      written = np.zeros(buf.shape[0], bool)
      written[sd:sd + m] = True
      assert_bits_equal(got[~written], buf[~written], f"i={i} outside")


# Divisions of the index (or of the start itself) by a constant, as jnp's
# `//` and `%` and lax.div / lax.rem compute them: at every index from
# below -L to past the end, so negative quotients and remainders, wrapped
# and clamped look-ups all occur.
DIVISIONS = {
    "floor": (lambda i, c: i // c, lambda i, c: i % c),
    "trunc": (lambda i, c: lax.div(i, c), lambda i, c: lax.rem(i, c)),
}


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0]}x{c[1]}x{c[2]}"
                         f"_{np.dtype(c[3]).name}{'_ta' if c[4] else ''}")
@pytest.mark.parametrize("table_dtype", [np.int32, np.int64], ids=str)
@pytest.mark.parametrize("rounding", DIVISIONS)
def test_divided_starts_match_the_reference(case, table_dtype, rounding):
  """A KV-cache write: layer `i % L` of a stacked B and of D, D's row
  `pos[i // L] * m + 1`, A's row `i // 3`: the same windows as the
  reference at every index, nothing written outside D's window."""
  m, n, k, dtype, ta = case
  div, mod = DIVISIONS[rounding]
  L = 3
  rng = np.random.default_rng(m + n + k + 29)
  a_rows = 3 * m + 5
  a = random_array(rng, (k, a_rows) if ta else (a_rows, k), dtype)
  w = random_array(rng, (L, k, n), dtype)
  cache = poison_array(rng, (L, 4 * m, n), dtype, "nan")
  pos = np.array([0, 2, -1, 3], table_dtype)

  def build(gemm):
    def f(a, w, cache, pos, i):
      c = lambda v: np.array(v, i.dtype)
      layer, row = mod(i, c(L)), pos[div(i, c(L))] * m + 1
      sa = div(i, c(3))
      xa = (dyn.window(a, (0, sa), (k, m)) if ta else
            dyn.window(a, (sa, 0), (m, k)))
      return gemm(xa, dyn.window(w, (layer, 0, 0), (k, n)),
                  out=dyn.window(cache, (layer, row, 0), (m, n)),
                  transpose_a=ta)
    return f

  def clamp(s, dim, size):  # lax.dynamic_slice's rule
    s = int(s)
    s = s + dim if s < 0 else s
    return min(max(s, 0), dim - size)

  ours, reference = jax.jit(build(dyn.gemm)), jax.jit(build(dyn.reference.gemm))
  with jax.enable_x64(table_dtype == np.int64):
    for i in range(-3 * L - 2, 3 * L + 2):
      idx = np.array(i, table_dtype)
      got = np.asarray(ours(a, w, cache, pos, idx))
      ref = np.asarray(reference(a, w, cache, pos, idx))
      assert_matches(got, ref, tol(dtype), f"i={i}")
      q, r = ((i // L, i % L) if rounding == "floor" else
              (int(np.fix(i / L)), int(np.fmod(i, L))))
      layer = clamp(r, L, 1)
      row = clamp(int(pos[clamp(q, len(pos), 1)]) * m + 1, 4 * m, m)
      written = np.zeros(cache.shape[:2], bool)
      written[layer, row:row + m] = True
      assert_bits_equal(got[~written], cache[~written], f"i={i} outside")
