"""Ragged windows through `jax_dynoff.gemm` (the CPU handler; on a GPU the
plain kernels inside XLA window ops, ragged_staging.py), against
`jax_dynoff.reference` (whose rule tests/test_ragged_reference.py checks
against numpy): masked reads, writes of the valid part only (the rest of a
poisoned out bit for bit), vmap over groups with batched starts and valid
extents, gradients, `fori_loop` and `cond` with sizes computed on the
device, and the CUDA lowering.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

import jax_dynoff as dyn
from checks import assert_ragged_dot_grads_equal_lax, bits, fused_swiglu_into
from jax_dynoff import plan
from jax_dynoff import reference as ref
from jax_dynoff.extension import ext
from jax_dynoff.spec import call_attrs

F32, BF16, F16 = jnp.float32, jnp.bfloat16, jnp.float16


@pytest.fixture(params=["native", "staged"])
def route(request, monkeypatch):
  """native: the backend's own way (on the CPU, the handler); staged: the
  CUDA lowering's XLA window ops around a plain gemm, here on the CPU."""
  if request.param == "staged":
    from jax_dynoff import lowering  # pylint: disable=g-import-not-at-top
    monkeypatch.setattr(lowering, "_lower_cpu_args",
                        lowering._lower_cuda_staged)
  jax.clear_caches()  # no lowering of the other route reused
  yield request.param
  jax.clear_caches()

def _bits(a):
  a = np.asarray(a)
  return a.view(np.uint16 if a.dtype.itemsize == 2 else np.uint32)


def _same(got, want, tol):
  """NaN (the poison) exactly where the reference has it, the rest bit for
  bit where the reference left it alone, values within tol elsewhere."""
  g, w = np.asarray(got, np.float32), np.asarray(want, np.float32)
  np.testing.assert_array_equal(np.isnan(g), np.isnan(w))
  ok = ~np.isnan(w)
  np.testing.assert_allclose(g[ok], w[ok], rtol=tol, atol=tol)


def _case(seed):
  """A random call with every operand ragged: (f(mod, *args), args, dtype)."""
  r = np.random.default_rng(seed)
  dt = [F32, BF16, F16][seed % 3]
  m, n, k = (int(v) for v in r.integers(1, 24, 3))
  ta, tb = bool(r.integers(2)), bool(r.integers(2))
  ash = (k, m) if ta else (m, k)
  bsh = (n, k) if tb else (k, n)
  out_dt = F32 if seed % 2 else dt

  def operand(shape, dtype, lead=0):
    dims = (3,) * lead + tuple(s + int(r.integers(0, 5)) for s in shape)
    x = jnp.asarray(r.standard_normal(dims), dtype)
    start = [int(r.integers(-2, d + 2)) for d in dims]
    valid = [int(r.integers(0, s + 1)) for s in shape]
    return x, start, valid

  a, sa, va = operand(ash, dt, lead=1)
  b, sb, vb = operand(bsh, dt)
  c, sc, vc = operand((m, n), out_dt)
  o, so, vo = operand((m, n), out_dt)
  o = jnp.full(o.shape, jnp.nan, out_dt)
  # Which entries are traced (the rest Python ints).
  traced = [bool(v) for v in r.integers(0, 2, 10)]

  def call(mod, a, b, c, o, *dynamic):
    it = iter(dynamic)
    val = lambda v, i: next(it) if traced[i] else v
    wa = dyn.window(a, [val(sa[0], 0), val(sa[1], 1), sa[2]], ash,
                    valid=(val(va[0], 2), va[1]))
    wb = dyn.window(b, [sb[0], val(sb[1], 3)], bsh, valid=(vb[0],
                                                           val(vb[1], 4)))
    wc = dyn.window(c, [val(sc[0], 5), sc[1]], (m, n),
                    valid=(val(vc[0], 6), vc[1]))
    wo = dyn.window(o, [so[0], val(so[1], 7)], (m, n),
                    valid=(val(vo[0], 8), val(vo[1], 9)))
    kw = dict(alpha=0.75, beta=-0.5, transpose_a=ta, transpose_b=tb,
              preferred_element_type=out_dt)
    return mod.gemm(wa, wb, wc, out=wo, **kw), mod.gemm(wa, wb, wc, **kw)

  values = [sa[0], sa[1], va[0], sb[1], vb[1], sc[0], vc[0], so[1], vo[0],
            vo[1]]
  dynamic = [jnp.int32(v) for v, t in zip(values, traced) if t]
  return call, (a, b, c, o, *dynamic), dt


@pytest.mark.parametrize("seed", range(24))
def test_gemm_equals_the_reference(seed, route):
  call, args, dt = _case(seed)
  got = jax.jit(functools.partial(call, dyn))(*args)
  want = jax.jit(functools.partial(call, ref))(*args)
  tol = 1e-5 if dt == F32 else 1e-2
  for g, w in zip(got, want):
    _same(g, w, tol)
  # Outside out's valid part, out comes back bit for bit (all NaN there).
  g, w = _bits(got[0]), _bits(want[0])
  keep = np.isnan(np.asarray(want[0], np.float32))
  np.testing.assert_array_equal(g[keep], w[keep])


def _experts(r, tokens, e, d, f):
  x = jnp.asarray(r.standard_normal((tokens, d)), F32)
  w = jnp.asarray(r.standard_normal((e, d, f)), F32)
  return x, w


@pytest.mark.parametrize("sizes", [[5, 0, 9, 2], [16, 0, 0, 0], [0, 0, 0, 0],
                                   [1, 2, 3, 4]])
def test_vmap_over_groups(sizes, route):
  """One batched call: group g's rows (a ragged window at its offset) times
  its weight; batched starts, batched valid extents, with C."""
  r = np.random.default_rng(1)
  x, w = _experts(r, 16, 4, 8, 6)
  c = jnp.asarray(r.standard_normal((16, 6)), F32)
  gs = jnp.asarray(sizes, jnp.int32)
  offs = jnp.cumsum(gs) - gs

  def group(mod, g, off, size):
    return mod.gemm(dyn.window(x, (off, 0), (16, 8), valid=(size, 8)),
                    dyn.window(w, (g, 0, 0), (8, 6)),
                    dyn.window(c, (off, 0), (16, 6), valid=(size, 6)),
                    beta=2.0)

  g = jnp.arange(4, dtype=jnp.int32)
  got = jax.jit(jax.vmap(functools.partial(group, dyn)))(g, offs, gs)
  want = jax.vmap(functools.partial(group, ref))(g, offs, gs)
  _same(got, want, 1e-5)


