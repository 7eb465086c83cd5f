"""gemm inside fori_loop, scan, while_loop, cond and switch, with offsets
computed inside the body (from the loop counter or read from a device
table), checked against the same program written with reference.gemm and
against numpy."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

import jax_dynoff as dyn
from strategies import (BF16, F32, TOL, assert_bits_equal, assert_close,
                        assert_matches, poison_array, random_array,
                        uint_view)

def both(build, *args):
  """(dyn result, reference result) of jit(build(gemm))(*args)."""
  got = jax.jit(build(dyn.gemm))(*args)
  ref = jax.jit(build(dyn.reference.gemm))(*args)
  return jax.tree.map(np.asarray, got), jax.tree.map(np.asarray, ref)


# ----------------------------------------------------------------------------
# fori_loop: row slices of one buffer (the loop carry is `out`)
# ----------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [F32, BF16], ids=str)
def test_fori_loop_row_slices_of_one_buffer(dtype):
  t, mb, k, n, extra = 5, 7, 13, 9, 3
  rng = np.random.default_rng(10)
  a = random_array(rng, (t * mb, k), dtype)
  b = random_array(rng, (k, n), dtype)
  out0 = poison_array(rng, (t * mb + extra, n), dtype, "nan")

  def build(gemm):
    def f(a, b, out):
      def body(i, out):
        return gemm(dyn.window(a, (i * mb, 0), (mb, k)), b,
                    out=dyn.window(out, (i * mb, 0), (mb, n)))
      return lax.fori_loop(0, t, body, out)
    return f

  got, ref = both(build, a, b, out0)
  assert got.dtype == dtype and got.shape == out0.shape
  assert_bits_equal(got[t * mb:], out0[t * mb:], "rows never written")
  want = (a.astype(np.float64) @ b.astype(np.float64))
  assert_close(got[:t * mb], want, TOL[dtype], "vs numpy")
  assert_matches(got, ref, TOL[dtype], "vs reference")


def test_fori_loop_offsets_from_device_tables():
  """Row offset of out and layer of the stacked weights read from int32
  tables on the device, indexed by the loop counter."""
  t, mb, k, n = 6, 4, 8, 5
  rng = np.random.default_rng(11)
  x = random_array(rng, (t * mb, k), F32)
  w = random_array(rng, (3, k, n), F32)
  perm = np.array([3, 0, 5, 1, 4, 2], np.int32)     # out row block per step
  layer = np.array([2, 0, 1, 1, -1, 7], np.int32)   # -1 -> 2, 7 -> clamp 2
  out0 = poison_array(rng, (t * mb, n + 2), F32, "bits")

  def build(gemm):
    def f(x, w, perm, layer, out):
      def body(i, out):
        return gemm(dyn.window(x, (i * mb, 0), (mb, k)),
                    dyn.window(w, (layer[i], 0, 0), (k, n)),
                    out=dyn.window(out, (perm[i] * mb, 1), (mb, n)))
      return lax.fori_loop(0, t, body, out)
    return f

  got, ref = both(build, x, w, jnp.asarray(perm), jnp.asarray(layer), out0)
  want = out0.copy()
  for i in range(t):
    li = min(max(layer[i] + 3 if layer[i] < 0 else layer[i], 0), 2)
    want[perm[i] * mb:(perm[i] + 1) * mb, 1:1 + n] = (
        x[i * mb:(i + 1) * mb].astype(np.float64) @ w[li])
  mask = np.zeros(out0.shape, bool)
  mask[:, 1:1 + n] = True
  for res, what in ((got, "gemm"), (ref, "reference")):
    assert_bits_equal(res[~mask], out0[~mask], what)
    assert_close(res[mask], want[mask], 1e-5, what)


def test_fori_loop_in_place_accumulate_overlapping_windows():
  """out[w_i] = A_i @ B + out[w_i] with c == out window; windows of
  consecutive steps overlap, so the order of the steps matters."""
  t, mb, k, n = 6, 5, 7, 6
  rng = np.random.default_rng(12)
  a = random_array(rng, (t, mb, k), F32)
  b = random_array(rng, (k, n), F32)
  out0 = random_array(rng, (3 * t + mb, n), F32)

  def build(gemm):
    def f(a, b, out):
      def body(i, out):
        w = dyn.window(out, (3 * i, 0), (mb, n))
        return gemm(dyn.window(a, (i, 0, 0), (mb, k)), b, w, out=w,
                    beta=0.5)
      return lax.fori_loop(0, t, body, out)
    return f

  got, ref = both(build, a, b, out0)
  want = out0.astype(np.float64)
  for i in range(t):
    want[3 * i:3 * i + mb] = a[i].astype(np.float64) @ b + 0.5 * want[
        3 * i:3 * i + mb]
  assert_close(got, want, 1e-5, "vs numpy")
  assert_close(ref, want, 1e-5, "reference vs numpy")


def test_fori_loop_dynamic_trip_count_and_nested():
  """A fori_loop with a traced trip count nested in another one."""
  rng = np.random.default_rng(13)
  a = random_array(rng, (12, 8), F32)
  b = random_array(rng, (8, 8), F32)
  out0 = random_array(rng, (3, 12, 8), F32)

  def build(gemm):
    def f(a, b, out, n_inner):
      def outer(j, out):
        def inner(i, out):
          w = dyn.window(out, (j, 4 * i, 0), (4, 8))
          return gemm(dyn.window(a, (4 * ((i + j) % 3), 0), (4, 8)), b, w,
                      out=w, alpha=0.5, beta=0.5)
        return lax.fori_loop(0, n_inner, inner, out)
      return lax.fori_loop(0, 3, outer, out)
    return f

  got, ref = both(build, a, b, out0, jnp.int32(3))
  want = out0.astype(np.float64)
  for j in range(3):
    for i in range(3):
      r = 4 * ((i + j) % 3)
      want[j, 4 * i:4 * i + 4] = (0.5 * a[r:r + 4].astype(np.float64) @ b
                                  + 0.5 * want[j, 4 * i:4 * i + 4])
  assert_close(got, want, 1e-5)
  assert_close(ref, want, 1e-5)


# ----------------------------------------------------------------------------
# scan, while_loop
# ----------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [F32, BF16], ids=str)
def test_scan_layers_from_stacked_weights(dtype):
  """x <- x @ W[layer] over a table of layers (the scan's xs), stacking the
  intermediate results; plus a windowed bias per layer as c."""
  n_layers, m, d = 5, 3, 16
  rng = np.random.default_rng(14)
  x0 = random_array(rng, (m, d), dtype)
  w = random_array(rng, (n_layers, d, d), dtype) * np.asarray(0.25, dtype)
  bias = random_array(rng, (n_layers, 4, d), dtype)
  order = np.array([4, 2, 0, 1, 3, 3, -1], np.int32)

  def build(gemm):
    def f(x, w, bias, order):
      def step(x, l):
        y = gemm(x, dyn.window(w, (l, 0, 0), (d, d)),
                 dyn.window(bias, (l, l, 0), (m, d)), alpha=1.0, beta=0.1)
        return y, y
      return lax.scan(step, x, order)
    return f

  (got_x, got_ys), (ref_x, ref_ys) = both(build, x0, w, bias,
                                          jnp.asarray(order))
  assert got_ys.shape == (len(order), m, d) and got_ys.dtype == dtype
  assert_close(got_ys, ref_ys, 3 * TOL[dtype])
  assert_close(got_x, ref_x, 3 * TOL[dtype])
  if dtype == F32:
    x = x0.astype(np.float64)
    for l in order:
      l = l + n_layers if l < 0 else l
      r = min(l, 4 - m)
      x = x @ w[l] + 0.1 * bias[l, r:r + m]
    assert_close(got_x, x, 1e-5)


def test_while_loop_offsets_computed_in_body():
  rng = np.random.default_rng(15)
  a = random_array(rng, (40, 9), F32)
  b = random_array(rng, (6, 9), F32)            # used transposed
  out0 = poison_array(rng, (30, 6), F32, "nan")

  def build(gemm):
    def f(a, b, out, limit):
      def cond(carry):
        i, _, acc = carry
        return jnp.logical_and(i < limit, acc < 1e6)

      def body(carry):
        i, out, acc = carry
        start = (i * 7) % 31 - 3                  # negative starts included
        out = gemm(dyn.window(a, (start, 0), (5, 9)), b,
                   out=dyn.window(out, (5 * i, 0), (5, 6)),
                   transpose_b=True)
        return i + 1, out, acc + 1.0
      return lax.while_loop(cond, body, (jnp.int32(0), out, jnp.float32(0)))
    return f

  (gi, got, _), (ri, ref, _) = both(build, a, b, out0, jnp.int32(6))
  assert gi == ri == 6
  want = out0.copy()
  for i in range(6):
    s = (i * 7) % 31 - 3
    s = min(max(s + 40 if s < 0 else s, 0), 35)
    want[5 * i:5 * i + 5] = a[s:s + 5].astype(np.float64) @ b.T
  assert_matches(got, want, 1e-5, "gemm")
  assert_matches(ref, want, 1e-5, "reference")


# ----------------------------------------------------------------------------
# cond, switch
# ----------------------------------------------------------------------------

def test_cond_with_offsets_computed_in_branches():
  rng = np.random.default_rng(16)
  a = random_array(rng, (20, 10), F32)
  b = random_array(rng, (10, 10), F32)
  out0 = poison_array(rng, (20, 12), F32, "bits")

  def build(gemm):
    def f(a, b, out, s):
      def yes(out):
        return gemm(dyn.window(a, (s, 0), (6, 10)), b,
                    out=dyn.window(out, (s + 1, 2), (6, 10)))

      def no(out):
        return gemm(dyn.window(a, (2 * s, 0), (10, 6)), b, transpose_a=True,
                    out=dyn.window(out, (0, s - 1), (6, 10)), alpha=-2.0)
      return lax.cond(s % 2 == 0, yes, no, out)
    return f

  fd = jax.jit(build(dyn.gemm))
  fr = jax.jit(build(dyn.reference.gemm))
  for s in (0, 3, 4, 7):
    got = np.asarray(fd(a, b, out0, jnp.int32(s)))
    ref = np.asarray(fr(a, b, out0, jnp.int32(s)))
    want = out0.copy()
    if s % 2 == 0:
      want[s + 1:s + 7, 2:12] = a[s:s + 6].astype(np.float64) @ b
    else:
      r = min(2 * s, 10)
      c = min(max(s - 1, 0), 2)
      want[0:6, c:c + 10] = -2.0 * a[r:r + 10, 0:6].T.astype(np.float64) @ b
    for res, what in ((got, "gemm"), (ref, "reference")):
      changed = uint_neq(want, out0)
      assert_bits_equal(res[~changed], out0[~changed], f"{what} s={s}")
      assert_close(res[changed], want[changed], 1e-5, f"{what} s={s}")


def uint_neq(x, y):
  return uint_view(x) != uint_view(y)


def test_switch_index_from_device_table_inside_fori_loop():
  rng = np.random.default_rng(17)
  a = random_array(rng, (16, 8), F32)
  b = random_array(rng, (8, 8), F32)
  out0 = random_array(rng, (4, 8, 8), F32)
  which = np.array([2, 0, 1, 2], np.int32)
  offs = np.array([0, 5, 8, 3], np.int32)

  def build(gemm):
    def f(a, b, out, which, offs):
      def body(i, out):
        o = offs[i]

        def w(out):
          return dyn.window(out, (i, 0, 0), (8, 8))
        branches = [
            lambda out: gemm(dyn.window(a, (o, 0), (8, 8)), b, out=w(out)),
            lambda out: gemm(dyn.window(a, (o, 0), (8, 8)), b, w(out),
                             out=w(out), transpose_b=True, beta=-1.0),
            lambda out: gemm(b, dyn.window(a, (o, 0), (8, 8)), out=w(out),
                             transpose_a=True, alpha=3.0),
        ]
        return lax.switch(which[i], branches, out)
      return lax.fori_loop(0, 4, body, out)
    return f

  got, ref = both(build, a, b, out0, jnp.asarray(which), jnp.asarray(offs))
  want = out0.astype(np.float64)
  for i in range(4):
    o = offs[i]
    blk = a[o:o + 8].astype(np.float64)
    if which[i] == 0:
      want[i] = blk @ b
    elif which[i] == 1:
      want[i] = blk @ b.T - want[i]
    else:
      want[i] = 3.0 * b.T @ blk
  assert_close(got, want, 1e-5)
  assert_close(ref, want, 1e-5)
