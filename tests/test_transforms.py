"""vmap (batched arrays, batched offsets, both, nested) and autodiff
(check_grads, grad against the reference's grad) of jax_dynoff.gemm."""

from __future__ import annotations

import dataclasses
import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax
from hypothesis import given, settings
from hypothesis import strategies as st
from jax.test_util import check_grads

import jax_dynoff as dyn
from strategies import (BF16, F32, TOL, assert_bits_equal,
                        assert_close, assert_matches, check_result,
                        clamp_start, count_primitive, examples,
                        float_primitive_names, gemm_cases, poison_array,
                        random_array)

# ----------------------------------------------------------------------------
# vmap
# ----------------------------------------------------------------------------

# One call with every kind of operand: a window of a rank-3 array (a), a
# plain array (b), a window (c), a window of `out`; four traced starts s.
M, N, K = 6, 5, 7
SHAPES = {"A": (3, 20, 15), "B": (K, N), "C": (18, 12), "O": (20, 14)}


def _call(gemm):
  def f(A, B, C, O, s):
    a = dyn.window(A, (s[0], s[1], 2), (M, K))
    c = dyn.window(C, (s[2], 1), (M, N))
    out = dyn.window(O, (s[3], -3), (M, N))
    return gemm(a, B, c, out=out, alpha=0.7, beta=-0.5)
  return f


def _numpy_call(A, B, C, O, s):
  s = [int(v) for v in s]
  lead = clamp_start(s[0], 3, 1)
  r = clamp_start(s[1], 20, M)
  a = A[lead, r:r + M, 2:2 + K].astype(np.float64)
  rc = clamp_start(s[2], 18, M)
  c = C[rc:rc + M, 1:1 + N].astype(np.float64)
  ro = clamp_start(s[3], 20, M)
  co = clamp_start(-3, 14, N)
  res = O.copy()
  res[ro:ro + M, co:co + N] = (0.7 * a @ B + (-0.5) * c).astype(O.dtype)
  return res


def _batched_args(batched, bsz, rng):
  args, axes = [], []
  for name in "ABCO":
    shape = SHAPES[name]
    if name in batched:
      shape = (bsz,) + shape
    kind = "nan" if name == "O" else None
    x = (poison_array(rng, shape, F32, "nan") if kind else
         random_array(rng, shape, F32))
    args.append(x)
    axes.append(0 if name in batched else None)
  svals = rng.integers(-25, 25, size=((bsz, 4) if "s" in batched else (4,)))
  args.append(svals.astype(np.int32))
  axes.append(0 if "s" in batched else None)
  return args, tuple(axes)


_SUBSETS = [c for r in range(1, 6) for c in itertools.combinations("ABCOs", r)]


@pytest.mark.parametrize("batched", ["".join(c) for c in _SUBSETS])
def test_vmap_every_subset_of_batched_arguments(batched):
  bsz = 3
  rng = np.random.default_rng(20)
  args, axes = _batched_args(batched, bsz, rng)
  fd = jax.jit(jax.vmap(_call(dyn.gemm), in_axes=axes))
  fr = jax.jit(jax.vmap(_call(dyn.reference.gemm), in_axes=axes))
  got, ref = np.asarray(fd(*args)), np.asarray(fr(*args))
  assert got.shape == (bsz,) + SHAPES["O"]
  for i in range(bsz):
    item = [x[i] if ax == 0 else x for x, ax in zip(args, axes)]
    want = _numpy_call(*item)
    assert_matches(got[i], want, 1e-5, f"gemm, item {i}")
    assert_matches(ref[i], want, 1e-5, f"reference, item {i}")
  assert_matches(got, ref, 1e-5, "gemm vs reference")


@pytest.mark.parametrize("batched", ["A", "s", "As", "ABCOs", "Os"])
def test_vmap_is_one_primitive_call(batched):
  args, axes = _batched_args(batched, 5, np.random.default_rng(21))
  jaxpr = jax.make_jaxpr(jax.vmap(_call(dyn.gemm), in_axes=axes))(*args)
  assert count_primitive(jaxpr) == 1, jaxpr


@pytest.mark.parametrize("batched", ["s", "As", "ABCOs"])
def test_vmap_batched_offsets_do_not_gather_windows(batched):
  """Batched offsets go to the primitive, not through gathers / slices of
  the operands (that would copy every window)."""
  args, axes = _batched_args(batched, 5, np.random.default_rng(22))
  jaxpr = jax.make_jaxpr(jax.vmap(_call(dyn.gemm), in_axes=axes))(*args)
  names = set(float_primitive_names(jaxpr))
  bad = names & {"gather", "dynamic_slice", "dynamic_update_slice",
                 "scatter", "dot_general", "while", "slice"}
  assert not bad, (bad, jaxpr)