def test_ragged_dot_as_a_loop_with_sizes_from_the_device(route):
  """Tokens routed to experts on the device (sizes by bincount), then one
  gemm per expert in a fori_loop writing its rows of one out: equals
  lax.ragged_dot."""
  r = np.random.default_rng(2)
  x, w = _experts(r, 40, 5, 12, 7)
  logits = jnp.asarray(r.standard_normal((40, 5)), F32)

  @jax.jit
  def moe(x, w, logits):
    expert = jnp.argmax(logits, axis=1)
    order = jnp.argsort(expert)
    xs = x[order]
    gs = jnp.bincount(expert, length=5).astype(jnp.int32)
    offs = jnp.cumsum(gs) - gs

    def body(i, out):
      return dyn.gemm(
          dyn.window(xs, (offs[i], 0), (40, 12), valid=(gs[i], 12)),
          dyn.window(w, (i, 0, 0), (12, 7)),
          out=dyn.window(out, (offs[i], 0), (40, 7), valid=(gs[i], 7)))

    out = lax.fori_loop(0, 5, body, jnp.zeros((40, 7), F32))
    return out, lax.ragged_dot(xs, w, gs, precision=lax.Precision.HIGHEST)

  got, want = moe(x, w, logits)
  np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_cond_picks_the_valid_extent(route):
  r = np.random.default_rng(3)
  x, w = _experts(r, 12, 1, 8, 4)
  o = jnp.full((12, 4), jnp.nan, F32)

  def f(mod, flag, v):
    def run(v):
      return mod.gemm(dyn.window(x, (2, 0), (8, 8), valid=(v, 8)), w[0],
                      out=dyn.window(o, (2, 0), (8, 4), valid=(v, 4)))
    return lax.cond(flag, lambda: run(v), lambda: run(v // 2))

  for flag in (True, False):
    got = jax.jit(functools.partial(f, dyn))(flag, jnp.int32(7))
    want = functools.partial(f, ref)(flag, jnp.int32(7))
    _same(got, want, 1e-5)


@pytest.mark.parametrize("ta", [False, True])
def test_gradients_equal_the_reference(ta, route):
  """d/dx and d/dw through ragged A and out windows (with ta the ragged
  dim is the contraction: the weight gradient's case)."""
  r = np.random.default_rng(4)
  x = jnp.asarray(r.standard_normal((14, 9)), F32)
  w = jnp.asarray(r.standard_normal((9, 5) if not ta else (14, 5)), F32)
  o = jnp.asarray(r.standard_normal((9 if ta else 14, 5)), F32)

  def loss(mod, x, w, o, s, v):
    if ta:  # x^T @ w over v rows of both: (9, 5)
      y = mod.gemm(dyn.window(x, (s, 0), (14, 9), valid=(v, 9)),
                   dyn.window(w, (s, 0), (14, 5), valid=(v, 5)),
                   transpose_a=True)
      return jnp.sum(jnp.sin(y))
    y = mod.gemm(dyn.window(x, (s, 0), (8, 9), valid=(v, 9)), w,
                 out=dyn.window(o, (s, 0), (8, 5), valid=(v, 5)))
    return jnp.sum(jnp.sin(y))

  args = (x, w, o, jnp.int32(9), jnp.int32(5))
  got = jax.jit(jax.grad(functools.partial(loss, dyn), argnums=(0, 1, 2)))(
      *args)
  want = jax.grad(functools.partial(loss, ref), argnums=(0, 1, 2))(*args)
  for g, wv in zip(got, want):
    np.testing.assert_allclose(g, wv, rtol=1e-5, atol=1e-5)


def test_lowerings():
  """The CPU handler takes the ragged call (its attributes mark A and out
  ragged: they carry valid extents); on CUDA one plain call (no operand
  carries any) between XLA ops."""
  x = jnp.ones((8, 8), F32)
  f = lambda x, v: dyn.gemm(dyn.window(x, (0, 0), (8, 8), valid=(v, 8)), x,
                            out=dyn.window(x, (0, 0), (8, 8), valid=(v, 8)))

  def ragged_operands(platform):
    text = jax.jit(f).trace(x, jnp.int32(3)).lower(
        lowering_platforms=(platform,)).as_text()
    calls = [l for l in text.splitlines() if "jax_dynoff_gemm" in l and
             "custom_call" in l]
    return [l.count("valid_slots = ") for l in calls]

  assert ragged_operands("cpu") == [2]
  assert ragged_operands("cuda") == [0]


def test_grouped_plan_and_its_reasons():
  """bfloat16 ragged rows plan one grouped launch; a valid extent along a
  contiguous dim that is dynamic or not 16 bytes a multiple, a C read, or
  float32 plan the composed call, and explain says why."""
  from jax_dynoff import plan  # pylint: disable=g-import-not-at-top
  x = jnp.ones((64, 32), BF16)
  w = jnp.ones((32, 48), BF16)

  def f(valid_cols, c=None, x=x, w=w):
    def g(x, w, v):
      return dyn.gemm(dyn.window(x, (v, 0), (16, 32), valid=(v, 32)), w, c,
                      out=dyn.window(jnp.zeros((64, 48), x.dtype), (v, 0),
                                     (16, 48), valid=(v, valid_cols(v))))
    return plan.explain_calls(g, x, w, jnp.int32(5))[0]

  assert f(lambda v: 48).startswith("sm90_grouped")
  assert f(lambda v: 40).startswith("sm90_grouped")
  line = f(lambda v: v)
  assert line.startswith("composed") and "n: d's valid columns are dynamic" \
      in line, line
  line = f(lambda v: 44)
  assert "n = 44 along a contiguous dim is not a multiple of 8" in line, line
  line = f(lambda v: 48, c=jnp.ones((16, 48), BF16))
  assert "C is read" in line, line
  line = f(lambda v: 48, x=x.astype(F32), w=w.astype(F32))
  assert "no grouped kernel" in line, line


@pytest.mark.parametrize("dt, out, tile", [
    (BF16, None, "wide"), (F16, None, "wide"),
    (BF16, F32, "medium"), (F16, F32, "medium"),  # wide not built for them
])
def test_grouped_tile_planned(dt, out, tile):
  """ragged_dot plans the wide grouped tile for 16-bit NN, the medium one
  where the wide one is not built (a float32 result); 128 rows a group are
  past the small-group forward kernel's bound, which explain says."""
  from jax_dynoff import plan  # pylint: disable=g-import-not-at-top
  x = jnp.ones((1024, 64), dt)
  w = jnp.ones((8, 64, 64), dt)
  gs = jnp.full((8,), 128, jnp.int32)
  [line] = plan.explain_calls(
      lambda a, b, g: dyn.ragged_dot(a, b, g, preferred_element_type=out),
      x, w, gs)
  tm, tn = plan.GROUPED_TILES[tile]
  assert line.startswith(
      f"sm90_grouped (one grouped launch over 8 items, {tile} tile "
      f"{tm}x{tn}, not the small-group forward kernel: mean rows per item "
      f"1024 / 8 > {plan.SMALL_GROUP_FWD_MAX_MEAN_ROWS}, problem shapes"), line


@pytest.mark.parametrize("dt, tile, want", [
    (BF16, "medium", "medium tile 128x128 (forced)"),
    (BF16, "wide", "wide tile 128x256 (forced)"),
    (F16, "medium", "medium tile 128x128 (forced)"),
    (F16, "wide", "wide tile 128x256 (forced)"),
    # The wide tile is not built for a float32 result.
    ((BF16, F32), "wide", "medium tile 128x128, not the small-group"),
])
def test_grouped_tile_forced(dt, tile, want):
  """KernelOptions(grouped_tile=...) forces a grouped tile where it is
  built; elsewhere the planner's own choice runs."""
  from jax_dynoff import plan  # pylint: disable=g-import-not-at-top
  dt, out = dt if isinstance(dt, tuple) else (dt, None)
  x = jnp.ones((512, 64), dt)
  w = jnp.ones((4, 64, 64), dt)
  gs = jnp.full((4,), 128, jnp.int32)
  opts = dyn.KernelOptions(grouped_tile=tile)
  [line] = plan.explain_calls(
      lambda a, b, g: dyn.ragged_dot(a, b, g, opts=opts,
                                     preferred_element_type=out), x, w, gs)
  assert want in line, line
  with pytest.raises(ValueError, match="grouped_tile"):
    dyn.KernelOptions(grouped_tile="huge")


RAGGED_DOT_SIZES = [[5, 0, 11, 4], [20, 0, 0, 0], [0, 0, 0, 20], [3, 4, 2, 1],
                    [0, 0, 0, 0], [12, 9, 6, 3]]  # the last sums past m


@pytest.mark.parametrize("sizes", RAGGED_DOT_SIZES)
@pytest.mark.parametrize("dt", [F32, BF16])
def test_ragged_dot_equals_lax(sizes, dt, route):
  """dyn.ragged_dot (one call whose items share the out; composed: its
  items in a fori_loop) against lax.ragged_dot: empty groups, one group
  holding every row, sums below and past m."""
  r = np.random.default_rng(7)
  lhs = jnp.asarray(r.standard_normal((20, 24)), dt)
  rhs = jnp.asarray(r.standard_normal((4, 24, 16)), dt)
  gs = jnp.asarray(sizes, jnp.int32)
  kw = dict(precision=lax.Precision.HIGHEST, preferred_element_type=F32)
  want = lax.ragged_dot(lhs, rhs, gs, **kw)
  got = jax.jit(functools.partial(dyn.ragged_dot, **kw))(lhs, rhs, gs)
  assert got.dtype == F32
  np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)
  assert jax.jit(dyn.ragged_dot)(lhs, rhs, gs).dtype == dt


@pytest.mark.parametrize("sizes", RAGGED_DOT_SIZES[:4])
def test_ragged_dot_gradients_equal_lax(sizes, route):
  assert_ragged_dot_grads_equal_lax(dyn.ragged_dot, sizes, 8)


def test_ragged_dot_under_vmap(route):
  """A vmap over ragged_dot (a batch of token sets, each with its own group
  sizes): the items of each batch element share that element's out."""
  r = np.random.default_rng(9)
  lhs = jnp.asarray(r.standard_normal((3, 20, 8)), F32)
  rhs = jnp.asarray(r.standard_normal((4, 8, 8)), F32)
  gs = jnp.asarray([[5, 0, 11, 4], [20, 0, 0, 0], [3, 4, 2, 1]], jnp.int32)
  p = lax.Precision.HIGHEST
  got = jax.jit(jax.vmap(lambda a, g: dyn.ragged_dot(a, rhs, g, precision=p)))(
      lhs, gs)
  for i in range(3):
    np.testing.assert_allclose(
        got[i], lax.ragged_dot(lhs[i], rhs, gs[i], precision=p), rtol=1e-5,
        atol=1e-4)


def test_ragged_dot_checks_its_arguments():
  lhs, rhs = jnp.zeros((8, 4)), jnp.zeros((2, 4, 3))
  gs = jnp.asarray([4, 4], jnp.int32)
  with pytest.raises(ValueError, match="rhs's k = 5"):
    dyn.ragged_dot(lhs, jnp.zeros((2, 5, 3)), gs)
  with pytest.raises(TypeError, match="one dtype"):
    dyn.ragged_dot(lhs, rhs.astype(BF16), gs)
  with pytest.raises(ValueError, match="group_offset must be a"):
    dyn.ragged_dot(lhs, rhs, gs, group_offset=jnp.int32(0))


def _swiglu_numpy(lhs, rhs, sizes, group_offset=0):
  """silu(gate) * up of lax.ragged_dot's rows in float64, written
  independently of the library: rhs's columns interleaved gate / up."""
  x, w = np.asarray(lhs, np.float64), np.asarray(rhs, np.float64)
  out = np.zeros((x.shape[0], w.shape[2] // 2))
  start = 0
  for g, size in enumerate(np.asarray(sizes)):
    size = int(min(max(size, 0), x.shape[0] - start))
    e = g - group_offset
    if 0 <= e < w.shape[0] and size:
      h = x[start:start + size] @ w[e]
      gate, up = h[:, 0::2], h[:, 1::2]
      out[start:start + size] = gate / (1 + np.exp(-gate)) * up
    start += size
  return out


@pytest.mark.parametrize("sizes", RAGGED_DOT_SIZES)
@pytest.mark.parametrize("dt", [F32, BF16])
def test_ragged_dot_swiglu(sizes, dt, route):
  """activation="swiglu": silu(gate) * up over interleaved columns, (m,
  n / 2), rows of no group zero; the same as the reference and as float64
  NumPy; interleave_gate_up turns [gate | up] halves into the layout."""
  r = np.random.default_rng(11)
  lhs = jnp.asarray(r.standard_normal((20, 24)), dt)
  halves = jnp.asarray(r.standard_normal((4, 24, 16)), dt)
  rhs = dyn.interleave_gate_up(halves)
  np.testing.assert_array_equal(rhs[..., 0::2], halves[..., :8])
  np.testing.assert_array_equal(rhs[..., 1::2], halves[..., 8:])
  gs = jnp.asarray(sizes, jnp.int32)
  f = jax.jit(functools.partial(dyn.ragged_dot, activation="swiglu",
                                precision=lax.Precision.HIGHEST,
                                preferred_element_type=F32))
  got = f(lhs, rhs, gs)
  assert got.shape == (20, 8) and got.dtype == F32
  np.testing.assert_allclose(got, _swiglu_numpy(lhs, rhs, gs), rtol=1e-4,
                             atol=1e-3)
  want = ref.ragged_dot(lhs, rhs, gs, precision=lax.Precision.HIGHEST,
                        preferred_element_type=F32, activation="swiglu")
  np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
  assert jax.jit(functools.partial(dyn.ragged_dot, activation="swiglu"))(
      lhs, rhs, gs).dtype == dt


def test_ragged_dot_swiglu_gradients_and_expert_shard(route):
  """The gradient wrt lhs and rhs through the activation equals the
  reference's (pure jax); with a group_offset the other groups' rows are
  zeros."""
  r = np.random.default_rng(12)
  lhs = jnp.asarray(r.standard_normal((20, 8)), F32)
  rhs = jnp.asarray(r.standard_normal((4, 8, 6)), F32)
  gs = jnp.asarray([5, 0, 11, 4], jnp.int32)
  p = lax.Precision.HIGHEST
  dy = jnp.asarray(r.standard_normal((20, 3)), F32)

  def loss(fn, a, b):
    return jnp.sum(fn(a, b, gs, precision=p, activation="swiglu") * dy)

  got = jax.jit(jax.grad(functools.partial(loss, dyn.ragged_dot),
                         argnums=(0, 1)))(lhs, rhs)
  want = jax.grad(functools.partial(loss, ref.ragged_dot),
                  argnums=(0, 1))(lhs, rhs)
  for g, w in zip(got, want):
    np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-4)
  off = jnp.asarray([1], jnp.int32)
  got = jax.jit(lambda a, b: dyn.ragged_dot(
      a, b, gs, precision=p, group_offset=off, activation="swiglu"))(
          lhs, rhs[:2])
  np.testing.assert_allclose(got, _swiglu_numpy(lhs, rhs[:2], gs, 1),
                             rtol=1e-4, atol=1e-4)


def test_ragged_dot_swiglu_checks_its_arguments():
  lhs, gs = jnp.zeros((8, 4)), jnp.asarray([4, 4], jnp.int32)
  with pytest.raises(ValueError, match="activation must be None or one of"):
    dyn.ragged_dot(lhs, jnp.zeros((2, 4, 6)), gs, activation="gelu")
  with pytest.raises(ValueError, match="n = 5"):
    dyn.ragged_dot(lhs, jnp.zeros((2, 4, 5)), gs, activation="swiglu")
  with pytest.raises(ValueError, match="last dim must be even"):
    dyn.interleave_gate_up(jnp.zeros((2, 4, 5)))


# --- The fused swiglu call (epilogue "swiglu": one call, out (m, n / 2)) ---


def _fused_specs(f, *args):
  return [s for s in plan.traced_specs(f, *args) if s.epilogue == "swiglu"]


def _swiglu_data(seed, dt, m=40, k=32, n=48, g=4):
  r = np.random.default_rng(seed)
  lhs = jnp.asarray(r.uniform(-1, 1, (m, k)), dt)
  rhs = jnp.asarray(r.uniform(-1, 1, (g, k, n)) / np.sqrt(k), dt)
  return lhs, rhs


FUSED_SIZES = [[10, 0, 17, 5], [40, 0, 0, 0], [0, 0, 0, 0], [3, 1, 2, 30],
               [30, 20, 0, 9]]  # the last sums past m


@pytest.mark.parametrize("sizes", FUSED_SIZES)
@pytest.mark.parametrize("dt", [BF16, F16])
def test_fused_swiglu_equals_numpy_and_the_reference(sizes, dt, route):
  """bfloat16 / float16 swiglu is one call with the swiglu epilogue
  (planned on the fused grouped kernel), whose result is float64 NumPy's
  and the reference's to the output dtype's rounding, rows of no group
  zero."""
  lhs, rhs = _swiglu_data(21, dt)
  gs = jnp.asarray(sizes, jnp.int32)
  f = functools.partial(dyn.ragged_dot, activation="swiglu")
  [spec] = _fused_specs(f, lhs, rhs, gs)
  assert plan.grouped_tile(spec) == "wide"
  got = jax.jit(f)(lhs, rhs, gs)
  assert got.shape == (40, 24) and got.dtype == dt
  want = _swiglu_numpy(lhs, rhs, gs)
  np.testing.assert_allclose(np.asarray(got, np.float32), want, rtol=2 ** -7,
                             atol=2 ** -8)
  np.testing.assert_allclose(
      np.asarray(got, np.float32),
      np.asarray(ref.ragged_dot(lhs, rhs, gs, activation="swiglu"),
                 np.float32), rtol=2 ** -7, atol=2 ** -8)
  np.testing.assert_array_equal(np.asarray(got, np.float32)[sum(sizes):], 0)


@pytest.mark.parametrize("offset", [0, 1, 2, -1])
def test_fused_swiglu_group_offset(offset, route):
  """group_offset on the fused call: rhs's 2 experts from the offset on
  (clamped), rows of the other groups zeros."""
  lhs, rhs4 = _swiglu_data(22, BF16)
  gs = jnp.asarray([10, 7, 13, 5], jnp.int32)
  first = min(max(offset + 4 if offset < 0 else offset, 0), 2)
  go = jnp.asarray([offset], jnp.int32)
  f = lambda a, b: dyn.ragged_dot(a, b, gs, group_offset=go,
                                  activation="swiglu")
  assert len(_fused_specs(f, lhs, rhs4[first:first + 2])) == 1
  got = jax.jit(f)(lhs, rhs4[first:first + 2])
  np.testing.assert_allclose(
      np.asarray(got, np.float32),
      _swiglu_numpy(lhs, rhs4[first:first + 2], gs, first), rtol=2 ** -7,
      atol=2 ** -8)


@pytest.mark.parametrize("dt", [BF16, F16])
def test_fused_swiglu_leaves_the_rest_of_out_alone(dt, route):
  """Into a NaN-poisoned out wider than n / 2: the groups' rows of the
  window get silu(gate) * up, every other element (rows past the groups,
  the columns past the window) keeps its bits."""
  lhs, rhs = _swiglu_data(23, dt)
  sizes = np.asarray([9, 0, 14, 6], np.int32)
  offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int32)
  out = jnp.full((40, 24 + 8), jnp.nan, dt)
  got = jax.jit(fused_swiglu_into)(lhs, rhs, jnp.asarray(offsets),
                             jnp.asarray(sizes), out)
  rows = int(sizes.sum())
  want = _swiglu_numpy(lhs, rhs, sizes)
  np.testing.assert_allclose(np.asarray(got[:rows, :24], np.float32),
                             want[:rows], rtol=2 ** -7, atol=2 ** -8)
  np.testing.assert_array_equal(bits(got[rows:]), bits(out[rows:]))
  np.testing.assert_array_equal(bits(got[:, 24:]), bits(out[:, 24:]))


@pytest.mark.parametrize("dt", [BF16, F16])
def test_fused_swiglu_gradients(dt, route):
  """The fused call's custom vjp (the float32 product again, d gate and
  d up, the two gradient calls) against the reference's gradient, and the
  gradient calls are plain grouped ones."""
  lhs, rhs = _swiglu_data(24, dt)
  gs = jnp.asarray([10, 0, 17, 5], jnp.int32)
  dy = jnp.asarray(np.random.default_rng(5).uniform(-1, 1, (40, 24)), F32)

  def loss(fn, a, b):
    return jnp.sum(fn(a, b, gs, activation="swiglu").astype(F32) * dy)

  grad = jax.grad(functools.partial(loss, dyn.ragged_dot), argnums=(0, 1))
  specs = plan.traced_specs(grad, lhs, rhs)
  assert [s.epilogue for s in specs] == ["swiglu", "none", "none", "none"]
  got = jax.jit(grad)(lhs, rhs)
  want = jax.grad(functools.partial(loss, ref.ragged_dot),
                  argnums=(0, 1))(lhs.astype(F32), rhs.astype(F32))
  for g, w in zip(got, want):
    assert g.dtype == dt
    np.testing.assert_allclose(np.asarray(g, np.float32), w, rtol=2 ** -6,
                               atol=2 ** -6)


def test_fused_swiglu_under_vmap(route):
  """A vmap over the fused ragged_dot: each batch element's own sizes."""
  r = np.random.default_rng(25)
  lhs = jnp.asarray(r.uniform(-1, 1, (3, 40, 32)), BF16)
  _, rhs = _swiglu_data(25, BF16)
  gs = jnp.asarray([[10, 0, 17, 5], [40, 0, 0, 0], [0, 3, 2, 1]], jnp.int32)
  f = jax.vmap(lambda a, g: dyn.ragged_dot(a, rhs, g, activation="swiglu"))
  assert len(_fused_specs(f, lhs, gs)) == 1
  got = jax.jit(f)(lhs, gs)
  for i in range(3):
    np.testing.assert_allclose(np.asarray(got[i], np.float32),
                               _swiglu_numpy(lhs[i], rhs, gs[i]),
                               rtol=2 ** -7, atol=2 ** -8)


def test_swiglu_composed_where_no_fused_kernel_serves():
  """float32, a float32 result of 16-bit inputs, an out whose width is not
  16 bytes, a K along the contiguous dim that is not, or
  KernelOptions(sm90=False): the composed path (the product in float32
  through a plain grouped call, then XLA), no swiglu call at all."""
  gs = jnp.asarray([10, 0, 17, 5], jnp.int32)
  for dt, pref, k, n, opts in [(F32, None, 32, 48, None),
                               (BF16, F32, 32, 48, None),
                               (BF16, None, 32, 20, None),
                               (BF16, None, 21, 48, None),
                               (F16, None, 32, 48,
                                dyn.KernelOptions(sm90=False))]:
    lhs, rhs = _swiglu_data(26, dt, k=k, n=n)
    f = functools.partial(dyn.ragged_dot, activation="swiglu", opts=opts,
                          preferred_element_type=pref)
    specs = plan.traced_specs(f, lhs, rhs, gs)
    assert [s.epilogue for s in specs] == ["none"], (dt, pref, k, n)
    assert specs[0].out_dtype == F32
    got = jax.jit(f)(lhs, rhs, gs)
    assert got.shape == (40, n // 2)
    np.testing.assert_allclose(np.asarray(got, np.float32),
                               _swiglu_numpy(lhs, rhs, gs), rtol=2 ** -7,
                               atol=2 ** -8)


def _fused_spec(dt=BF16, n=48, **kw):
  lhs, rhs = _swiglu_data(27, dt, n=n)
  gs = jnp.asarray([10, 0, 17, 5], jnp.int32)
  [spec] = _fused_specs(functools.partial(dyn.ragged_dot, activation="swiglu",
                                          **kw), lhs, rhs, gs)
  return spec


def test_fused_swiglu_plan_and_launch():
  """The planner's fused line: the epilogue attribute reaches the planner
  (its explain, the wide tile even where another is forced) and the choice
  function (the swiglu kernel of the dtype); the plain call of the same
  shapes keeps its own kernel; a GPU of another kind composes it."""
  import dataclasses  # pylint: disable=g-import-not-at-top
  for dt, name in [(BF16, "kSm90GroupedSwigluWideBf16NN"),
                   (F16, "kSm90GroupedSwigluWideF16NN")]:
    spec = _fused_spec(dt)
    assert "silu(gate) * up fused" in plan.explain(spec)
    assert plan.plan(spec).path == "sm90_grouped"
    assert plan.launch_choice(spec)["kernel"] == name
    plain = dataclasses.replace(
        spec, epilogue="none",
        d=dataclasses.replace(spec.d, dims=(40, 48), win=(40, 48),
                              valid=(spec.d.valid[0], 48)), n=48)
    assert "Swiglu" not in plan.launch_choice(plain)["kernel"]
    assert "fused" not in plan.explain(plain)
  forced = _fused_spec(opts=dyn.KernelOptions(grouped_tile="medium"))
  assert plan.grouped_tile(forced) == "wide"
  assert plan.launch_choice(forced)["kernel"] == "kSm90GroupedSwigluWideBf16NN"
  a = ext.plan(call_attrs(_fused_spec()), 132, 8, 0)
  assert a["path"] == "generic" and "compute capability 8.0" in a["explain"]
  assert plan.launch_choice(_fused_spec(), sm90_device=False)["error"]


def test_fused_swiglu_zero_span_is_half_of_n():
  """The grouped item (plan.h GroupedItemOf, the pointer kernel's zeros):
  with the swiglu epilogue the kernel's n is h's (min of B's columns and
  twice D's) and the product covers D's n / 2 columns; zeros start there
  in the product's rows, and whole rows past them."""
  import dataclasses  # pylint: disable=g-import-not-at-top
  from jax_dynoff.spec import WinSpec  # pylint: disable=g-import-not-at-top
  a = WinSpec((40, 32), (40, 32), (0, 0), valid=(12, 32))
  b = WinSpec((32, 48), (32, 48), (0, 0))
  d = WinSpec((40, 24), (40, 24), (0, 0), valid=(20, 24))
  spec = dataclasses.replace(_fused_spec(), a=a, b=b, d=d, batch_shape=())
  item = ext.grouped_item(call_attrs(spec), 0)
  assert item == dict(m=12, n=48, k=32, dvr=20, dvc=24, covered=24)
  # Fewer valid columns of D than B's pairs: h's n follows D's.
  d16 = dataclasses.replace(d, valid=(20, 16))
  item = ext.grouped_item(call_attrs(dataclasses.replace(spec, d=d16)), 0)
  assert (item["n"], item["covered"], item["dvc"]) == (32, 16, 16)
  plain = dataclasses.replace(
      spec, epilogue="none", d=WinSpec((40, 48), (40, 48), (0, 0),
                                       valid=(20, 48)))
  assert ext.grouped_item(call_attrs(plain), 0)["covered"] == 48


def test_epilogue_errors():
  """The epilogue's static checks, at trace time, naming the argument;
  the extension refuses attributes that break them."""
  import dataclasses  # pylint: disable=g-import-not-at-top
  from jax_dynoff.signature import check_call  # pylint: disable=g-import-not-at-top
  x, w = jnp.zeros((8, 16), BF16), jnp.zeros((16, 12), BF16)
  out = jnp.zeros((8, 6), BF16)
  rag = dyn.window(out, (0, 0), (8, 6), valid=(4, 6))
  with pytest.raises(ValueError, match="epilogue must be None or one of"):
    check_call(x, w, out=rag, epilogue="gelu")
  with pytest.raises(ValueError, match="even n"):
    check_call(x, jnp.zeros((16, 11), BF16), out=rag, epilogue="swiglu")
  with pytest.raises(ValueError, match="takes no c"):
    check_call(x, w, jnp.zeros((8, 12), BF16), out=rag, epilogue="swiglu")
  with pytest.raises(ValueError, match="ragged out"):
    check_call(x, w, out=out, epilogue="swiglu")
  with pytest.raises(ValueError, match=r"\(m, n / 2\) = \(8, 6\)"):
    check_call(x, w, out=dyn.window(jnp.zeros((8, 12), BF16), (0, 0),
                                    (8, 12), valid=(4, 12)),
               epilogue="swiglu")
  spec = _fused_spec()
  with pytest.raises(ValueError, match="epilogue must be one of"):
    call_attrs(dataclasses.replace(spec, epilogue="gelu"))
  attrs = call_attrs(spec)
  assert attrs["epilogue"] == "swiglu"
  with pytest.raises(ValueError, match="attribute epilogue: unknown value"):
    ext.plan(dict(attrs, epilogue="gelu"), 132, 9, 0)
  wide = dict(attrs, d=dict(attrs["d"], win=(40, 48), dims=(40, 48)))
  with pytest.raises(ValueError, match=r"m, n / 2 \(epilogue swiglu\)"):
    ext.plan(wide, 132, 9, 0)
  odd = dict(attrs, n=47, b=dict(attrs["b"], win=(32, 47), dims=(32, 47)))
  with pytest.raises(ValueError, match="even n"):
    ext.plan(odd, 132, 9, 0)
  plain_d = dataclasses.replace(spec.d, valid=None)
  with pytest.raises(ValueError, match="ragged D"):
    ext.plan(call_attrs(dataclasses.replace(spec, d=plain_d)), 132, 9, 0)


def _run_on_four_cpus(script: str):
  """Runs `script` in a Python whose CPU backend has 4 devices; it must
  print OK."""
  import os  # pylint: disable=g-import-not-at-top
  import subprocess  # pylint: disable=g-import-not-at-top
  import sys  # pylint: disable=g-import-not-at-top
  env = dict(os.environ, JAX_PLATFORMS="cpu",
             PYTHONPATH=os.path.dirname(os.path.dirname(dyn.__file__)),
             XLA_FLAGS="--xla_force_host_platform_device_count=4")
  r = subprocess.run([sys.executable, "-c", script], env=env,
                     capture_output=True, text=True, timeout=300)
  assert r.returncode == 0 and "OK" in r.stdout, r.stdout + r.stderr[-3000:]


def test_ragged_dot_in_shard_map():
  """Rows split over devices, each shard with its own group sizes, rhs
  replicated: forward and gradients (the replicated rhs's summed over the
  devices) equal lax.ragged_dot's per shard; rows sharded over an
  automatic mesh axis under jit give lax.ragged_dot's result too."""
  script = """
import jax, jax.numpy as jnp, numpy as np
from jax import lax
from jax.sharding import PartitionSpec as P, AxisType, NamedSharding
import jax_dynoff as dyn
mesh = jax.make_mesh((4,), ("x",), axis_types=(AxisType.Auto,))
r = np.random.default_rng(0)
lhs = jnp.asarray(r.standard_normal((128, 16)), jnp.float32)
rhs = jnp.asarray(r.standard_normal((3, 16, 8)), jnp.float32)
gs = jnp.asarray(np.tile([10, 0, 20], 4).reshape(4, 3), jnp.int32)
p = lax.Precision.HIGHEST
f = jax.shard_map(lambda a, b, g: dyn.ragged_dot(a, b, g[0], precision=p),
                  mesh=mesh, in_specs=(P("x"), P(), P("x")), out_specs=P("x"))
want = jnp.concatenate([lax.ragged_dot(lhs[32 * i:32 * (i + 1)], rhs, gs[i],
                                       precision=p) for i in range(4)])
assert float(jnp.abs(jax.jit(f)(lhs, rhs, gs) - want).max()) < 1e-4
got = jax.jit(jax.grad(lambda a, b: jnp.sum(f(a, b, gs) ** 2), (0, 1)))(lhs, rhs)
ref = jax.grad(lambda a, b: sum(jnp.sum(lax.ragged_dot(
    a[32 * i:32 * (i + 1)], b, gs[i], precision=p) ** 2) for i in range(4)),
    (0, 1))(lhs, rhs)
for x, y in zip(got, ref):
  assert float(jnp.abs(x - y).max() / jnp.abs(y).max()) < 1e-5
ls = jax.device_put(lhs, NamedSharding(mesh, P("x")))
got = jax.jit(lambda a, b, g: dyn.ragged_dot(a, b, g, precision=p))(
    ls, rhs, gs[0])
assert float(jnp.abs(got - lax.ragged_dot(lhs, rhs, gs[0], precision=p)).max()) < 1e-4
print("OK")
"""
  _run_on_four_cpus(script)


def test_ragged_dot_takes_what_lax_ragged_dot_takes():
  """uint32 group sizes and a dot algorithm preset with a float32 result,
  as a MoE layer written for lax.ragged_dot passes them: the same result
  as int32 sizes at default precision."""
  r = np.random.default_rng(7)
  lhs = jnp.asarray(r.standard_normal((32, 16)), BF16)
  rhs = jnp.asarray(r.standard_normal((4, 16, 8)), BF16)
  sizes = np.asarray([9, 0, 13, 6])
  got = jax.jit(lambda l, w, g: dyn.ragged_dot(
      l, w, g, precision=jax.lax.DotAlgorithmPreset.BF16_BF16_F32,
      preferred_element_type=jnp.float32))(lhs, rhs, sizes.astype(np.uint32))
  want = dyn.reference.ragged_dot(lhs, rhs, sizes.astype(np.int32),
                                  preferred_element_type=jnp.float32)
  assert got.dtype == jnp.float32
  np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_ragged_dot_expert_parallel_in_shard_map():
  """rhs's experts split over an expert axis, each shard's group_offset
  its first expert, lhs and the group sizes replicated: the psum of the
  shards' results (each zero outside its groups' rows) and the gradients
  (lhs's summed over the shards, rhs's per shard) equal the whole
  ragged_dot's."""
  script = """
import jax, jax.numpy as jnp, numpy as np
from jax import lax
from jax.sharding import PartitionSpec as P, AxisType
import jax_dynoff as dyn
mesh = jax.make_mesh((4,), ("e",), axis_types=(AxisType.Auto,))
r = np.random.default_rng(0)
lhs = jnp.asarray(r.standard_normal((64, 16)), jnp.float32)
rhs = jnp.asarray(r.standard_normal((8, 16, 8)), jnp.float32)
gs = jnp.asarray([5, 0, 9, 12, 3, 7, 0, 20], jnp.int32)
p = lax.Precision.HIGHEST
def shard(a, b, g):
  o = (lax.axis_index("e") * b.shape[0]).astype(jnp.int32).reshape(1)
  return lax.psum(dyn.ragged_dot(a, b, g, precision=p, group_offset=o), "e")
f = jax.shard_map(shard, mesh=mesh, in_specs=(P(), P("e"), P()),
                  out_specs=P())
want = dyn.reference.ragged_dot(lhs, rhs, gs, precision=p)
assert float(jnp.abs(jax.jit(f)(lhs, rhs, gs) - want).max()) < 1e-4
got = jax.jit(jax.grad(lambda a, b: jnp.sum(f(a, b, gs) ** 2), (0, 1)))(lhs, rhs)
ref = jax.grad(lambda a, b: jnp.sum(dyn.reference.ragged_dot(
    a, b, gs, precision=p) ** 2), (0, 1))(lhs, rhs)
for x, y in zip(got, ref):
  assert float(jnp.abs(x - y).max() / jnp.abs(y).max()) < 1e-5
print("OK")
"""
  _run_on_four_cpus(script)


def test_ragged_dot_swiglu_expert_parallel_in_shard_map():
  """activation="swiglu" with each shard's experts at its group_offset:
  each shard's rows of other groups are zeros (silu(0) * 0), so the psum
  of the shards equals the whole layer's silu(gate) * up, rows past the
  groups zero, and the gradients agree with the reference's."""
  script = """
import jax, jax.numpy as jnp, numpy as np
from jax import lax
from jax.sharding import PartitionSpec as P, AxisType
import jax_dynoff as dyn
mesh = jax.make_mesh((4,), ("e",), axis_types=(AxisType.Auto,))
r = np.random.default_rng(1)
lhs = jnp.asarray(r.standard_normal((64, 16)), jnp.float32)
rhs = jnp.asarray(r.standard_normal((8, 16, 16)), jnp.float32)
gs = jnp.asarray([5, 0, 9, 12, 3, 7, 0, 20], jnp.int32)
p = lax.Precision.HIGHEST
def shard(a, b, g):
  o = (lax.axis_index("e") * b.shape[0]).astype(jnp.int32).reshape(1)
  return lax.psum(dyn.ragged_dot(a, b, g, precision=p, group_offset=o,
                                 activation="swiglu"), "e")
f = jax.shard_map(shard, mesh=mesh, in_specs=(P(), P("e"), P()),
                  out_specs=P())
want = dyn.reference.ragged_dot(lhs, rhs, gs, precision=p,
                                activation="swiglu")
got = jax.jit(f)(lhs, rhs, gs)
assert got.shape == (64, 8), got.shape
assert float(jnp.abs(got - want).max()) < 1e-4
assert float(jnp.abs(got[56:]).max()) == 0.0  # rows past the groups
got = jax.jit(jax.grad(lambda a, b: jnp.sum(f(a, b, gs) ** 2), (0, 1)))(lhs, rhs)
ref = jax.grad(lambda a, b: jnp.sum(dyn.reference.ragged_dot(
    a, b, gs, precision=p, activation="swiglu") ** 2), (0, 1))(lhs, rhs)
for x, y in zip(got, ref):
  assert float(jnp.abs(x - y).max() / jnp.abs(y).max()) < 1e-5
print("OK")
"""
  _run_on_four_cpus(script)


# --- The small-group weight-gradient kernel (grouped tile small_groups) ---


def _grad_specs(dt, m, groups, k=64, n=48, out=None, **opts):
  """The specs of jax.grad(ragged_dot) over (m, k) x (groups, k, n) (the
  forward, d lhs, d rhs), or with `out` the weight gradient alone as one
  vmapped gemm of transposed ragged windows into `out`'s dtype."""
  x = jnp.ones((m, k), dt)
  w = jnp.ones((groups, k, n), dt)
  gs = jnp.full((groups,), m // groups, jnp.int32)
  o = dyn.KernelOptions(**opts)
  if out is None:
    f = jax.grad(lambda a, b: jnp.sum(dyn.ragged_dot(
        a, b, gs, opts=o).astype(F32)), argnums=(0, 1))
    return plan.traced_specs(f, x, w)
  g = jnp.ones((m, n), dt)
  offs = jnp.arange(groups, dtype=jnp.int32) * (m // groups)

  def wgrad(x, g, offs, gs):
    return jax.vmap(lambda s, v: dyn.gemm(
        dyn.window(x, (s, 0), (m, k), valid=(v, k)),
        dyn.window(g, (s, 0), (m, n), valid=(v, n)), transpose_a=True,
        preferred_element_type=out, opts=o))(offs, gs)
  return plan.traced_specs(wgrad, x, g, offs, gs)


def _weight_grad_spec(*args, **kw):
  [spec] = [s for s in _grad_specs(*args, **kw) if s.trans_a]
  return spec


SMALL = plan.SMALL_GROUP_MAX_MEAN_ROWS


@pytest.mark.parametrize("dt, out, name", [
    (BF16, None, "kSm90SmallGroupGradBf16TN"),
    (F16, None, "kSm90SmallGroupGradF16TN"),
    (BF16, F32, "kSm90SmallGroupGradBf16F32TN"),
    (F16, F32, "kSm90SmallGroupGradF16F32TN"),
])
def test_small_group_grad_planned_for_decode_groups(dt, out, name):
  """A weight gradient over few rows per group (a decode-sized MoE
  layer: 1024 rows over 128 experts) runs the small-group kernel of its
  dtypes; the forward and d lhs of the same call run the small-group
  forward kernel (8 rows a group: under its own bound)."""
  spec = _weight_grad_spec(dt, 1024, 128, out=out)
  assert plan.grouped_tile(spec) == "small_groups"
  assert plan.launch_choice(spec)["kernel"] == name
  line = plan.explain(spec)
  assert "the small-group weight-gradient kernel" in line, line
  assert f"mean rows per item 1024 / 128 <= {SMALL}" in line, line
  if out is None:
    tiles = sorted(plan.grouped_tile(s) for s in _grad_specs(dt, 1024, 128))
    assert tiles == ["small_groups"] * 3, tiles


@pytest.mark.parametrize("dt", [BF16, F16])
def test_small_group_grad_threshold(dt):
  """The bound on the mean rows per group (capacity / groups) decides, and
  nothing else: at it the small-group kernel, 8 rows past it the CUTLASS
  grouped kernel (medium TN), and explain says why not."""
  groups = 8
  at = _weight_grad_spec(dt, SMALL * groups, groups)
  assert plan.grouped_tile(at) == "small_groups"
  past = _weight_grad_spec(dt, SMALL * groups + 8, groups)
  assert plan.grouped_tile(past) == "medium"
  assert plan.launch_choice(past)["kernel"].startswith("kSm90Grouped")
  line = plan.explain(past)
  assert (f"not the small-group weight-gradient kernel: mean rows per item "
          f"{SMALL * groups + 8} / {groups} > {SMALL}") in line, line
  tall = _weight_grad_spec(dt, 4096, 8)  # 512 rows a group
  assert plan.grouped_tile(tall) == "medium"


def test_small_group_grad_forced_either_way():
  """KernelOptions(grouped_tile=...) overrides the bound: "medium" runs
  the CUTLASS kernel on decode groups, "small_groups" the small-group
  kernel on tall ones (and the forward and d lhs the small-group forward
  kernel)."""
  spec = _weight_grad_spec(BF16, 1024, 128, grouped_tile="medium")
  assert plan.launch_choice(spec)["kernel"] == "kSm90GroupedBf16TN"
  specs = _grad_specs(BF16, 4096, 8, grouped_tile="small_groups")
  by_layout = {(s.trans_a, s.trans_b): plan.launch_choice(s)["kernel"]
               for s in specs}
  assert by_layout == {(False, False): "kSm90SmallGroupFwdBf16NN",
                       (False, True): "kSm90SmallGroupFwdBf16NT",
                       (True, False): "kSm90SmallGroupGradBf16TN"}
  line = plan.explain(_weight_grad_spec(BF16, 4096, 8,
                                        grouped_tile="small_groups"))
  assert "weight-gradient kernel (mma.sync, 128x128 output tiles, forced" \
      in line, line


def test_small_group_grad_refusals():
  """Where the grouped path cannot run the call (K or N not a multiple of
  8 elements, float32 inputs) it is composed, small groups or not; on
  another GPU or with unaligned buffers the choice function refuses the
  small-group line as it refuses every grouped one."""
  for kw in (dict(k=60), dict(n=44)):
    spec = _weight_grad_spec(BF16, 1024, 128, **kw)
    assert plan.grouped_tile(spec) is None
    assert plan.explain(spec).startswith("composed"), plan.explain(spec)
  spec = _weight_grad_spec(F32, 1024, 128)
  assert plan.grouped_tile(spec) is None
  assert "no grouped kernel" in plan.explain(spec)
  spec = _weight_grad_spec(BF16, 1024, 128)
  assert "compute capability 9.0" in plan.launch_choice(
      spec, sm90_device=False)["error"]
  assert "sm_90a" in plan.launch_choice(spec, sm90_built=False)["error"]
  assert "16-byte aligned" in plan.launch_choice(
      spec, bases_aligned=False)["error"]


def test_small_group_grad_zero_span():
  """The grouped item (plan.h GroupedItemOf): planned on the small-group
  kernel, an item without rows keeps its m and n (the kernel writes its
  zeros) and the pointer kernel has none to write; on the CUTLASS kernel
  it is no product at all and the pointer kernel zeros all of it."""
  import dataclasses  # pylint: disable=g-import-not-at-top
  from jax_dynoff.spec import WinSpec  # pylint: disable=g-import-not-at-top
  spec = _weight_grad_spec(BF16, 1024, 128)
  # One item of 64 rows' capacity (at the bound), none of them valid.
  a = WinSpec((64, 64), (64, 64), (0, 0), valid=(0, 64))
  b = WinSpec((64, 48), (64, 48), (0, 0), valid=(0, 48))
  d = WinSpec((64, 48), (64, 48), (0, 0))
  one = dataclasses.replace(spec, a=a, b=b, d=d, k=64, batch_shape=())
  p = plan.plan(one)
  assert p.kernel.grouped_tile == "small_groups"
  item = ext.grouped_item(plan.attrs(one, p), 0)
  assert item == dict(m=64, n=48, k=0, dvr=64, dvc=48, covered=48)
  cutlass = dataclasses.replace(p, kernel=dataclasses.replace(
      p.kernel, grouped_tile="medium"))
  item = ext.grouped_item(plan.attrs(one, cutlass), 0)
  assert item == dict(m=0, n=0, k=0, dvr=64, dvc=48, covered=0)
  rows = dataclasses.replace(one, a=dataclasses.replace(a, valid=(5, 64)),
                             b=dataclasses.replace(b, valid=(7, 48)))
  item = ext.grouped_item(plan.attrs(rows, p), 0)
  assert item == dict(m=64, n=48, k=5, dvr=64, dvc=48, covered=48)


@pytest.mark.parametrize("sizes", [[3, 0, 9, 1, 0, 2, 7, 0], [0] * 8,
                                   [12, 12, 12, 12, 0, 0, 0, 0]])
@pytest.mark.parametrize("dt", [BF16, F16])
def test_small_group_grad_equals_numpy(sizes, dt, route):
  """The gradients of a call planned on the small-group kernel (a few
  rows per group, empty groups, sums below m) are float64 NumPy's to the
  dtype's rounding on the CPU: the plan changes nothing there."""
  r = np.random.default_rng(31)
  m, k, n, g = 48, 24, 40, 8
  lhs = jnp.asarray(r.uniform(-1, 1, (m, k)), dt)
  rhs = jnp.asarray(r.uniform(-1, 1, (g, k, n)), dt)
  ct = jnp.asarray(r.uniform(-1, 1, (m, n)), dt)
  gs = jnp.asarray(sizes, jnp.int32)
  f = lambda a, b: jnp.sum(dyn.ragged_dot(a, b, gs).astype(F32)
                           * ct.astype(F32))
  assert "small_groups" in [plan.grouped_tile(s) for s in plan.traced_specs(
      jax.grad(f, argnums=(0, 1)), lhs, rhs)]
  _, drhs = jax.jit(jax.grad(f, argnums=(0, 1)))(lhs, rhs)
  x, c = np.asarray(lhs, np.float64), np.asarray(ct, np.float64)
  want = np.zeros((g, k, n))
  start = 0
  for e, s in enumerate(sizes):
    want[e] = x[start:start + s].T @ c[start:start + s]
    start += s
  np.testing.assert_allclose(np.asarray(drhs, np.float64), want,
                             rtol=2 ** -7, atol=2 ** -6)
  for e, s in enumerate(sizes):
    if s == 0:
      np.testing.assert_array_equal(_bits(drhs[e]), 0)


# --- The small-group forward kernel (grouped tile small_groups, NN / NT) ---

SMALL_FWD = plan.SMALL_GROUP_FWD_MAX_MEAN_ROWS


def _fwd_specs(dt, m, groups, k=64, n=48, out=None, **opts):
  """{layout: spec} of ragged_dot's calls over (m, k) x (groups, k, n) with
  m / groups rows a group: "NN" the forward (`out`: its
  preferred_element_type), "NT" the gradient wrt lhs (jax.grad: the
  input dtype's out), "TN" the weight gradient."""
  x = jnp.ones((m, k), dt)
  w = jnp.ones((groups, k, n), dt)
  gs = jnp.full((groups,), m // groups, jnp.int32)
  o = dyn.KernelOptions(**opts)
  f = jax.grad(lambda a, b: jnp.sum(dyn.ragged_dot(
      a, b, gs, preferred_element_type=out, opts=o).astype(F32)),
               argnums=(0, 1))
  specs = {}
  for s in plan.traced_specs(f, x, w):
    specs["TN" if s.trans_a else "NT" if s.trans_b else "NN"] = s
  assert sorted(specs) == ["NN", "NT", "TN"], specs
  return specs


def _nt_f32_spec(dt, m, groups, k=64, n=48, **opts):
  """x_g @ w[g]^T into float32 (ragged_dot's input-gradient call with a
  float32 out), as one call over the groups."""
  from jax_dynoff import ragged  # pylint: disable=g-import-not-at-top
  x = jnp.ones((m, n), dt)
  w = jnp.ones((groups, k, n), dt)
  sizes = jnp.full((groups,), m // groups, jnp.int32)
  offs = jnp.arange(groups, dtype=jnp.int32) * (m // groups)
  [spec] = plan.traced_specs(
      lambda x, w, o, s: ragged._rows_call(
          x, w, o, s, F32, True, None, dyn.KernelOptions(**opts)),
      x, w, offs, sizes)
  assert spec.trans_b and not spec.trans_a
  return spec


@pytest.mark.parametrize("dt, name", [(BF16, "Bf16"), (F16, "F16")])
def test_small_group_fwd_planned_for_decode_groups(dt, name):
  """ragged_dot's forward (NN) and gradient wrt lhs (NT) over few rows per
  group (1024 rows over 128 experts: 8 a group) run the small-group
  forward kernel of their dtypes, the weight gradient the small-group
  weight-gradient kernel; explain says which and why."""
  specs = _fwd_specs(dt, 1024, 128)
  want = {"NN": f"kSm90SmallGroupFwd{name}NN",
          "NT": f"kSm90SmallGroupFwd{name}NT",
          "TN": f"kSm90SmallGroupGrad{name}TN"}
  for layout, spec in specs.items():
    assert plan.grouped_tile(spec) == "small_groups", layout
    assert plan.launch_choice(spec)["kernel"] == want[layout]
  for layout in ("NN", "NT"):
    line = plan.explain(specs[layout])
    assert "the small-group forward kernel (mma.sync, operands swapped" \
        in line, line
    assert f"mean rows per item 1024 / 128 <= {SMALL_FWD}" in line, line
    assert "items without rows read nothing" in line, line


@pytest.mark.parametrize("dt, name", [(BF16, "Bf16"), (F16, "F16")])
def test_small_group_fwd_float32_out(dt, name):
  """preferred_element_type=float32: the forward's float32 line, and the
  NT call into float32 its own."""
  spec = _fwd_specs(dt, 1024, 128, out=F32)["NN"]
  assert spec.out_dtype == np.dtype(F32)
  assert plan.launch_choice(spec)["kernel"] == f"kSm90SmallGroupFwd{name}F32NN"
  spec = _nt_f32_spec(dt, 1024, 128)
  assert plan.grouped_tile(spec) == "small_groups"
  assert plan.launch_choice(spec)["kernel"] == f"kSm90SmallGroupFwd{name}F32NT"
  # Past the bound: the CUTLASS kernel's float32 lines (medium).
  spec = _fwd_specs(dt, 1024 + 8 * 64, 64, out=F32)["NN"]
  assert plan.launch_choice(spec)["kernel"] == f"kSm90Grouped{name}F32NN"
  spec = _nt_f32_spec(dt, 1024 + 8 * 64, 64)
  assert plan.launch_choice(spec)["kernel"] == f"kSm90Grouped{name}F32NT"


@pytest.mark.parametrize("dt", [BF16, F16])
def test_small_group_fwd_threshold(dt):
  """The bound on the mean rows per group (m / groups) decides, and
  nothing else: at it the small-group forward kernel (NN and NT), 8 rows
  past it the CUTLASS grouped kernel (NN wide, NT medium), and explain says
  why not; the weight gradient follows its own bound."""
  groups = 8
  at = _fwd_specs(dt, SMALL_FWD * groups, groups)
  assert plan.grouped_tile(at["NN"]) == "small_groups"
  assert plan.grouped_tile(at["NT"]) == "small_groups"
  past = _fwd_specs(dt, SMALL_FWD * groups + 8, groups)
  assert plan.grouped_tile(past["NN"]) == "wide"
  assert plan.grouped_tile(past["NT"]) == "medium"
  for layout in ("NN", "NT"):
    assert plan.launch_choice(past[layout])["kernel"].startswith(
        "kSm90Grouped")
    line = plan.explain(past[layout])
    assert (f"not the small-group forward kernel: mean rows per item "
            f"{SMALL_FWD * groups + 8} / {groups} > {SMALL_FWD}") in line, line
  # The weight gradient of the same call: 17 rows a group, under its bound.
  assert plan.grouped_tile(past["TN"]) == "small_groups"
  # One group of every row: the CUTLASS kernel.
  tall = _fwd_specs(dt, 4096, 1)
  assert [plan.grouped_tile(tall[l]) for l in ("NN", "NT", "TN")] == [
      "wide", "medium", "medium"]


def test_small_group_fwd_forced_either_way():
  """KernelOptions(grouped_tile=...) overrides the bound: "medium" runs
  the CUTLASS kernel on decode groups (NN, NT and TN), "small_groups" the
  small-group kernels on tall ones; "wide" is built for NN alone, so NT
  and TN ignore it (the planner's choice: the small-group kernels on
  decode groups)."""
  specs = _fwd_specs(BF16, 1024, 128, grouped_tile="medium")
  assert {l: plan.launch_choice(s)["kernel"] for l, s in specs.items()} == {
      "NN": "kSm90GroupedBf16NN", "NT": "kSm90GroupedBf16NT",
      "TN": "kSm90GroupedBf16TN"}
  specs = _fwd_specs(BF16, 4096, 8, grouped_tile="small_groups")
  assert {l: plan.launch_choice(s)["kernel"] for l, s in specs.items()} == {
      "NN": "kSm90SmallGroupFwdBf16NN", "NT": "kSm90SmallGroupFwdBf16NT",
      "TN": "kSm90SmallGroupGradBf16TN"}
  for layout in ("NN", "NT"):
    line = plan.explain(specs[layout])
    assert "the small-group forward kernel (mma.sync, operands swapped" \
        in line, line
    assert "rows padded to 8, forced, items without rows" in line, line
  specs = _fwd_specs(BF16, 1024, 128, grouped_tile="wide")
  assert {l: plan.launch_choice(s)["kernel"] for l, s in specs.items()} == {
      "NN": "kSm90GroupedWideBf16NN", "NT": "kSm90SmallGroupFwdBf16NT",
      "TN": "kSm90SmallGroupGradBf16TN"}
  assert "wide tile 128x256 (forced)" in plan.explain(specs["NN"])


def test_small_group_fwd_refusals():
  """Where the grouped path cannot run the call it is composed, small
  groups or not, with the reason: K or N not a multiple of 8 elements
  (the 16-byte chunks both grouped kernels move along contiguous dims),
  float32 inputs; on another GPU or with unaligned buffers the choice
  function refuses the small-group line as it refuses every grouped
  one."""
  # (The NT call's n is the forward's k.)
  for kw, reason in ((dict(k=60), "= 60 along a contiguous dim"),
                     (dict(n=44), "= 44 along a contiguous dim")):
    specs = _fwd_specs(BF16, 1024, 128, **kw)
    for layout in ("NN", "NT"):
      assert plan.grouped_tile(specs[layout]) is None
      line = plan.explain(specs[layout])
      assert line.startswith("composed"), line
      assert reason in line and "multiple of 8" in line, line
  specs = _fwd_specs(F32, 1024, 128)
  for layout in ("NN", "NT"):
    assert plan.grouped_tile(specs[layout]) is None
    assert "no grouped kernel" in plan.explain(specs[layout])
  spec = _fwd_specs(BF16, 1024, 128)["NN"]
  assert "compute capability 9.0" in plan.launch_choice(
      spec, sm90_device=False)["error"]
  assert "sm_90a" in plan.launch_choice(spec, sm90_built=False)["error"]
  assert "16-byte aligned" in plan.launch_choice(
      spec, bases_aligned=False)["error"]


@pytest.mark.parametrize("tile", [None, "medium", "wide"])
def test_small_group_fwd_keeps_the_fused_swiglu_kernel(tile):
  """ragged_dot(activation="swiglu") over decode groups keeps the fused
  CUTLASS kernel unless small_groups is forced, and explain says why not
  the small-group one; unforced, its gradient's plain calls (the product
  again in float32, d lhs, d rhs) take the small-group kernels."""
  x = jnp.ones((1024, 64), BF16)
  w = jnp.ones((128, 64, 96), BF16)
  gs = jnp.full((128,), 8, jnp.int32)
  o = dyn.KernelOptions(grouped_tile=tile)
  f = lambda a, b: dyn.ragged_dot(a, b, gs, activation="swiglu", opts=o)
  [spec] = plan.traced_specs(f, x, w)
  assert spec.epilogue == "swiglu"
  assert plan.launch_choice(spec)["kernel"] == "kSm90GroupedSwigluWideBf16NN"
  line = plan.explain(spec)
  if tile == "wide":  # forced: the tile it runs, no why-not
    assert "wide tile 128x256 (forced)" in line, line
    return
  # medium: not built for the swiglu epilogue, so not forced.
  assert (f"not the small-group forward kernel (mean rows per item 1024 / "
          f"128 <= {SMALL_FWD}): with the swiglu epilogue it runs only where "
          f"forced") in line, line
  if tile is not None:
    return
  g = jax.grad(lambda a, b: jnp.sum(f(a, b).astype(F32)), argnums=(0, 1))
  kernels = {(s.trans_a, s.trans_b, s.epilogue): plan.launch_choice(s)["kernel"]
             for s in plan.traced_specs(g, x, w)}
  assert kernels == {
      (False, False, "swiglu"): "kSm90GroupedSwigluWideBf16NN",
      (False, False, "none"): "kSm90SmallGroupFwdBf16F32NN",
      (False, True, "none"): "kSm90SmallGroupFwdBf16NT",
      (True, False, "none"): "kSm90SmallGroupGradBf16TN"}, kernels


@pytest.mark.parametrize("dt, name", [(BF16, "Bf16"), (F16, "F16")])
def test_small_group_swiglu_forced(dt, name):
  """KernelOptions(grouped_tile="small_groups") runs the swiglu call on the
  small-group forward kernel's swiglu line of its dtype, decode groups or
  tall ones; explain says so."""
  for m, groups in ((1024, 128), (4096, 8)):
    x = jnp.ones((m, 64), dt)
    w = jnp.ones((groups, 64, 96), dt)
    gs = jnp.full((groups,), m // groups, jnp.int32)
    o = dyn.KernelOptions(grouped_tile="small_groups")
    [spec] = plan.traced_specs(lambda a, b: dyn.ragged_dot(
        a, b, gs, activation="swiglu", opts=o), x, w)
    assert plan.grouped_tile(spec) == "small_groups"
    assert plan.launch_choice(spec)["kernel"] == (
        f"kSm90SmallGroupFwdSwiglu{name}NN")
    line = plan.explain(spec)
    assert "silu(gate) * up fused in its epilogue, the small-group forward " \
        "kernel (mma.sync, operands swapped" in line, line
    assert "forced" in line, line
  # Not built for a float32 result: composed, forced or not (ragged_dot
  # runs the product into float32, then XLA's activation).
  x = jnp.ones((1024, 64), BF16)
  w = jnp.ones((128, 64, 96), BF16)
  gs = jnp.full((128,), 8, jnp.int32)
  specs = plan.traced_specs(lambda a, b: dyn.ragged_dot(
      a, b, gs, activation="swiglu", preferred_element_type=F32, opts=o),
                            x, w)
  assert [s.epilogue for s in specs] == ["none"], specs


@pytest.mark.parametrize("sizes", FUSED_SIZES)
def test_small_group_swiglu_equals_numpy(sizes, route):
  """The forced small-group swiglu call is float64 NumPy's to bfloat16's
  rounding on the CPU, rows of no group zero: the plan changes nothing
  there."""
  lhs, rhs = _swiglu_data(27, BF16)
  gs = jnp.asarray(sizes, jnp.int32)
  o = dyn.KernelOptions(grouped_tile="small_groups")
  f = lambda a, b: dyn.ragged_dot(a, b, gs, activation="swiglu", opts=o)
  [spec] = _fused_specs(f, lhs, rhs)
  assert plan.grouped_tile(spec) == "small_groups"
  got = jax.jit(f)(lhs, rhs)
  want = _swiglu_numpy(lhs, rhs, gs)
  np.testing.assert_allclose(np.asarray(got, np.float32), want, rtol=2 ** -7,
                             atol=2 ** -8)
  used = min(sum(sizes), lhs.shape[0])
  np.testing.assert_array_equal(_bits(got[used:]), 0)


def test_small_group_fwd_item():
  """The grouped item (plan.h GroupedItemOf) of a forward planned on the
  small-group kernel: the rows' valid extent is m, an item without rows is
  no product at all (the kernel reads nothing for it, the pointer kernel
  has no zeros to write: D's valid rows are the item's rows)."""
  import dataclasses  # pylint: disable=g-import-not-at-top
  from jax_dynoff.spec import WinSpec  # pylint: disable=g-import-not-at-top
  spec = _fwd_specs(BF16, 1024, 128)["NN"]
  # One item of 16 rows' capacity (at the bound), 5 of them valid.
  a = WinSpec((16, 64), (16, 64), (0, 0), valid=(5, 64))
  b = WinSpec((64, 48), (64, 48), (0, 0))
  d = WinSpec((16, 48), (16, 48), (0, 0), valid=(5, 48))
  one = dataclasses.replace(spec, a=a, b=b, d=d, m=16, batch_shape=())
  p = plan.plan(one)
  assert p.kernel.grouped_tile == "small_groups"
  assert "kSm90SmallGroupFwdBf16NN" == plan.launch_choice(one)["kernel"]
  item = ext.grouped_item(plan.attrs(one, p), 0)
  assert item == dict(m=5, n=48, k=64, dvr=5, dvc=48, covered=48)
  none = dataclasses.replace(one, a=dataclasses.replace(a, valid=(0, 64)),
                             d=dataclasses.replace(d, valid=(0, 48)))
  item = ext.grouped_item(plan.attrs(none, p), 0)
  assert item == dict(m=0, n=0, k=0, dvr=0, dvc=48, covered=0)


def _fwd_numpy(lhs, rhs, sizes, transpose_b=False):
  """x_g @ rhs[g] (or rhs[g]^T) in float64 for every group, rows past the
  groups zero."""
  x, w = np.asarray(lhs, np.float64), np.asarray(rhs, np.float64)
  if transpose_b:
    w = np.swapaxes(w, 1, 2)
  out = np.zeros((x.shape[0], w.shape[2]))
  start = 0
  for e, s in enumerate(sizes):
    out[start:start + s] = x[start:start + s] @ w[e]
    start += s
  return out


@pytest.mark.parametrize("sizes", [[3, 0, 9, 1, 0, 2, 7, 0], [0] * 8,
                                   [6] * 8, [30, 0, 0, 0, 0, 0, 0, 18]])
@pytest.mark.parametrize("dt, out", [(BF16, None), (F16, None), (BF16, F32),
                                     (F16, F32)])
def test_small_group_fwd_equals_numpy(sizes, dt, out, route):
  """A forward and a gradient wrt lhs planned on the small-group forward
  kernel (few rows per group, empty groups, sums below m, a tall group)
  are float64 NumPy's to the dtype's rounding on the CPU, rows past the
  groups zeros: the plan changes nothing there."""
  r = np.random.default_rng(37)
  m, k, n, g = 48, 24, 40, 8
  lhs = jnp.asarray(r.uniform(-1, 1, (m, k)), dt)
  rhs = jnp.asarray(r.uniform(-1, 1, (g, k, n)), dt)
  ct = jnp.asarray(r.uniform(-1, 1, (m, n)), F32)
  gs = jnp.asarray(sizes, jnp.int32)
  fwd = lambda a, b: dyn.ragged_dot(a, b, gs, preferred_element_type=out)
  loss = lambda a, b: jnp.sum(fwd(a, b).astype(F32) * ct)
  specs = plan.traced_specs(jax.grad(loss, argnums=(0, 1)), lhs, rhs)
  tiles = {(s.trans_a, s.trans_b): plan.grouped_tile(s) for s in specs}
  assert tiles[(False, False)] == tiles[(False, True)] == "small_groups"
  got = jax.jit(fwd)(lhs, rhs)
  assert got.dtype == (out or dt)
  tol = 2 ** -12 if out == F32 else 2 ** -7
  want = _fwd_numpy(lhs, rhs, sizes)
  np.testing.assert_allclose(np.asarray(got, np.float64), want, rtol=tol,
                             atol=tol * np.abs(want).max(initial=1))
  np.testing.assert_array_equal(_bits(got[sum(sizes):]), 0)
  # d lhs = (ct's rows of each group, cast to lhs's dtype) @ rhs[g]^T: NT.
  dlhs, _ = jax.jit(jax.grad(loss, argnums=(0, 1)))(lhs, rhs)
  assert dlhs.dtype == dt
  want = _fwd_numpy(np.asarray(ct.astype(dt)), rhs, sizes, transpose_b=True)
  np.testing.assert_allclose(np.asarray(dlhs, np.float64), want,
                             rtol=2 ** -7,
                             atol=2 ** -7 * np.abs(want).max(initial=1))
  np.testing.assert_array_equal(_bits(dlhs[sum(sizes):]), 0)


@pytest.mark.parametrize("out_dt", [BF16, F32])
def test_small_group_fwd_into_a_poisoned_out(out_dt, route):
  """ragged_dot's NN and NT calls on the small-group forward kernel
  writing into a window (column 8) of a NaN-poisoned out: the groups' rows
  of the window hold the product, every other element keeps its bits."""
  from checks import rows_into  # pylint: disable=g-import-not-at-top
  r = np.random.default_rng(41)
  m, k, n, g = 48, 24, 40, 8
  sizes = np.asarray([3, 0, 9, 1, 0, 2, 7, 0], np.int32)
  offs = jnp.asarray(np.concatenate([[0], np.cumsum(sizes)[:-1]]), jnp.int32)
  lhs = jnp.asarray(r.uniform(-1, 1, (m, k)), BF16)
  for transpose_b in (False, True):
    rhs = jnp.asarray(r.uniform(-1, 1, (g, n, k) if transpose_b
                                else (g, k, n)), BF16)
    poison = jnp.full((m + 3, n + 16), jnp.nan, out_dt)
    f = lambda x, w, o, s, p: rows_into(x, w, o, s, p, col=8,
                                        transpose_b=transpose_b)
    args = (lhs, rhs, offs, jnp.asarray(sizes), poison)
    [spec] = plan.traced_specs(f, *args)
    assert plan.grouped_tile(spec) == "small_groups"
    got = np.asarray(jax.jit(f)(*args)).astype(np.float32)
    want = np.full(got.shape, np.nan, np.float32)
    want[:m, 8:8 + n] = np.where(
        (np.arange(m) < sizes.sum())[:, None],
        _fwd_numpy(lhs, rhs, sizes, transpose_b), np.nan)
    _same(got, want, 2 ** -12 if out_dt == F32 else 2 ** -7)
    outside = np.isnan(want)
    np.testing.assert_array_equal(_bits(np.asarray(jax.jit(f)(*args)))[outside],
                                  _bits(np.asarray(poison))[outside])
