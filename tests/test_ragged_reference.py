"""Ragged windows in the semantic oracle: `window(..., valid=(vr, vc))` in
`jax_dynoff.reference` against a numpy oracle written from the rule alone,
and `reference.ragged_dot` against `lax.ragged_dot`.

The rule: the capacity `shape` is static, vr / vc are clamped to it; the two
trailing starts follow lax.dynamic_slice with vr / vc in place of the
capacity (s < 0 -> s + dim, then clamped to [0, dim - v]); reads see zeros
outside the valid part; `out` is written only in its valid part.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

import jax_dynoff as dyn
from checks import assert_ragged_dot_grads_equal_lax
from jax_dynoff import reference as ref

F32, BF16 = jnp.float32, jnp.bfloat16


def _clamp(s: int, d: int, v: int) -> int:
  s = s + d if s < 0 else s
  return min(max(s, 0), d - v)


def _np_place(x, start, shape, valid):
  """(leading index, row start, col start, vr, vc) of a ragged window."""
  rows, cols = shape
  vr, vc = (min(max(int(v), 0), c) for v, c in zip(valid, shape))
  lead = tuple(_clamp(int(s), d, 1) for s, d in zip(start[:-2], x.shape))
  r0 = _clamp(int(start[-2]), x.shape[-2], vr)
  c0 = _clamp(int(start[-1]), x.shape[-1], vc)
  return lead, r0, c0, vr, vc


def np_read(x, start, shape, valid):
  x = np.asarray(x)
  lead, r0, c0, vr, vc = _np_place(x, start, shape, valid)
  out = np.zeros(shape, x.dtype)
  out[:vr, :vc] = x[lead][r0:r0 + vr, c0:c0 + vc]
  return out


def np_write(x, start, shape, valid, value):
  x = np.array(x)
  lead, r0, c0, vr, vc = _np_place(x, start, shape, valid)
  x[lead][r0:r0 + vr, c0:c0 + vc] = np.asarray(value)[:vr, :vc].astype(
      x.dtype)
  return x


def _as(v, how):
  """v as a Python int, a traced int32 or a traced int64 scalar."""
  return int(v) if how == "int" else {"i32": jnp.int32,
                                       "i64": jnp.int64}[how](v)


def _bits(a):
  a = np.asarray(a)
  return a.view(np.uint16 if a.dtype.itemsize == 2 else np.uint32)


# ----------------------------------------------------------------------------
# Windows
# ----------------------------------------------------------------------------

@pytest.mark.parametrize("seed", range(60))
def test_read_and_write_follow_the_rule(seed):
  """Random ranks, capacities, valid extents (0..capacity and beyond),
  starts (in range, negative, past the end), as Python ints and traced
  int32 scalars, under jit: reads equal the oracle, writes change exactly
  the valid part (the rest bit for bit)."""
  r = np.random.default_rng(seed)
  rank = int(r.integers(2, 4))
  dims = tuple(int(v) for v in r.integers(1, 12, rank))
  shape = tuple(int(r.integers(0, d + 1)) for d in dims[-2:])
  valid = [int(r.integers(-2, c + 3)) for c in shape]
  start = [int(r.integers(-d - 3, d + 4)) for d in dims]
  x = r.standard_normal(dims).astype(np.float32)
  hows = [str(r.choice(["int", "i32"])) for _ in range(rank + 2)]

  def read(x, *dyn_args):
    it = iter(dyn_args)
    s = [next(it) if h != "int" else v for v, h in zip(start, hows)]
    v = [next(it) if h != "int" else u for u, h in zip(valid, hows[rank:])]
    return ref.read_window(dyn.window(x, s, shape, valid=v))

  dyn_args = [_as(v, h) for v, h in zip(start + valid, hows) if h != "int"]
  got = jax.jit(read)(x, *dyn_args)
  np.testing.assert_array_equal(got, np_read(x, start, shape, valid))

  value = r.standard_normal(shape).astype(np.float32)

  def write(x, value, *dyn_args):
    it = iter(dyn_args)
    s = [next(it) if h != "int" else v for v, h in zip(start, hows)]
    v = [next(it) if h != "int" else u for u, h in zip(valid, hows[rank:])]
    return ref.write_window(dyn.window(x, s, shape, valid=v), value)

  poisoned = np.full(dims, np.nan, np.float32)
  got = jax.jit(write)(poisoned, value, *dyn_args)
  np.testing.assert_array_equal(
      _bits(got), _bits(np_write(poisoned, start, shape, valid, value)))


@pytest.mark.parametrize("how", ["int", "i32", "i64"])
def test_valid_equal_to_the_capacity_is_the_plain_window(how):
  """valid = shape gives today's window exactly: same start clamping (a
  start past the end clamps to dim - rows), same values, same writes."""
  with jax.enable_x64(how == "i64"):
    _capacity_is_plain(how)


def _capacity_is_plain(how):
  x = jnp.arange(7 * 9, dtype=F32).reshape(7, 9)
  for start in ((2, 3), (-1, -1), (100, -100), (5, 6)):
    plain = dyn.window(x, [_as(s, how) for s in start], (3, 4))
    full = dyn.window(x, [_as(s, how) for s in start], (3, 4),
                      valid=(_as(3, how), _as(4, how)))
    np.testing.assert_array_equal(ref.read_window(full),
                                  ref.read_window(plain))
    v = jnp.full((3, 4), -7.0, F32)
    np.testing.assert_array_equal(ref.write_window(full, v),
                                  ref.write_window(plain, v))


def test_a_window_at_the_end_keeps_its_start():
  """Capacity 4 at row 8 of 10 with 2 valid rows: the start stays 8 (the
  plain window would clamp to 6); with 3 valid rows it clamps to 7."""
  x = jnp.arange(10 * 3, dtype=F32).reshape(10, 3)
  got = ref.read_window(dyn.window(x, (8, 0), (4, 3), valid=(2, 3)))
  np.testing.assert_array_equal(got[:2], x[8:10])
  np.testing.assert_array_equal(got[2:], 0)
  got = ref.read_window(dyn.window(x, (jnp.int32(8), 0), (4, 3),
                                   valid=(jnp.int32(3), 3)))
  np.testing.assert_array_equal(got[:3], x[7:10])
  # Zero valid rows: nothing read, nothing written.
  got = ref.read_window(dyn.window(x, (9, 0), (4, 3), valid=(0, 3)))
  np.testing.assert_array_equal(got, 0)
  w = dyn.window(x, (9, 0), (4, 3), valid=(jnp.int32(0), 3))
  np.testing.assert_array_equal(ref.write_window(w, jnp.ones((4, 3))), x)


@pytest.mark.parametrize("valid,err,msg", [
    ((3,), ValueError, "valid must have 2 entries"),
    ((1, 2, 3), ValueError, "valid must have 2 entries"),
    (3, TypeError, "valid must be None or a pair"),
    ("ab", TypeError, "valid must be None or a pair"),
    ((1.0, 2), TypeError, "valid[0] must be an integer"),
    ((1, True), TypeError, "valid[1] must be an integer, got a bool"),
    ((jnp.float32(1), 2), TypeError, "valid[0] must be an integer scalar"),
    ((jnp.zeros((2,), jnp.int32), 2), ValueError,
     "valid[0] must be a scalar"),
    ((jnp.bool_(True), 2), TypeError, "valid[0] must be an integer"),
])
def test_bad_valid_is_named(valid, err, msg):
  x = jnp.zeros((6, 6), F32)
  with pytest.raises(err, match=msg.replace("[", r"\[").replace("]", r"\]")):
    dyn.window(x, (0, 0), (4, 4), valid=valid)


def test_valid_extents_of_any_integer_dtype():
  """Valid extents of any integer dtype, as starts take them, with their
  values."""
  x = jnp.asarray(np.arange(36, dtype=np.float32).reshape(6, 6))
  b = jnp.eye(4, dtype=F32)
  f = jax.jit(lambda v: dyn.gemm(
      dyn.window(x, (1, 0), (4, 4), valid=(v, 3)), b))
  want = np.zeros((4, 4), np.float32)
  want[:2, :3] = np.asarray(x)[1:3, :3]
  for dt in (np.int16, np.uint8, np.uint32):
    np.testing.assert_array_equal(f(np.asarray(2, dt)), want)


def test_an_array_is_not_a_valid_pair():
  with pytest.raises(TypeError, match="valid must be None or a pair"):
    dyn.window(jnp.zeros((6, 6), F32), (0, 0), (4, 4),
               valid=jnp.array([1, 2], jnp.int32))


def test_ragged_window_is_a_pytree_and_prints_its_extents():
  x = jnp.zeros((6, 6), F32)
  w = dyn.window(x, (jnp.int32(1), 0), (4, 4), valid=(jnp.int32(2), 4))
  leaves, tree = jax.tree_util.tree_flatten(w)
  back = jax.tree_util.tree_unflatten(tree, leaves)
  assert back.ragged and back.valid[1] == 4 and back.shape == (4, 4)
  assert "valid=(<int32 scalar>, 4)" in repr(w)
  assert not dyn.window(x, (0, 0), (4, 4)).ragged
  assert dyn.window(x, (0, 0), (4, 4), valid=(9, -1)).static_valid() == (4, 0)


# ----------------------------------------------------------------------------
# gemm with ragged windows
# ----------------------------------------------------------------------------

@pytest.mark.parametrize("seed", range(24))
def test_gemm_masks_reads_and_writes_only_the_valid_part(seed):
  """alpha * A^ @ B^ + beta * C^ with every operand ragged (transposes,
  traced extents from 0 to the capacity, starts near the arrays' ends),
  into a poisoned out whose every element outside its valid part comes
  back bit for bit; without out, the whole (m, n) result."""
  r = np.random.default_rng(100 + seed)
  m, n, k = (int(v) for v in r.integers(1, 9, 3))
  ta, tb = bool(r.integers(2)), bool(r.integers(2))
  ash = (k, m) if ta else (m, k)
  bsh = (n, k) if tb else (k, n)

  def operand(shape, seed_):
    dims = tuple(s + int(r.integers(0, 4)) for s in shape)
    x = r.standard_normal(dims).astype(np.float32)
    start = [int(r.integers(-2, d + 2)) for d in dims]
    valid = [int(r.integers(0, s + 1)) for s in shape]
    return x, start, valid

  (a, sa, va), (b, sb, vb), (c, sc, vc) = (
      operand(ash, 0), operand(bsh, 1), operand((m, n), 2))
  o, so, vo = operand((m, n), 3)
  o = np.full(o.shape, np.nan, np.float32)

  def call(mod, a, b, c, o, *ext):
    ia = iter(ext)
    wa = dyn.window(a, sa, ash, valid=(next(ia), va[1]))
    wb = dyn.window(b, sb, bsh, valid=(vb[0], next(ia)))
    wc = dyn.window(c, sc, (m, n), valid=(next(ia), vc[1]))
    wo = dyn.window(o, so, (m, n), valid=(next(ia), next(ia)))
    kw = dict(alpha=0.5, beta=-1.5, transpose_a=ta, transpose_b=tb,
              precision=lax.Precision.HIGHEST)
    return mod.gemm(wa, wb, wc, out=wo, **kw), mod.gemm(wa, wb, wc, **kw)

  ext = [jnp.int32(v) for v in (va[0], vb[1], vc[0], vo[0], vo[1])]
  got_out, got = jax.jit(functools.partial(call, ref))(a, b, c, o, *ext)

  an = np_read(a, sa, ash, va)
  bn = np_read(b, sb, bsh, vb)
  cn = np_read(c, sc, (m, n), vc)
  want = 0.5 * (an.T if ta else an) @ (bn.T if tb else bn) - 1.5 * cn
  np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
  want_out = np_write(o, so, (m, n), vo, want)
  written = ~np.isnan(want_out)
  np.testing.assert_array_equal(np.isnan(np.asarray(got_out)), ~written)
  np.testing.assert_allclose(np.asarray(got_out)[written], want_out[written],
                             rtol=1e-5, atol=1e-5)


def test_ragged_contraction_is_the_weight_gradient():
  """dW_g = X_g^T dY_g over size_g rows: A = X's rows transposed, B = dY's
  rows, both ragged along k (the rows), equal to the slices' product."""
  r = np.random.default_rng(7)
  x = r.standard_normal((20, 6)).astype(np.float32)
  dy = r.standard_normal((20, 5)).astype(np.float32)
  for off, size in ((3, 9), (0, 0), (12, 8), (0, 20)):
    got = ref.gemm(
        dyn.window(x, (jnp.int32(off), 0), (20, 6), valid=(jnp.int32(size),
                                                           6)),
        dyn.window(dy, (jnp.int32(off), 0), (20, 5), valid=(jnp.int32(size),
                                                            5)),
        transpose_a=True, precision=lax.Precision.HIGHEST)
    want = x[off:off + size].T @ dy[off:off + size]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


# ----------------------------------------------------------------------------
# ragged_dot
# ----------------------------------------------------------------------------

RAGGED_SIZES = [
    [5, 0, 11, 4],     # an empty group, sum = m
    [20, 0, 0, 0],     # one group holds every row
    [0, 0, 0, 20],     # ... the last one
    [3, 4, 2, 1],      # the sizes sum to less than the rows
    [0, 0, 0, 0],      # no rows at all
]


@pytest.mark.parametrize("sizes", RAGGED_SIZES)
@pytest.mark.parametrize("dt", [F32, BF16])
def test_ragged_dot_equals_lax(sizes, dt):
  r = np.random.default_rng(3)
  lhs = jnp.asarray(r.standard_normal((20, 24)), dt)
  rhs = jnp.asarray(r.standard_normal((4, 24, 10)), dt)
  gs = jnp.asarray(sizes, jnp.int32)
  kw = dict(precision=lax.Precision.HIGHEST, preferred_element_type=F32)
  want = lax.ragged_dot(lhs, rhs, gs, **kw)
  got = jax.jit(functools.partial(ref.ragged_dot, **kw))(lhs, rhs, gs)
  assert got.dtype == want.dtype == F32
  np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)
  # Rows past the groups are zeros.
  np.testing.assert_array_equal(got[sum(sizes):], 0)
  # Its own dtype by default, as lax.
  assert ref.ragged_dot(lhs, rhs, gs).dtype == dt