def test_vmap_offsets_only_with_unbatched_out():
  """Offsets batched, `out` shared: every item gets its own copy of out with
  its own window written."""
  rng = np.random.default_rng(23)
  x = random_array(rng, (30, 8), F32)
  b = random_array(rng, (8, 4), F32)
  o = poison_array(rng, (12, 4), F32, "bits")
  starts = np.array([0, 3, -4, 29, -100], np.int32)

  def f(gemm):
    return lambda s: gemm(dyn.window(x, (s, 0), (5, 8)), b,
                          out=dyn.window(o, (s, 0), (5, 4)))
  got = np.asarray(jax.jit(jax.vmap(f(dyn.gemm)))(starts))
  ref = np.asarray(jax.jit(jax.vmap(f(dyn.reference.gemm)))(starts))
  for i, s in enumerate(starts):
    r, q = clamp_start(s, 30, 5), clamp_start(s, 12, 5)
    want = o.copy()
    want[q:q + 5] = x[r:r + 5].astype(np.float64) @ b
    mask = np.zeros(o.shape, bool)
    mask[q:q + 5] = True
    for res, what in ((got[i], "gemm"), (ref[i], "reference")):
      assert_bits_equal(res[~mask], o[~mask], f"{what} item {i}")
      assert_close(res[mask], want[mask], 1e-5, f"{what} item {i}")


def test_nested_vmap_depth_2():
  """Outer vmap over offsets, inner over arrays (and c), both batched."""
  rng = np.random.default_rng(24)
  b1, b2 = 3, 4
  A = random_array(rng, (b2, 16, 9), F32)
  B = random_array(rng, (9, 6), F32)
  C = random_array(rng, (b2, 10, 6), F32)
  S = rng.integers(-20, 20, size=(b1, 2)).astype(np.int32)

  def f(gemm):
    def item(a, c, s):
      return gemm(dyn.window(a, (s[0], 0), (5, 9)), B,
                  dyn.window(c, (s[1], 0), (5, 6)), beta=2.0)
    return jax.vmap(jax.vmap(item, in_axes=(0, 0, None)),
                    in_axes=(None, None, 0))

  got = np.asarray(jax.jit(f(dyn.gemm))(A, C, S))
  ref = np.asarray(jax.jit(f(dyn.reference.gemm))(A, C, S))
  assert got.shape == (b1, b2, 5, 6)
  assert_close(got, ref, 1e-5)
  for i in range(b1):
    for j in range(b2):
      r, q = clamp_start(S[i, 0], 16, 5), clamp_start(S[i, 1], 10, 5)
      want = A[j, r:r + 5].astype(np.float64) @ B + 2.0 * C[j, q:q + 5]
      assert_close(got[i, j], want, 1e-5)
  assert count_primitive(jax.make_jaxpr(f(dyn.gemm))(A, C, S)) == 1


def test_nested_vmap_depth_2_with_out_and_batched_everything():
  rng = np.random.default_rng(25)
  b1, b2 = 2, 3
  A = random_array(rng, (b1, b2, 12, 8), BF16)
  B = random_array(rng, (b1, 8, 4), BF16)
  O = poison_array(rng, (b1, b2, 10, 7), F32, "nan")
  S = rng.integers(-12, 12, size=(b1, b2, 3)).astype(np.int32)

  def f(gemm):
    def item(a, b, o, s):
      return gemm(dyn.window(a, (s[0], 0), (4, 8)), b,
                  out=dyn.window(o, (s[1], s[2]), (4, 4)))
    return jax.vmap(jax.vmap(item, in_axes=(0, None, 0, 0)))

  got = np.asarray(jax.jit(f(dyn.gemm))(A, B, O, S))
  ref = np.asarray(jax.jit(f(dyn.reference.gemm))(A, B, O, S))
  assert got.dtype == np.float32 and got.shape == O.shape
  assert_matches(got, ref, 1e-5)
  assert count_primitive(jax.make_jaxpr(f(dyn.gemm))(A, B, O, S)) == 1