def test_ragged_dot_gradients_equal_lax():
  """Gradients with respect to lhs and rhs (the weight gradient is the
  ragged contraction) equal lax.ragged_dot's."""
  assert_ragged_dot_grads_equal_lax(ref.ragged_dot, [6, 0, 7], 4, m=16)


def test_ragged_dot_checks_its_arguments():
  lhs, rhs = jnp.zeros((8, 4)), jnp.zeros((2, 4, 3))
  gs = jnp.asarray([4, 4], jnp.int32)
  with pytest.raises(ValueError, match="lhs must be"):
    ref.ragged_dot(jnp.zeros((8,)), rhs, gs)
  with pytest.raises(ValueError, match="rhs must be"):
    ref.ragged_dot(lhs, jnp.zeros((4, 3)), gs)
  with pytest.raises(ValueError, match="k = 5"):
    ref.ragged_dot(lhs, jnp.zeros((2, 5, 3)), gs)
  with pytest.raises(ValueError, match="group_sizes must be"):
    ref.ragged_dot(lhs, rhs, jnp.asarray([8], jnp.int32))
  with pytest.raises(TypeError, match="group_sizes must be integers"):
    ref.ragged_dot(lhs, rhs, jnp.asarray([4.0, 4.0]))
  with pytest.raises(ValueError, match="group_offset must be a"):
    ref.ragged_dot(lhs, rhs, gs, group_offset=jnp.int32(0))
  with pytest.raises(ValueError, match="group_offset must be a"):
    ref.ragged_dot(lhs, rhs, gs, group_offset=jnp.zeros((1,)))
  with pytest.raises(ValueError, match="groups >= rhs's 2 experts"):
    ref.ragged_dot(lhs, rhs, jnp.asarray([8], jnp.int32),
                   group_offset=jnp.zeros((1,), jnp.int32))



@pytest.mark.parametrize("dtype", [np.uint32, np.uint8, np.int8, np.int16,
                                   np.uint16])
def test_ragged_dot_takes_any_integer_group_sizes(dtype):
  """group_sizes of any integer dtype, as lax.ragged_dot takes them, mean
  the same sizes; an unsigned size past int32's range is cut at m like any
  size past the rows, never wrapped negative."""
  r = np.random.default_rng(3)
  lhs = jnp.asarray(r.standard_normal((16, 8)), jnp.float32)
  rhs = jnp.asarray(r.standard_normal((3, 8, 5)), jnp.float32)
  want = ref.ragged_dot(lhs, rhs, jnp.asarray([6, 0, 7], jnp.int32))
  got = ref.ragged_dot(lhs, rhs, jnp.asarray([6, 0, 7], dtype))
  np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
  np.testing.assert_allclose(
      got, jax.lax.ragged_dot(lhs, rhs, jnp.asarray([6, 0, 7], dtype)),
      rtol=1e-5, atol=1e-5)
  if dtype == np.uint32:  # 2^32 - 16: past every row, not -16
    big = ref.ragged_dot(lhs, rhs, jnp.asarray([6, 2**32 - 16, 7], dtype))
    want = ref.ragged_dot(lhs, rhs, jnp.asarray([6, 16, 7], jnp.int32))
    np.testing.assert_array_equal(np.asarray(big), np.asarray(want))