def test_vmap_nonzero_in_and_out_axes_with_transposes():
  rng = np.random.default_rng(26)
  bsz = 3
  A = random_array(rng, (9, bsz, 11), F32)      # batch on axis 1
  B = random_array(rng, (6, 9, bsz), F32)       # batch on axis 2
  s = np.array([1, -2, 40], np.int32)

  def f(gemm):
    def item(a, b, s):
      return gemm(dyn.window(a, (0, s), (9, 5)), b, transpose_a=True,
                  transpose_b=True)
    return jax.vmap(item, in_axes=(1, 2, 0), out_axes=1)

  got = np.asarray(jax.jit(f(dyn.gemm))(A, B, s))
  ref = np.asarray(jax.jit(f(dyn.reference.gemm))(A, B, s))
  assert got.shape == (5, bsz, 6)
  assert_close(got, ref, 1e-5)
  for i in range(bsz):
    q = clamp_start(s[i], 11, 5)
    want = A[:, i, q:q + 5].T.astype(np.float64) @ B[:, :, i].T
    assert_close(got[:, i], want, 1e-5)


def test_vmap_of_fori_loop_with_offset_tables():
  """A batch of offset tables driving one loop each."""
  rng = np.random.default_rng(27)
  x = random_array(rng, (24, 8), F32)
  w = random_array(rng, (8, 8), F32)
  tables = rng.integers(0, 6, size=(4, 3)).astype(np.int32)
  out0 = poison_array(rng, (12, 8), F32, "nan")

  def f(gemm):
    def item(table):
      def body(i, out):
        return gemm(dyn.window(x, (4 * table[i], 0), (4, 8)), w,
                    out=dyn.window(out, (4 * i, 0), (4, 8)))
      return lax.fori_loop(0, 3, body, jnp.asarray(out0))
    return jax.vmap(item)

  got = np.asarray(jax.jit(f(dyn.gemm))(tables))
  ref = np.asarray(jax.jit(f(dyn.reference.gemm))(tables))
  assert_close(got, ref, 1e-5)
  for j in range(4):
    for i in range(3):
      t = min(4 * tables[j, i], 20)
      assert_close(got[j, 4 * i:4 * i + 4],
                   x[t:t + 4].astype(np.float64) @ w, 1e-5)


# ----------------------------------------------------------------------------
# Autodiff
# ----------------------------------------------------------------------------

def _grad_fn(gemm, *, ta=False, tb=False, c_from_out=False):
  """f(a, b, c, out, starts) with every operand a window."""
  m, n, k = 5, 4, 6

  def f(a, b, c, o, s):
    aw = dyn.window(a, (s[0], s[1], 1), (k, m) if ta else (m, k))
    bw = dyn.window(b, (s[2], 0), (n, k) if tb else (k, n))
    ow = dyn.window(o, (s[3], 2), (m, n))
    cw = (dyn.window(o, (s[3] + 2, 1), (m, n)) if c_from_out else
          dyn.window(c, (1, s[4]), (m, n)))
    return gemm(aw, bw, cw, out=ow, transpose_a=ta, transpose_b=tb,
                alpha=1.5, beta=-0.5)
  return f


def _grad_args(rng, ta=False, tb=False):
  a = random_array(rng, (2, 10, 9), F32)
  b = random_array(rng, (9, 8), F32)
  c = random_array(rng, (7, 9), F32)
  o = random_array(rng, (11, 9), F32)
  return a, b, c, o


_GRAD_CONFIGS = [dict(), dict(ta=True), dict(tb=True), dict(ta=True, tb=True),
                 dict(c_from_out=True), dict(ta=True, c_from_out=True)]
_STARTS = [np.array([1, 3, 2, 4, -3], np.int32),
           np.array([-1, 100, -100, 7, 1], np.int32)]


@pytest.mark.parametrize("cfg", _GRAD_CONFIGS, ids=str)
def test_check_grads_windows(cfg):
  rng = np.random.default_rng(30)
  a, b, c, o = _grad_args(rng)
  jf = jax.jit(_grad_fn(dyn.gemm, **cfg))
  for s in _STARTS:
    s = jnp.asarray(s)
    check_grads(lambda a, b, c, o: jf(a, b, c, o, s), (a, b, c, o), order=1,
                modes=("fwd", "rev"), eps=1e-2, atol=2e-2, rtol=2e-2)


@pytest.mark.parametrize("cfg", _GRAD_CONFIGS, ids=str)
def test_grad_matches_reference_grad(cfg):
  rng = np.random.default_rng(31)
  a, b, c, o = _grad_args(rng)
  wgt = random_array(rng, o.shape, F32)

  def loss(gemm):
    f = _grad_fn(gemm, **cfg)
    return jax.jit(jax.grad(
        lambda a, b, c, o, s: jnp.sum(wgt * f(a, b, c, o, s)) ** 2,
        argnums=(0, 1, 2, 3)))

  gd, gr = loss(dyn.gemm), loss(dyn.reference.gemm)
  for s in _STARTS:
    got = gd(a, b, c, o, s)
    ref = gr(a, b, c, o, s)
    for name, g, r in zip("abco", got, ref):
      assert g.shape == r.shape and g.dtype == r.dtype, name
      assert_close(g, r, 1e-5, f"d/d{name}, starts {s}")