@pytest.mark.parametrize("impl", [ref.ragged_dot, dyn.ragged_dot],
                         ids=["reference", "gemm"])
def test_group_offset_is_one_expert_parallel_shard(impl):
  """rhs as the 2 experts from group_offset on (the offset traced, as a
  shard's is): each shard's result holds its groups' rows and zeros
  elsewhere; the shards sum to the whole ragged_dot, their gradients wrt
  lhs sum and wrt rhs stack to its gradients.  An offset past the groups
  is clamped as lax.dynamic_slice clamps a start."""
  r = np.random.default_rng(5)
  lhs = jnp.asarray(r.standard_normal((24, 8)), jnp.float32)
  rhs = jnp.asarray(r.standard_normal((6, 8, 5)), jnp.float32)
  gs = jnp.asarray([3, 0, 7, 4, 2, 5], jnp.int32)
  ct = jnp.asarray(r.standard_normal((24, 5)), jnp.float32)

  def loss(l, w, o):
    return jnp.sum(impl(l, w, gs, group_offset=o) * ct)

  shard = jax.jit(lambda l, w, o: impl(l, w, gs, group_offset=o))
  grad = jax.jit(jax.grad(loss, argnums=(0, 1)))
  whole = impl(lhs, rhs, gs)
  wl, ww = jax.grad(lambda l, w: jnp.sum(impl(l, w, gs) * ct),
                    argnums=(0, 1))(lhs, rhs)
  total, dl, dws = 0, 0, []
  ends = np.cumsum(np.asarray(gs))
  for s in range(0, 6, 2):
    o = jnp.asarray([s], jnp.int32)
    part = np.asarray(shard(lhs, rhs[s:s + 2], o))
    lo, hi = (ends[s - 1] if s else 0), ends[s + 1]
    np.testing.assert_array_equal(part[:lo], 0)
    np.testing.assert_array_equal(part[hi:], 0)
    total = total + part
    gl, gw = grad(lhs, rhs[s:s + 2], o)
    dl = dl + np.asarray(gl)
    dws.append(np.asarray(gw))
  np.testing.assert_allclose(total, whole, rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(dl, wl, rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(np.concatenate(dws), ww, rtol=1e-5, atol=1e-5)
  # Past the groups: clamped to the last 2 experts' groups.
  np.testing.assert_array_equal(
      np.asarray(shard(lhs, rhs[4:6], jnp.asarray([9], jnp.int32))),
      np.asarray(shard(lhs, rhs[4:6], jnp.asarray([4], jnp.int32))))