def test_jvp_matches_reference_jvp():
  rng = np.random.default_rng(32)
  prim = _grad_args(rng)
  tang = tuple(random_array(rng, x.shape, F32) for x in prim)
  s = jnp.asarray(_STARTS[1])
  outs = []
  for gemm in (dyn.gemm, dyn.reference.gemm):
    f = _grad_fn(gemm, tb=True, c_from_out=True)
    outs.append(jax.jit(lambda p, t: jax.jvp(
        lambda *x: f(*x, s), p, t))(prim, tang))
  (pd, td), (pr, tr) = outs
  assert_close(pd, pr, 1e-5, "primal")
  assert_close(td, tr, 1e-5, "tangent")


def test_grad_without_out_and_without_c_bf16():
  rng = np.random.default_rng(33)
  x = random_array(rng, (3, 20, 16), BF16)
  w = random_array(rng, (16, 8), BF16)

  def loss(gemm):
    def f(x, w, s):
      y = gemm(dyn.window(x, (s, s, 0), (6, 16)), w,
               preferred_element_type=jnp.float32)
      return jnp.sum(jnp.sin(y))
    return jax.jit(jax.grad(f, argnums=(0, 1)))

  for s in (0, 2, -1, 50):
    s = jnp.int32(s)
    gd = loss(dyn.gemm)(x, w, s)
    gr = loss(dyn.reference.gemm)(x, w, s)
    for g, r in zip(gd, gr):
      assert g.dtype == r.dtype == BF16
      assert_close(g, r, TOL[BF16])


def test_grad_is_expressed_with_dynamic_offset_gemms():
  """dA and dB are the primitive again, written into windows of zeros: no
  dot_general, and the windows of a and b are never sliced out."""
  rng = np.random.default_rng(34)
  a, b, c, o = _grad_args(rng)
  for cfg in _GRAD_CONFIGS:
    f = _grad_fn(dyn.gemm, **cfg)
    g = jax.grad(lambda a, b, c, o, s: jnp.sum(f(a, b, c, o, s)),
                 argnums=(0, 1, 2, 3))
    closed = jax.make_jaxpr(g)(a, b, c, o, jnp.asarray(_STARTS[0]))
    assert count_primitive(closed) >= 3, closed    # forward, dA, dB
    assert "dot_general" not in float_primitive_names(closed), closed
    jaxpr = closed.jaxpr
    ab = set(jaxpr.invars[:2])
    sliced = [e for e in jaxpr.eqns
              if e.primitive.name in ("dynamic_slice", "slice", "gather")
              and e.invars and e.invars[0] in ab]
    assert not sliced, sliced


def test_grad_through_scan_matches_reference():
  rng = np.random.default_rng(35)
  x0 = random_array(rng, (4, 8), F32)
  w = random_array(rng, (3, 8, 8), F32) * np.float32(0.5)
  order = jnp.asarray(np.array([2, 0, 1, 1], np.int32))

  def loss(gemm):
    def f(x, w):
      def step(x, l):
        y = gemm(x, dyn.window(w, (l, 0, 0), (8, 8)))
        return jnp.tanh(y), None
      return jnp.sum(lax.scan(step, x, order)[0] ** 2)
    return jax.jit(jax.grad(f, argnums=(0, 1)))

  for g, r in zip(loss(dyn.gemm)(x0, w), loss(dyn.reference.gemm)(x0, w)):
    assert_close(g, r, 1e-5)


def test_grad_of_fori_loop_row_slices():
  rng = np.random.default_rng(36)
  a = random_array(rng, (12, 6), F32)
  b = random_array(rng, (6, 5), F32)
  out0 = random_array(rng, (14, 5), F32)

  def loss(gemm):
    def f(a, b, out):
      def body(i, out):
        return gemm(dyn.window(a, (3 * i, 0), (3, 6)), b,
                    dyn.window(out, (3 * i + 1, 0), (3, 5)),
                    out=dyn.window(out, (3 * i, 0), (3, 5)))
      return jnp.sum(jnp.cos(lax.fori_loop(0, 4, body, out)))
    return jax.jit(jax.grad(f, argnums=(0, 1, 2)))

  for g, r in zip(loss(dyn.gemm)(a, b, out0),
                  loss(dyn.reference.gemm)(a, b, out0)):
    assert_close(g, r, 1e-5)


def _window_loop_loss(gemm, *, ta=False, tb=False, alpha=1.0, opts=None,
                      stacked=False):
  """A loss over a fori_loop of GEMMs: rows of x at table offsets times a
  whole w (the backward pattern), or a whole x times layers of w (the
  stacked pattern, where w's window is larger than x)."""
  m, n, k, L = 3, 5, 7, 4
  table = jnp.asarray(np.array([2, 0, 3, 1], np.int32))

  def f(x, w, g):
    def body(i, acc):
      if stacked:
        xw = x
        ww = dyn.window(w, (i, 0, 0), (n, k) if tb else (k, n))
      else:
        xw = dyn.window(x, (0, table[i] * m) if ta else (table[i] * m, 0),
                        (k, m) if ta else (m, k))
        ww = w
      y = gemm(xw, ww, transpose_a=ta, transpose_b=tb, alpha=alpha,
               preferred_element_type=jnp.float32,
               **({} if opts is None else dict(opts=opts)))
      return acc + jnp.sum(y * g[i])
    return lax.fori_loop(0, L, body, jnp.float32(0))

  x_shape = (m, k) if stacked else ((k, L * m) if ta else (L * m, k))
  w_shape = (L,) * stacked + ((n, k) if tb else (k, n))
  return f, x_shape, w_shape, (L, m, n)


@pytest.mark.parametrize("ta,tb,alpha", [(False, False, 1.0),
                                         (True, False, 1.0),
                                         (False, True, -0.75),
                                         (True, True, 2.0)])
@pytest.mark.parametrize("dtype", [F32, BF16], ids=str)
def test_cotangents_reading_no_large_window_are_xla_dots(ta, tb, alpha,
                                                          dtype):
  """dX = G W^T and dW = X_i^T G of rows of x times a whole w copy no more
  than they write, so both are XLA's dots (XLA fuses the loop's
  accumulation into dW's); xla_cotangent_dot=False keeps the GEMMs; both
  match the reference's gradient."""
  rng = np.random.default_rng(37)
  no = dyn.KernelOptions(xla_cotangent_dot=False)
  for opts in (None, no):
    f, xs, ws, gs = _window_loop_loss(dyn.gemm, ta=ta, tb=tb, alpha=alpha,
                                      opts=opts)
    fr = _window_loop_loss(dyn.reference.gemm, ta=ta, tb=tb, alpha=alpha)[0]
    x, w = random_array(rng, xs, dtype), random_array(rng, ws, dtype)
    g = random_array(rng, gs, F32)
    grad = jax.grad(f, argnums=(0, 1))
    closed = jax.make_jaxpr(grad)(x, w, g)
    dots = float_primitive_names(closed).count("dot_general")
    # the forward, then dX and dW as GEMMs or as dots
    assert count_primitive(closed) == (1 if opts is None else 3), closed
    assert dots == (2 if opts is None else 0), closed
    got = jax.jit(grad)(x, w, g)
    want = jax.jit(jax.grad(fr, argnums=(0, 1)))(x, w, g)
    for name, a, b in zip("xw", got, want):
      assert a.shape == b.shape and a.dtype == b.dtype == dtype, name
      assert_close(a, b, TOL[dtype] if dtype == BF16 else 1e-5, name)


def test_cotangent_reading_a_larger_window_stays_the_gemm():
  """x whole times layers of w larger than x (stacked weights): dX = G
  W[i]^T stays the GEMM reading w's layer in place (XLA's dot would first
  copy the layer out); dW[i] = x^T G reads only whole arrays: a dot."""
  rng = np.random.default_rng(38)
  f, xs, ws, gs = _window_loop_loss(dyn.gemm, stacked=True)
  fr = _window_loop_loss(dyn.reference.gemm, stacked=True)[0]
  x, w = random_array(rng, xs, F32), random_array(rng, ws, F32)
  g = random_array(rng, gs, F32)
  grad = jax.grad(f, argnums=(0, 1))
  closed = jax.make_jaxpr(grad)(x, w, g)
  assert count_primitive(closed) == 2, closed   # the forward and dX
  assert float_primitive_names(closed).count("dot_general") == 1, closed
  for a, b in zip(jax.jit(grad)(x, w, g),
                  jax.jit(jax.grad(fr, argnums=(0, 1)))(x, w, g)):
    assert_close(a, b, 1e-5)


# ----------------------------------------------------------------------------
# vmap: property test over whole GemmCases
# ----------------------------------------------------------------------------

def _item_case(case, batched_starts, i):
  """The case of batch item i: traced starts replaced by their i-th value."""
  ops = {}
  for name in ("a", "b", "c", "out"):
    op = getattr(case, name)
    if op is None or not op.is_window:
      continue
    vals = batched_starts.get(name)
    if vals is None:
      continue
    it = iter(vals)
    start = tuple(int(next(it)[i]) if k == "traced" else s
                  for s, k in zip(op.start, op.kinds))
    ops[name] = dataclasses.replace(op, start=start)
  return dataclasses.replace(case, **ops)


@settings(max_examples=examples(25))
@given(case=gemm_cases(hi_extent=20), data=st.data())
def test_vmap_property(case, data):
  """vmap over a random subset of the arrays and of the traced starts:
  item by item equal to the reference and to the numpy oracle."""
  bsz = data.draw(st.integers(1, 3), label="batch")
  arrs = case.arrays()
  rng = np.random.default_rng(case.seed + 1)
  arr_axes, starts_axes, starts_b = {}, {}, {}
  batched_arrs = {}
  force_a = not data.draw(st.booleans(), label="batch any start")
  for name, x in arrs.items():
    if (name == "a" and force_a) or data.draw(st.booleans(),
                                              label=f"batch {name}"):
      kind = "finite" if name == "out" and case.c_from_out else case.poison
      items = [x] + [
          (poison_array(rng, x.shape, x.dtype, kind) if name == "out" else
           random_array(rng, x.shape, x.dtype)) for _ in range(bsz - 1)]
      batched_arrs[name] = np.stack(items)
      arr_axes[name] = 0
    else:
      batched_arrs[name] = x
      arr_axes[name] = None
  traced = case.traced()
  item_traced = {}
  for name, vals in traced.items():
    starts_axes[name], starts_b[name] = [], []
    for v in vals:
      if not force_a and data.draw(st.booleans(),
                                   label=f"batch a start of {name}"):
        dim_vals = np.concatenate([[v], rng.integers(-150, 150, bsz - 1)])
        starts_b[name].append(dim_vals.astype(v.dtype))
        starts_axes[name].append(0)
      else:
        starts_b[name].append(v)
        starts_axes[name].append(None)
    item_traced[name] = [np.broadcast_to(v, (bsz,)) for v in starts_b[name]]
  if not any(ax == 0 for ax in arr_axes.values()) and not any(
      ax == 0 for axs in starts_axes.values() for ax in axs):
    # no traced start drawn as batched: batch a instead
    batched_arrs["a"] = np.stack([arrs["a"]] * bsz)
    arr_axes["a"] = 0
  in_axes = (arr_axes, starts_axes)
  got = np.asarray(jax.jit(jax.vmap(case.fn(dyn.gemm), in_axes=in_axes))(
      batched_arrs, starts_b))
  assert got.shape[0] == bsz
  # The reference item by item (not vmapped: XLA:CPU cannot run some batched
  # bf16 x bf16 -> f32 dots, "Unsupported element type for DotThunk").
  ref_fn = jax.jit(case.fn(dyn.reference.gemm))
  for i in range(bsz):
    item = _item_case(case, item_traced, i)
    item_arrs = {k: (v[i] if arr_axes[k] == 0 else v)
                 for k, v in batched_arrs.items()}
    item_starts = {k: [v[i] if ax == 0 else v for v, ax in
                       zip(starts_b[k], starts_axes[k])] for k in starts_b}
    ref = np.asarray(ref_fn(item_arrs, item_starts))
    oracle = item.numpy_oracle(item_arrs)
    check_result(item, item_arrs, ref, oracle,
                 f"reference item {i} vs numpy",
                 nan_payload=np.dtype(case.out_dtype) != BF16)
    check_result(item, item_arrs, got[i], ref, f"vmap(gemm) item {i}")


# ----------------------------------------------------------------------------
# More vmap and autodiff combinations
# ----------------------------------------------------------------------------

def test_vmap_c_window_of_batched_out():
  rng = np.random.default_rng(40)
  bsz = 3
  a = random_array(rng, (bsz, 4, 6), F32)
  b = random_array(rng, (6, 5), F32)
  o = random_array(rng, (bsz, 10, 5), F32)
  s = np.array([0, 3, 5], np.int32)

  def f(gemm):
    def item(a, o, s):
      return gemm(a, b, dyn.window(o, (s + 1, 0), (4, 5)),
                  out=dyn.window(o, (s, 0), (4, 5)), beta=-1.0)
    return jax.vmap(item)

  got = np.asarray(jax.jit(f(dyn.gemm))(a, o, s))
  ref = np.asarray(jax.jit(f(dyn.reference.gemm))(a, o, s))
  assert_close(got, ref, 1e-5)
  for i in range(bsz):
    want = o[i].astype(np.float64)
    r = s[i]
    want[r:r + 4] = a[i] @ b - o[i, r + 1:r + 5]
    assert_close(got[i], want, 1e-5)


@pytest.mark.parametrize("depth", [3, 5])
def test_nested_vmap_deep(depth):
  """vmap nested `depth` times, offsets batched at every level."""
  rng = np.random.default_rng(41)
  x = random_array(rng, (20, 6), F32)
  b = random_array(rng, (6, 3), F32)
  shape = (2, 1, 3, 1, 2)[:depth]
  s = rng.integers(-20, 20, size=shape).astype(np.int32)

  def f(gemm):
    g = lambda s: gemm(dyn.window(x, (s, 0), (4, 6)), b)
    for _ in range(depth):
      g = jax.vmap(g)
    return g

  got = np.asarray(jax.jit(f(dyn.gemm))(s))
  ref = np.asarray(jax.jit(f(dyn.reference.gemm))(s))
  assert got.shape == shape + (4, 3)
  assert_close(got, ref, 1e-5)
  assert count_primitive(jax.make_jaxpr(f(dyn.gemm))(s)) == 1


def test_vmap_of_grad_and_grad_of_vmap():
  rng = np.random.default_rng(42)
  x = random_array(rng, (3, 12, 6), F32)
  w = random_array(rng, (6, 4), F32)
  o = random_array(rng, (3, 9, 4), F32)
  s = np.array([0, -2, 7], np.int32)

  def loss(gemm):
    def f(x, w, o, s):
      y = gemm(dyn.window(x, (s, 0), (5, 6)), w,
               out=dyn.window(o, (s + 1, 0), (5, 4)))
      return jnp.sum(jnp.sin(y))
    return f

  for gemm_name in ("vmap_of_grad", "grad_of_vmap"):
    res = []
    for gemm in (dyn.gemm, dyn.reference.gemm):
      f = loss(gemm)
      if gemm_name == "vmap_of_grad":
        g = jax.vmap(jax.grad(f, argnums=(0, 1, 2)), in_axes=(0, None, 0, 0))
      else:
        g = jax.grad(lambda x, w, o, s: jnp.sum(jax.vmap(
            f, in_axes=(0, None, 0, 0))(x, w, o, s)), argnums=(0, 1, 2))
      res.append(jax.jit(g)(x, w, o, s))
    for gd, gr in zip(*res):
      assert_close(gd, gr, 1e-5, gemm_name)


def test_grad_when_a_and_out_are_windows_of_one_array():
  rng = np.random.default_rng(43)
  X = random_array(rng, (16, 10), F32)
  b = random_array(rng, (6, 4), F32)

  def f(gemm):
    def g(X, b, s):
      return gemm(dyn.window(X, (s, 0), (5, 6)), b,
                  dyn.window(X, (s, 3), (5, 4)),
                  out=dyn.window(X, (s + 2, 4), (5, 4)), alpha=0.5)
    return g

  s = jnp.int32(3)
  jd = jax.jit(f(dyn.gemm))
  check_grads(lambda X, b: jd(X, b, s), (X, b), order=1, modes=("fwd", "rev"),
              eps=1e-2, atol=2e-2, rtol=2e-2)
  wgt = random_array(rng, X.shape, F32)
  gd = jax.jit(jax.grad(lambda X, b: jnp.sum(wgt * f(dyn.gemm)(X, b, s)) ** 2,
                        argnums=(0, 1)))(X, b)
  gr = jax.jit(jax.grad(
      lambda X, b: jnp.sum(wgt * f(dyn.reference.gemm)(X, b, s)) ** 2,
      argnums=(0, 1)))(X, b)
  for g, r in zip(gd, gr):
    assert_close(g, r, 1e-5)


def test_grad_bf16_inputs_f32_out_window():
  rng = np.random.default_rng(44)
  a = random_array(rng, (2, 9, 8), BF16)
  b = random_array(rng, (8, 5), BF16)
  c = random_array(rng, (7, 5), F32)
  o = random_array(rng, (12, 6), F32)

  def loss(gemm):
    def f(a, b, c, o, s):
      y = gemm(dyn.window(a, (s, s, 0), (7, 8)), b, c,
               out=dyn.window(o, (s, 1), (7, 5)), beta=0.25)
      return jnp.sum(jnp.cos(y))
    return jax.jit(jax.grad(f, argnums=(0, 1, 2, 3)))

  for s in (0, 1, -1, 9):
    s = jnp.int32(s)
    gd = loss(dyn.gemm)(a, b, c, o, s)
    gr = loss(dyn.reference.gemm)(a, b, c, o, s)
    for name, g, r in zip("abco", gd, gr):
      assert g.dtype == r.dtype, (name, g.dtype, r.dtype)
      assert_close(g, r, TOL[np.dtype(g.dtype)], name)


def test_jvp_under_vmap_and_linearize():
  rng = np.random.default_rng(45)
  x = random_array(rng, (4, 10, 6), F32)
  tx = random_array(rng, (4, 10, 6), F32)
  w = random_array(rng, (6, 3), F32)
  s = np.array([0, 3, -1, 20], np.int32)
  res = []
  for gemm in (dyn.gemm, dyn.reference.gemm):
    f = lambda x, s: gemm(dyn.window(x, (s, 0), (4, 6)), w, alpha=2.0)
    jv = jax.vmap(lambda x, t, s: jax.jvp(lambda x: f(x, s), (x,), (t,)))
    y, lin = jax.linearize(lambda x: jax.vmap(f)(x, s), x)
    res.append((jax.jit(jv)(x, tx, s), y, lin(tx)))
  (jd, yd, ld), (jr, yr, lr) = res
  assert_close(jd[0], jr[0], 1e-5)
  assert_close(jd[1], jr[1], 1e-5)
  assert_close(yd, yr, 1e-5)
  assert_close(ld, lr, 1e-5)


def _both_close(fn, *args, tol=1e-5):
  """fn(gemm) built for dyn.gemm and for the reference agree on args."""
  got = jax.jit(fn(dyn.gemm))(*args)
  ref = jax.jit(fn(dyn.reference.gemm))(*args)
  for g, r in zip(jax.tree.leaves(got), jax.tree.leaves(ref)):
    assert g.shape == r.shape and g.dtype == r.dtype
    assert_close(g, r, tol)


def test_grad_when_a_and_b_are_one_array():
  """x @ x.T and windows of one array as both operands (bilinear in x)."""
  x = random_array(np.random.default_rng(50), (9, 7), F32)

  def fn(gemm):
    def f(x, s):
      y = gemm(x, x, transpose_b=True)
      z = gemm(dyn.window(x, (s, 0), (4, 7)), dyn.window(x, (s + 1, 0), (4, 7)),
               transpose_a=True)
      return jnp.sum(jnp.sin(y)) + jnp.sum(z ** 2)
    return jax.grad(f)
  _both_close(fn, x, jnp.int32(2))


def test_second_order_hessian_and_jvp_of_grad():
  rng = np.random.default_rng(51)
  x = random_array(rng, (5, 4), F32)
  o = random_array(rng, (7, 6), F32)

  def fn(gemm):
    def f(x, o):
      y = gemm(dyn.window(x, (1, 0), (3, 4)), x, transpose_b=True,
               out=dyn.window(o, (2, 1), (3, 5)))
      return jnp.sum(jnp.sin(y))
    return lambda x, o: (jax.hessian(f)(x, o),
                         jax.jvp(jax.grad(f, argnums=1), (x, o), (x, o))[1])
  _both_close(fn, x, o, tol=1e-4)


def test_grad_with_checkpoint():
  rng = np.random.default_rng(52)
  x = random_array(rng, (6, 6), F32)
  w = random_array(rng, (3, 6, 6), F32)

  def fn(gemm):
    @jax.checkpoint
    def layer(x, w, l):
      return jnp.tanh(gemm(x, dyn.window(w, (l, 0, 0), (6, 6))))

    def f(x, w):
      for l in range(3):
        x = layer(x, w, jnp.int32(l))
      return jnp.sum(x ** 2)
    return jax.grad(f, argnums=(0, 1))
  _both_close(fn, x, w)


def test_linear_transpose_and_window_as_jit_argument():
  rng = np.random.default_rng(53)
  x = random_array(rng, (6, 5), F32)
  b = random_array(rng, (5, 4), F32)
  ct = random_array(rng, (3, 4), F32)

  def fn(gemm):
    def f(x, ct):
      t = jax.linear_transpose(
          lambda a: gemm(dyn.window(a, (2, 0), (3, 5)), b), x)(ct)[0]
      # a Window is a pytree: it can be a jit argument
      w = jax.jit(lambda w: gemm(w, b))(dyn.window(x, (1, 0), (3, 5)))
      return t, w
    return f
  _both_close(fn, x, ct)
