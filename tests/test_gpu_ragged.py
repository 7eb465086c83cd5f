"""Ragged windows on the GPU: the grouped kernel (path sm90_grouped) against
the reference and lax.ragged_dot, with outputs poisoned first (NaN: every
element outside a valid part stays bit for bit), empty groups, one group
holding every row, sizes that sum to less (and more) than the rows, a
ragged K (the weight gradient), valid parts of D past A's or B's (zeros);
which kernel ran (the handler's log); a loop with sizes computed on the
device, captured into a CUDA graph and replayed with new sizes.

Skipped without a GPU; the grouped cases without a compute capability 9.0
one (elsewhere the calls are composed from XLA ops, which tests/
test_ragged.py covers on the CPU).
"""

from __future__ import annotations

import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

import jax_dynoff as dyn
from checks import bits, ref_highest, run_logged
from jax_dynoff import plan as plan_lib
from jax_dynoff.graphs import WHOLE_LOOP_GRAPHS


def _is_sm90() -> bool:
  if jax.default_backend() != "gpu":
    return False
  cc = getattr(jax.devices()[0], "compute_capability", "")
  return str(cc) in ("9.0", "90")


pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not _is_sm90(),
                                 reason="needs a compute capability 9.0 GPU")]

BF16, F16, F32 = jnp.bfloat16, jnp.float16, jnp.float32

SIZES = [
    [40, 0, 131, 29, 100],   # an empty group, sum = m (300)
    [300, 0, 0, 0, 0],       # one group holds every row
    [0, 0, 0, 0, 300],       # ... the last one
    [7, 64, 1, 0, 33],       # the sizes sum to less than the rows
    [0, 0, 0, 0, 0],         # no rows at all
    [200, 90, 50, 30, 10],   # past m: the tail is cut, as lax cuts it
]


def _data(seed, dt, m=300, k=136, n=200, g=5):
  r = np.random.default_rng(seed)
  lhs = jnp.asarray(r.uniform(-1, 1, (m, k)), dt)
  rhs = jnp.asarray(r.uniform(-1, 1, (g, k, n)) / np.sqrt(k), dt)
  ct = jnp.asarray(r.uniform(-1, 1, (m, n)), dt)
  return lhs, rhs, ct


def _err(got, want):
  g, w = np.asarray(got, np.float32), np.asarray(want, np.float32)
  if g.size == 0:  # nothing valid: nothing to compare
    return 0.0
  return float(np.abs(g - w).max() / max(1.0, np.abs(w).max()))


def _lax32(lhs, rhs, gs):
  """lax.ragged_dot in float32 at full precision: the exact result."""
  return lax.ragged_dot(lhs.astype(F32), rhs.astype(F32), gs,
                        precision=lax.Precision.HIGHEST)


@pytest.mark.parametrize("sizes", SIZES)
@pytest.mark.parametrize("dt", [BF16, F16])
def test_ragged_dot_matches_lax(sizes, dt):
  lhs, rhs, _ = _data(1, dt)
  gs = jnp.asarray(sizes, jnp.int32)
  paths = plan_lib.traced_paths(dyn.ragged_dot, lhs, rhs, gs)
  assert paths == ["sm90_grouped"], paths
  got = jax.jit(dyn.ragged_dot)(lhs, rhs, gs)
  assert got.dtype == dt
  assert _err(got, _lax32(lhs, rhs, gs)) < 2 ** -7
  np.testing.assert_array_equal(np.asarray(got[sum(sizes):], np.float32), 0)
  # float32 out from 16-bit inputs (preferred_element_type): its own
  # grouped kernel.
  f32 = lambda *a: dyn.ragged_dot(*a, preferred_element_type=F32)
  assert plan_lib.traced_paths(f32, lhs, rhs, gs) == ["sm90_grouped"]
  got32 = jax.jit(f32)(lhs, rhs, gs)
  assert got32.dtype == F32
  np.testing.assert_array_equal(np.asarray(got32[sum(sizes):]), 0)
  assert _err(got32, _lax32(lhs, rhs, gs)) < 2 ** -10 or dt == F16


@pytest.mark.parametrize("sizes", SIZES[:4])
@pytest.mark.parametrize("dt,out", [(BF16, None), (F16, None), (BF16, F32),
                                    (F16, F32)])
def test_ragged_dot_gradients_match_lax(sizes, dt, out):
  """d lhs (an NT grouped launch) and d rhs (TN: K is each group's rows,
  ragged; an empty group's gradient is zeros) against lax's, exact; for
  both 16-bit dtypes, with the forward's result in the input dtype or in
  float32."""
  lhs, rhs, ct = _data(2, dt)
  gs = jnp.asarray(sizes, jnp.int32)
  ours = lambda a, b, g: dyn.ragged_dot(a, b, g, preferred_element_type=out)

  def grads(f, cast):
    def loss(a, b):
      return jnp.sum(f(a, b, gs).astype(F32) * ct.astype(F32))
    return jax.grad(loss, argnums=(0, 1))(cast(lhs), cast(rhs))

  paths = plan_lib.traced_paths(
      jax.grad(lambda a, b: jnp.sum(ours(a, b, gs).astype(F32)),
               argnums=(0, 1)), lhs, rhs)
  assert paths == ["sm90_grouped"] * 3, paths
  got = jax.jit(lambda: grads(ours, lambda x: x))()
  want = grads(lambda a, b, g: lax.ragged_dot(
      a, b, g, precision=lax.Precision.HIGHEST), lambda x: x.astype(F32))
  for g, w in zip(got, want):
    assert _err(g, w) < 2 ** -6
  for i, s in enumerate(sizes):
    if s == 0:
      np.testing.assert_array_equal(np.asarray(got[1][i], np.float32), 0)


@pytest.mark.parametrize("offset", [0, 2, 3, -1, 10 ** 6, -(2 ** 31)])
@pytest.mark.parametrize("sizes", [SIZES[0], SIZES[3], SIZES[5]])
def test_group_offset_on_the_grouped_kernel(sizes, offset):
  """group_offset: rhs holds 2 of the 5 groups, from the offset on
  (clamped as lax.dynamic_slice clamps a start); the forward, d lhs and
  d rhs on the grouped kernel against the reference's, rows of the other
  groups (and their part of d lhs) zeros."""
  lhs, rhs5, ct = _data(3, BF16)
  gs = jnp.asarray(sizes, jnp.int32)
  first = min(max(offset + 5 if offset < 0 else offset, 0), 3)
  rhs = rhs5[first:first + 2]
  go = jnp.asarray([offset], jnp.int32)

  def grads(mod):
    def loss(a, b):
      return jnp.sum(mod.ragged_dot(a, b, gs, group_offset=go).astype(F32)
                     * ct.astype(F32))
    return jax.grad(loss, argnums=(0, 1))

  assert plan_lib.traced_paths(grads(dyn), lhs, rhs) == (
      ["sm90_grouped"] * 3)
  got = jax.jit(lambda a, b: dyn.ragged_dot(a, b, gs, group_offset=go))(
      lhs, rhs)
  want = ref_highest(lambda a, b: dyn.reference.ragged_dot(
      a.astype(F32), b.astype(F32), gs, group_offset=go))(lhs, rhs)
  assert _err(got, want) < 2 ** -7
  ends = np.minimum(np.cumsum(sizes), 300)
  starts = np.concatenate([[0], ends[:-1]])
  mine = np.zeros(300, bool)
  for g in (first, first + 1):
    mine[starts[g]:ends[g]] = True
  np.testing.assert_array_equal(np.asarray(got, np.float32)[~mine], 0)
  dl, dw = jax.jit(grads(dyn))(lhs, rhs)
  wl, ww = ref_highest(lambda a, b: grads(dyn.reference)(
      a.astype(F32), b.astype(F32)))(lhs, rhs)
  assert _err(dl, wl) < 2 ** -6 and _err(dw, ww) < 2 ** -6
  np.testing.assert_array_equal(np.asarray(dl, np.float32)[~mine], 0)


def _random_case(seed):
  """A vmap over G items of gemm with ragged windows: A rows (or, for a
  transposed A, its K rows) at batched starts with batched valid extents,
  B a batched stack (transposed or not), out a poisoned batched array
  whose valid part may exceed A's (the rest: zeros) or be empty."""
  r = np.random.default_rng(seed)
  dt = [BF16, BF16, BF16, F16][seed % 4]
  ta, tb = [(False, False), (False, True), (True, False), (False, False)][
      seed % 4]
  g = int(r.integers(1, 7))
  m, n, k = (8 * int(v) for v in r.integers(1, 40, 3))
  rows = m + 8 * int(r.integers(0, 8))
  a_shape = (rows, m if ta else k) if not ta else (rows + k, m)
  a = jnp.asarray(r.uniform(-1, 1, a_shape), dt)
  b = jnp.asarray(r.uniform(-1, 1, (g,) + ((n, k) if tb else (k, n))), dt)
  out = jnp.full((g, m + 16, n + 8), jnp.nan, dt)
  # Valid extents 0 .. capacity; starts anywhere (clamped), some at the end.
  cap_r = k if ta else m
  va = jnp.asarray(r.integers(0, cap_r + 1, g), jnp.int32)
  sa = jnp.asarray(r.integers(-4, a_shape[0] + 4, g), jnp.int32)
  vdr = jnp.asarray(r.integers(0, m + 1, g), jnp.int32)
  # D's valid columns run along its contiguous dim: static, 16 bytes a
  # multiple (plan.grouped_reasons), so the same for every item.
  vdc = 8 * int(r.integers(n // 16, n // 8 + 1))
  if ta:  # so are D's rows, the m that runs along A^T's contiguous dim
    vdr = 8 * int(r.integers(m // 16, m // 8 + 1))
  so = jnp.asarray(r.integers(0, 17, g), jnp.int32)

  def f(mod, a, b, out, sa, va, so, vdr):  # vdc (and vdr for ta): ints
    def item(b, out, sa, va, so, vdr, vdc):
      if ta:  # op(A) = A^T: K rows of A, ragged (a weight gradient)
        wa = dyn.window(a, (sa, 0), (k, m), valid=(va, m))
      else:
        wa = dyn.window(a, (sa, 0), (m, k), valid=(va, k))
      wo = dyn.window(out, (so, 0), (m, n), valid=(vdr, vdc))
      return mod.gemm(wa, b, out=wo, transpose_a=ta, transpose_b=tb)
    return jax.vmap(item, in_axes=(0, 0, 0, 0, 0, None if ta else 0, None))(
        b, out, sa, va, so, vdr, vdc)

  if ta:
    return (lambda mod, *x: f(mod, *x, vdr)), (a, b, out, sa, va, so)
  return f, (a, b, out, sa, va, so, vdr)


@pytest.mark.parametrize("seed", range(16))
def test_grouped_vmap_equals_the_reference(seed):
  f, args = _random_case(seed)
  paths = plan_lib.traced_paths(lambda *x: f(dyn, *x), *args)
  assert paths == ["sm90_grouped"], paths
  got = jax.jit(lambda *x: f(dyn, *x))(*args)
  want = ref_highest(lambda *x: f(dyn.reference, *x))(*args)
  g, w = np.asarray(got), np.asarray(want)
  nan = np.isnan(w.astype(np.float32))
  # Outside the valid parts: the poison, bit for bit.
  np.testing.assert_array_equal(bits(g)[nan], bits(w)[nan])
  assert not np.isnan(g.astype(np.float32)[~nan]).any()
  assert _err(g.astype(np.float32)[~nan], w.astype(np.float32)[~nan]) < 2 ** -6


# The grouped kernel of each tile for bfloat16 NN (ffi/kernels/launch.h).
NN_KERNELS = {"medium": "kSm90GroupedBf16NN",
              "wide": "kSm90GroupedWideBf16NN"}

_LOGGED_GRAD = textwrap.dedent("""
    import sys, json
    import jax, jax.numpy as jnp
    import jax_dynoff as dyn
    m, k, n, tile = json.loads(sys.argv[1])
    lhs = jnp.ones((m, k), jnp.bfloat16)
    rhs = jnp.ones((4, k, n), jnp.bfloat16)
    gs = jnp.asarray([m // 2, 0, m // 4, m // 4], jnp.int32)
    opts = dyn.KernelOptions(grouped_tile=tile)
    f = lambda a, b: jnp.sum(
        dyn.ragged_dot(a, b, gs, opts=opts).astype(jnp.float32))
    print(dyn.explain(lambda a, b: dyn.ragged_dot(a, b, gs, opts=opts),
                      lhs, rhs)[0])
    jax.block_until_ready(jax.jit(jax.value_and_grad(f, (0, 1)))(lhs, rhs))
""")


@pytest.mark.parametrize("tile", [None, *NN_KERNELS])
def test_grouped_kernels_ran(tile):
  """The handler's log: the forward is one grouped launch of the planned
  (or forced) tile's kernel, the gradient two more: d lhs on the medium
  tile (NT), d rhs (TN, 256 rows over 4 groups: 64 a group, at the
  small-group bound) on the small-group kernel, or on the medium tile
  where it is forced."""
  out, lines = run_logged(_LOGGED_GRAD, [256, 128, 192, tile])
  planned = tile or next(t for t in NN_KERNELS
                         if f"{t} tile" in out.splitlines()[0])
  small = tile != "medium" and 256 // 4 <= plan_lib.SMALL_GROUP_MAX_MEAN_ROWS
  tn = "kSm90SmallGroupGradBf16TN" if small else "kSm90GroupedBf16TN"
  kernels = sorted(l.split("kernel=")[1].split()[0] for l in lines)
  assert kernels == sorted(["kSm90GroupedBf16NT", tn,
                            NN_KERNELS[planned]]), (out, lines)
  assert all("planned=sm90_grouped" in l for l in lines), lines


def _moe_loop(mod):
  """A loop whose group sizes are computed on the device each iteration
  (rolled by the counter), each iteration one ragged_dot into the carry."""
  def f(lhs, rhs, base):
    def body(i, y):
      sizes = jnp.roll(base, i)
      return y + mod.ragged_dot(lhs, rhs, sizes).astype(F32)
    return lax.fori_loop(0, 4, body, jnp.zeros((lhs.shape[0], rhs.shape[2]),
                                               F32))
  return f


def _whole_loop_graph(f, *args):
  """`f` compiled as one CUDA graph, loop and all (its capture asserted),
  for replays with new group sizes in the same graph."""
  rep = dyn.check_capture(f, *args, compiler_options=WHOLE_LOOP_GRAPHS)
  assert rep.all_captured, rep.thunks
  return jax.jit(f).lower(*args).compile(compiler_options=WHOLE_LOOP_GRAPHS)


def test_loop_with_device_sizes_is_captured_and_replays():
  lhs, rhs, _ = _data(3, BF16)
  base = jnp.asarray(SIZES[0], jnp.int32)
  compiled = _whole_loop_graph(_moe_loop(dyn), lhs, rhs, base)
  ref = jax.jit(_moe_loop(dyn.reference))
  for sizes in SIZES:  # new sizes into the same graph
    s = jnp.asarray(sizes, jnp.int32)
    assert _err(compiled(lhs, rhs, s), ref(lhs, rhs, s)) < 2 ** -6, sizes


def test_composed_where_the_grouped_kernel_cannot_run():
  """float32 (no grouped kernel) is composed from XLA ops and a plain
  call, and still exact."""
  lhs, rhs, _ = _data(4, F32)
  gs = jnp.asarray(SIZES[0], jnp.int32)
  [line] = dyn.explain(dyn.ragged_dot, lhs, rhs, gs)
  assert line.startswith("composed") and "no grouped kernel" in line, line
  got = jax.jit(dyn.ragged_dot)(lhs, rhs, gs)
  assert _err(got, _lax32(lhs, rhs, gs)) < 2 ** -9


@pytest.mark.parametrize("tile", list(NN_KERNELS))
@pytest.mark.parametrize("sizes", SIZES)
@pytest.mark.parametrize("dt", [BF16, F16])
def test_grouped_tiles(sizes, tile, dt):
  """Each grouped tile, forced (KernelOptions(grouped_tile=...)): the
  same results as lax, rows past the groups zero."""
  lhs, rhs, _ = _data(5, dt)
  gs = jnp.asarray(sizes, jnp.int32)
  opts = dyn.KernelOptions(grouped_tile=tile)
  f = lambda a, b, g: dyn.ragged_dot(a, b, g, opts=opts)
  [line] = dyn.explain(f, lhs, rhs, gs)
  tm, tn = plan_lib.GROUPED_TILES[tile]
  assert f"{tile} tile {tm}x{tn} (forced)" in line, line
  got = jax.jit(f)(lhs, rhs, gs)
  assert _err(got, _lax32(lhs, rhs, gs)) < 2 ** -7
  np.testing.assert_array_equal(np.asarray(got[sum(sizes):], np.float32), 0)


# --- The small-group weight-gradient kernel (grouped tile small_groups) ----

SMALL_GRAD_KERNELS = {(BF16, BF16): "kSm90SmallGroupGradBf16TN",
                      (F16, F16): "kSm90SmallGroupGradF16TN",
                      (BF16, F32): "kSm90SmallGroupGradBf16F32TN",
                      (F16, F32): "kSm90SmallGroupGradF16F32TN"}

# Few rows per group (16 groups over 96 rows: 6 a group on average).
SMALL_SIZES = [
    [6] * 16,                                          # uniform
    [40, 0, 0, 1, 0, 9, 0, 0, 30, 0, 2, 0, 0, 14, 0, 0],  # skewed, empties
    [0] * 16,                                          # no rows at all
    [3, 1, 0, 2, 5, 0, 0, 4, 1, 1, 0, 0, 2, 0, 3, 1],  # sum 23 < m
    [0] * 15 + [96],                                   # one group, the last
]


def _dw64(lhs, ct, sizes, groups, first=0):
  """dW[e] = lhs_g^T ct_g (g = first + e) in float64, rows cut at m."""
  x, c = np.asarray(lhs, np.float64), np.asarray(ct, np.float64)
  out = np.zeros((groups, x.shape[1], c.shape[1]))
  start = 0
  for g, size in enumerate(np.asarray(sizes)):
    size = int(min(max(size, 0), x.shape[0] - start))
    if 0 <= g - first < groups:
      out[g - first] = x[start:start + size].T @ c[start:start + size]
    start += size
  return out


def _small_grad_data(seed, dt, m=96, k=136, n=200, g=16):
  r = np.random.default_rng(seed)
  lhs = jnp.asarray(r.uniform(-1, 1, (m, k)), dt)
  rhs = jnp.asarray(r.uniform(-1, 1, (g, k, n)) / np.sqrt(k), dt)
  ct = jnp.asarray(r.uniform(-1, 1, (m, n)), dt)
  return lhs, rhs, ct


def _dw_err(got, want):
  """Error of a dW against float64, relative to its largest element."""
  g = np.asarray(got, np.float64)
  return float(np.abs(g - want).max() / max(1.0, np.abs(want).max()))


@pytest.mark.parametrize("kn", [(136, 200), (264, 72), (128, 128)])
@pytest.mark.parametrize("sizes", SMALL_SIZES)
@pytest.mark.parametrize("dt", [BF16, F16])
def test_small_group_weight_grad(sizes, dt, kn):
  """jax.grad of ragged_dot over few rows per group: d rhs runs on the
  small-group kernel, against float64 NumPy and the reference: uniform,
  skewed and empty groups, sums below m, K and N multiples of 8 but not of
  128 (edge tiles); an empty group's dW is zeros bit for bit."""
  k, n = kn
  lhs, rhs, ct = _small_grad_data(11, dt, k=k, n=n)
  gs = jnp.asarray(sizes, jnp.int32)

  def grads(mod):
    def loss(a, b):
      return jnp.sum(mod.ragged_dot(a, b, gs).astype(F32) * ct.astype(F32))
    return jax.grad(loss, argnums=(0, 1))

  tiles = [plan_lib.grouped_tile(s)
           for s in plan_lib.traced_specs(grads(dyn), lhs, rhs)]
  # 6 rows a group: the forward and d lhs on the small-group forward
  # kernel too.
  assert tiles == ["small_groups"] * 3, tiles
  _, dw = jax.jit(grads(dyn))(lhs, rhs)
  assert dw.dtype == dt and dw.shape == rhs.shape
  assert _dw_err(dw, _dw64(lhs, ct, sizes, 16)) < 2 ** -7
  _, want = ref_highest(lambda a, b: grads(dyn.reference)(
      a.astype(F32), b.astype(F32)))(lhs, rhs)
  assert _err(dw, want) < 2 ** -7
  for e, size in enumerate(sizes):
    if size == 0:
      np.testing.assert_array_equal(bits(dw[e]), 0)


@pytest.mark.parametrize("offset", [0, 5, 12, -3, 10 ** 6])
@pytest.mark.parametrize("sizes", [SMALL_SIZES[1], SMALL_SIZES[3]])
def test_small_group_weight_grad_group_offset(sizes, offset):
  """group_offset: rhs holds 4 of the 16 groups from the offset on
  (clamped); d rhs on the small-group kernel holds their dW, zeros for
  the empty ones."""
  lhs, rhs16, ct = _small_grad_data(12, BF16)
  gs = jnp.asarray(sizes, jnp.int32)
  first = min(max(offset + 16 if offset < 0 else offset, 0), 12)
  rhs = rhs16[first:first + 4]
  go = jnp.asarray([offset], jnp.int32)
  loss = lambda a, b: jnp.sum(dyn.ragged_dot(
      a, b, gs, group_offset=go).astype(F32) * ct.astype(F32))
  specs = plan_lib.traced_specs(jax.grad(loss, argnums=1), lhs, rhs)
  assert "small_groups" in [plan_lib.grouped_tile(s) for s in specs]
  dw = jax.jit(jax.grad(loss, argnums=1))(lhs, rhs)
  assert _dw_err(dw, _dw64(lhs, ct, sizes, 4, first)) < 2 ** -7


@pytest.mark.parametrize("dt,out", list(SMALL_GRAD_KERNELS))
def test_small_group_weight_grad_into_a_poisoned_out(dt, out):
  """The dW call as a vmapped gemm of transposed ragged windows into a
  NaN-poisoned out (each item's K x N window at column 8 of a wider,
  taller array), in the input dtype and in float32: the window holds
  x_g^T ct_g (zeros for an empty group), everything else keeps its bits;
  the planned line is the small-group kernel of the dtypes."""
  sizes = np.asarray(SMALL_SIZES[1], np.int32)
  lhs, _, ct = _small_grad_data(13, dt, k=136, n=72)
  offs = jnp.asarray(np.concatenate([[0], np.cumsum(sizes)[:-1]]), jnp.int32)
  poison = jnp.full((16, 136 + 8, 72 + 16), jnp.nan, out)

  def f(mod, x, c, offs, gs, o):
    return jax.vmap(lambda s, v, o: mod.gemm(
        dyn.window(x, (s, 0), (96, 136), valid=(v, 136)),
        dyn.window(c, (s, 0), (96, 72), valid=(v, 72)), transpose_a=True,
        out=dyn.window(o, (0, 8), (136, 72))))(offs, gs, o)

  args = (lhs, ct, offs, jnp.asarray(sizes), poison)
  [spec] = plan_lib.traced_specs(lambda *a: f(dyn, *a), *args)
  assert plan_lib.grouped_tile(spec) == "small_groups"
  assert (plan_lib.launch_choice(spec)["kernel"]
          == SMALL_GRAD_KERNELS[(dt, out)])
  got = np.asarray(jax.jit(lambda *a: f(dyn, *a))(*args))
  assert not np.isnan(got[:, :136, 8:80].astype(np.float32)).any()
  assert _dw_err(got[:, :136, 8:80], _dw64(lhs, ct, sizes, 16)) < (
      2 ** -7 if out != F32 else 2 ** -12)
  inside = np.zeros(got.shape, bool)
  inside[:, :136, 8:80] = True
  np.testing.assert_array_equal(bits(got)[~inside],
                                bits(np.asarray(poison))[~inside])
  for e, size in enumerate(sizes):
    if size == 0:
      np.testing.assert_array_equal(bits(got[e, :136, 8:80]), 0)


_LOGGED_SMALL_GRAD = textwrap.dedent("""
    import sys, json
    import jax, jax.numpy as jnp
    import jax_dynoff as dyn
    dt, tile = json.loads(sys.argv[1])
    dt = jnp.dtype(dt)
    lhs = jnp.ones((512, 128), dt)   # 64 experts, 8 rows each
    rhs = jnp.ones((64, 128, 136), dt)
    gs = jnp.asarray([8] * 32 + [16] * 8 + [0] * 24, jnp.int32)
    opts = dyn.KernelOptions(grouped_tile=tile)
    f = lambda a, b: jnp.sum(
        dyn.ragged_dot(a, b, gs, opts=opts).astype(jnp.float32))
    dw = jax.jit(jax.grad(f, argnums=1))(lhs, rhs)
    print(float(dw[0, 0, 0]), float(dw[40, 0, 0]),
          float(dw.astype(jnp.float32).sum()))
""")


@pytest.mark.parametrize("dt", ["bfloat16", "float16"])
@pytest.mark.parametrize("tile", [None, "medium"])
def test_small_group_weight_grad_kernel_ran(dt, tile):
  """The handler's log: a decode-sized weight gradient runs the
  small-group kernel of its dtype (KernelOptions(grouped_tile="medium"):
  the CUTLASS one), with the same result."""
  out, lines = run_logged(_LOGGED_SMALL_GRAD, [dt, tile])
  kernels = [l.split("kernel=")[1].split()[0] for l in lines]
  name = "Bf16" if dt == "bfloat16" else "F16"
  want = (f"kSm90Grouped{name}TN" if tile == "medium"
          else f"kSm90SmallGroupGrad{name}TN")
  assert want in kernels, (out, lines)
  # dW[e] of ones: each element is the expert's rows; 8 * 32 + 16 * 8 rows
  # over 128 x 136 elements.
  first, empty, total = (float(v) for v in out.split())
  assert (first, empty, total) == (8.0, 0.0, 384.0 * 128 * 136)


# --- The small-group forward kernel (grouped tile small_groups, NN / NT) ---

SMALL_FWD_KERNELS = {(BF16, BF16): "kSm90SmallGroupFwdBf16{}",
                     (F16, F16): "kSm90SmallGroupFwdF16{}",
                     (BF16, F32): "kSm90SmallGroupFwdBf16F32{}",
                     (F16, F32): "kSm90SmallGroupFwdF16F32{}"}


def _dirichlet_sizes(seed, groups, m, alpha=0.3):
  """Dirichlet(alpha) shares of m rows, floored, the remainder to the
  largest (benchmarks/moe_peers.py's skewed decode)."""
  p = np.random.default_rng(seed).dirichlet([alpha] * groups)
  s = np.floor(p * m).astype(int)
  s[np.argmax(s)] += m - s.sum()
  return [int(v) for v in s]


# 16 groups over 256 rows (16 a group on average: at the forward's bound).
FWD_SIZES = [
    [16] * 16,                                           # uniform
    _dirichlet_sizes(5, 16, 256),                        # skewed, empties
    [0] * 16,                                            # no rows at all
    [3, 1, 0, 2, 5, 0, 0, 4, 1, 1, 0, 0, 2, 0, 3, 1],    # sum 23 < m
    [0] * 15 + [256],                                    # one tall group
    [65, 0, 0, 0, 129, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 62],  # chunk tails
    [200, 90] + [0] * 14,                                # past m: cut
]


def _fwd64(lhs, rhs, sizes, transpose_b=False, first=0, groups=None):
  """x_g @ rhs[g - first] (or its transpose) in float64 for the groups
  rhs holds, rows cut at m, every other row zero."""
  x, w = np.asarray(lhs, np.float64), np.asarray(rhs, np.float64)
  if transpose_b:
    w = np.swapaxes(w, 1, 2)
  groups = w.shape[0] if groups is None else groups
  out = np.zeros((x.shape[0], w.shape[2]))
  start = 0
  for g, size in enumerate(np.asarray(sizes)):
    size = int(min(max(size, 0), x.shape[0] - start))
    if 0 <= g - first < groups:
      out[start:start + size] = x[start:start + size] @ w[g - first]
    start += size
  return out


def _fwd_data(seed, dt, m=256, k=136, n=200, g=16):
  r = np.random.default_rng(seed)
  lhs = jnp.asarray(r.uniform(-1, 1, (m, k)), dt)
  rhs = jnp.asarray(r.uniform(-1, 1, (g, k, n)) / np.sqrt(k), dt)
  ct = jnp.asarray(r.uniform(-1, 1, (m, n)) / np.sqrt(n), dt)
  return lhs, rhs, ct


def _rel(got, want):
  """Error against float64, relative to the largest element."""
  g = np.asarray(got, np.float64)
  return float(np.abs(g - want).max(initial=0) /
               max(1.0, np.abs(want).max(initial=0)))


@pytest.mark.parametrize("kn", [(136, 200), (264, 72), (128, 128), (72, 136)])
@pytest.mark.parametrize("sizes", FWD_SIZES)
@pytest.mark.parametrize("dt, out", [(BF16, None), (F16, None), (BF16, F32)])
def test_small_group_fwd(sizes, dt, out, kn):
  """ragged_dot's forward (NN) and its gradient wrt lhs (NT) over few
  rows per group on the small-group forward kernel, against float64 NumPy
  and the reference: uniform, skewed and empty groups, sums below and past
  m, tall groups of several 64-row chunks with tails, K and N multiples of
  8 but not of 128 (edge tiles), out of the input dtype or float32; rows
  past the groups zeros bit for bit."""
  k, n = kn
  lhs, rhs, ct = _fwd_data(21, dt, k=k, n=n)
  gs = jnp.asarray(sizes, jnp.int32)
  fwd = lambda a, b: dyn.ragged_dot(a, b, gs, preferred_element_type=out)
  loss = lambda mod: lambda a, b: jnp.sum(mod.ragged_dot(
      a, b, gs, preferred_element_type=out).astype(F32) * ct.astype(F32))
  specs = plan_lib.traced_specs(jax.grad(loss(dyn), argnums=(0, 1)),
                                lhs, rhs)
  tiles = {(s.trans_a, s.trans_b): plan_lib.grouped_tile(s) for s in specs}
  assert tiles == {(False, False): "small_groups",
                   (False, True): "small_groups",
                   (True, False): "small_groups"}, tiles
  got = jax.jit(fwd)(lhs, rhs)
  assert got.dtype == (out or dt)
  want = _fwd64(lhs, rhs, sizes)
  assert _rel(got, want) < (2 ** -12 if out == F32 else 2 ** -7)
  ref = ref_highest(lambda a, b: dyn.reference.ragged_dot(
      a.astype(F32), b.astype(F32), gs))(lhs, rhs)
  assert _err(got, ref) < 2 ** -7
  used = min(sum(sizes), lhs.shape[0])
  np.testing.assert_array_equal(bits(got[used:]), 0)
  # d lhs: the cotangent (cast to the input dtype) @ rhs[g]^T, NT.
  dl = jax.jit(jax.grad(loss(dyn), argnums=0))(lhs, rhs)
  assert dl.dtype == dt
  g16 = ct.astype(out or dt).astype(dt)
  assert _rel(dl, _fwd64(g16, rhs, sizes, transpose_b=True)) < 2 ** -7
  wl = ref_highest(lambda a, b: jax.grad(loss(dyn.reference), argnums=0)(
      a.astype(F32), b.astype(F32)))(lhs, rhs)
  assert _err(dl, wl) < 2 ** -6
  np.testing.assert_array_equal(bits(dl[used:]), 0)


@pytest.mark.parametrize("offset", [0, 5, 12, -3, 10 ** 6])
@pytest.mark.parametrize("sizes", [FWD_SIZES[1], FWD_SIZES[5]])
def test_small_group_fwd_group_offset(sizes, offset):
  """group_offset: rhs holds 4 of the 16 groups from the offset on
  (clamped); the forward and d lhs on the small-group forward kernel hold
  their rows, zeros for the other groups' rows."""
  lhs, rhs16, ct = _fwd_data(22, BF16)
  gs = jnp.asarray(sizes, jnp.int32)
  first = min(max(offset + 16 if offset < 0 else offset, 0), 12)
  rhs = rhs16[first:first + 4]
  go = jnp.asarray([offset], jnp.int32)
  fwd = lambda a, b: dyn.ragged_dot(a, b, gs, group_offset=go)
  loss = lambda a, b: jnp.sum(fwd(a, b).astype(F32) * ct.astype(F32))
  specs = plan_lib.traced_specs(jax.grad(loss, argnums=(0, 1)), lhs, rhs)
  tiles = {(s.trans_a, s.trans_b): plan_lib.grouped_tile(s) for s in specs}
  # 256 rows over 4 items: 64 a group, past the forward's bound, unless
  # forced.
  assert tiles[(False, False)] != "small_groups"
  small = dyn.KernelOptions(grouped_tile="small_groups")
  fwd = lambda a, b: dyn.ragged_dot(a, b, gs, group_offset=go, opts=small)
  loss = lambda a, b: jnp.sum(fwd(a, b).astype(F32) * ct.astype(F32))
  specs = plan_lib.traced_specs(jax.grad(loss, argnums=(0, 1)), lhs, rhs)
  assert all(plan_lib.grouped_tile(s) == "small_groups" for s in specs)
  got = jax.jit(fwd)(lhs, rhs)
  assert _rel(got, _fwd64(lhs, rhs, sizes, first=first, groups=4)) < 2 ** -7
  dl = jax.jit(jax.grad(loss, argnums=0))(lhs, rhs)
  assert _rel(dl, _fwd64(ct, rhs, sizes, transpose_b=True, first=first,
                         groups=4)) < 2 ** -7


@pytest.mark.parametrize("transpose_b", [False, True])
@pytest.mark.parametrize("dt,out", list(SMALL_FWD_KERNELS))
def test_small_group_fwd_into_a_poisoned_out(dt, out, transpose_b):
  """ragged_dot's NN / NT call writing into a window (column 8) of a
  NaN-poisoned out, in the input dtype and in float32: the groups' rows of
  the window hold the product, every other element keeps its bits; the
  planned line is the small-group forward kernel of the dtypes."""
  from checks import rows_into  # pylint: disable=g-import-not-at-top
  sizes = np.asarray(FWD_SIZES[5], np.int32)
  m, k, n = 256, 136, 72
  lhs, rhs, _ = _fwd_data(23, dt, k=k, n=n)
  if transpose_b:
    rhs = jnp.swapaxes(rhs, 1, 2)
  offs = jnp.asarray(np.concatenate([[0], np.cumsum(sizes)[:-1]]), jnp.int32)
  poison = jnp.full((m + 8, n + 16), jnp.nan, out)
  f = lambda x, w, o, s, p: rows_into(x, w, o, s, p, col=8,
                                      transpose_b=transpose_b)
  args = (lhs, rhs, offs, jnp.asarray(sizes), poison)
  [spec] = plan_lib.traced_specs(f, *args)
  assert plan_lib.grouped_tile(spec) == "small_groups"
  assert plan_lib.launch_choice(spec)["kernel"] == SMALL_FWD_KERNELS[
      (dt, out)].format("NT" if transpose_b else "NN")
  got = np.asarray(jax.jit(f)(*args))
  used = int(sizes.sum())
  inside = np.zeros(got.shape, bool)
  inside[:used, 8:8 + n] = True
  assert not np.isnan(got[inside].astype(np.float32)).any()
  want = _fwd64(lhs, rhs, sizes, transpose_b=transpose_b)[:used]
  assert _rel(got[:used, 8:8 + n], want) < (
      2 ** -7 if out != F32 else 2 ** -12)
  np.testing.assert_array_equal(bits(got)[~inside],
                                bits(np.asarray(poison))[~inside])


@pytest.mark.parametrize("transpose_b", [False, True])
def test_small_group_fwd_items_past_the_grid(transpose_b):
  """A vmap over 8 items that each read up to all 128 rows of one lhs into
  their own poisoned out: the items' chunks (13) outnumber the grid's
  bound on them (8 items + 128 / 64), so CTAs take several work items;
  every item's rows against the reference, the rest of out its poison."""
  r = np.random.default_rng(24)
  m, k, n, g = 128, 136, 72, 8
  x = jnp.asarray(r.uniform(-1, 1, (m, k)), BF16)
  w = jnp.asarray(r.uniform(-1, 1, (g, n, k) if transpose_b else (g, k, n))
                  / np.sqrt(k), BF16)
  out = jnp.full((g, m + 8, n + 8), jnp.nan, BF16)
  valid = jnp.asarray([128, 128, 100, 65, 0, 128, 1, 128], jnp.int32)

  def f(mod, x, w, out, valid):
    def item(w, out, v):
      a = dyn.window(x, (0, 0), (m, k), valid=(v, k))
      o = dyn.window(out, (8, 0), (m, n), valid=(v, n))
      return mod.gemm(a, w, out=o, transpose_b=transpose_b)
    return jax.vmap(item)(w, out, valid)

  args = (x, w, out, valid)
  [spec] = plan_lib.traced_specs(lambda *a: f(dyn, *a), *args)
  assert plan_lib.grouped_tile(spec) == "small_groups"
  got = np.asarray(jax.jit(lambda *a: f(dyn, *a))(*args))
  want = np.asarray(ref_highest(lambda *a: f(dyn.reference, *a))(*args))
  nan = np.isnan(want.astype(np.float32))
  np.testing.assert_array_equal(bits(got)[nan], bits(want)[nan])
  assert not np.isnan(got.astype(np.float32)[~nan]).any()
  assert _err(got.astype(np.float32)[~nan], want.astype(np.float32)[~nan]) \
      < 2 ** -7


_LOGGED_SMALL_FWD = textwrap.dedent("""
    import sys, json
    import jax, jax.numpy as jnp
    import jax_dynoff as dyn
    dt, tile = json.loads(sys.argv[1])
    dt = jnp.dtype(dt)
    lhs = jnp.ones((512, 128), dt)   # 64 experts, 8 rows each on average
    rhs = jnp.ones((64, 128, 136), dt)
    gs = jnp.asarray([8] * 32 + [16] * 8 + [0] * 24, jnp.int32)
    opts = dyn.KernelOptions(grouped_tile=tile)
    fwd = lambda a, b: dyn.ragged_dot(a, b, gs, opts=opts)
    f = lambda a, b: jnp.sum(fwd(a, b).astype(jnp.float32))
    y = jax.jit(fwd)(lhs, rhs)
    dx = jax.jit(jax.grad(f, argnums=0))(lhs, rhs)
    print(float(y[0, 0]), float(y[383, 135]), float(y[384:].sum()),
          float(dx[0, 0]), float(dx[384:].sum()))
""")


@pytest.mark.parametrize("dt", ["bfloat16", "float16"])
@pytest.mark.parametrize("tile", [None, "medium"])
def test_small_group_fwd_kernel_ran(dt, tile):
  """The handler's log: a decode-sized forward and gradient wrt lhs run
  the small-group forward kernel of their dtype (NN, NT;
  KernelOptions(grouped_tile="medium"): the CUTLASS ones), with the same
  result."""
  out, lines = run_logged(_LOGGED_SMALL_FWD, [dt, tile])
  kernels = [l.split("kernel=")[1].split()[0] for l in lines]
  name = "Bf16" if dt == "bfloat16" else "F16"
  for layout in ("NN", "NT"):
    want = (f"kSm90Grouped{name}{layout}" if tile == "medium"
            else f"kSm90SmallGroupFwd{name}{layout}")
    assert want in kernels, (out, lines)
  # Ones: every row of a group is K = 128 in y, N = 136 in dx; rows 384 on
  # are in no group.
  assert [float(v) for v in out.split()] == [128.0, 128.0, 0.0, 136.0, 0.0]


# --- ragged_dot(activation="swiglu"): the fused grouped kernel -------------

SWIGLU_KERNELS = {BF16: "kSm90GroupedSwigluWideBf16NN",
                  F16: "kSm90GroupedSwigluWideF16NN"}


def _swiglu64(lhs, rhs, sizes, first=0):
  """silu(gate) * up of each group's rows in float64 (rhs's columns gate
  2j, up 2j + 1; group g is rhs's g - first), rows of no group zero."""
  x, w = np.asarray(lhs, np.float64), np.asarray(rhs, np.float64)
  out = np.zeros((x.shape[0], w.shape[2] // 2))
  start = 0
  for g, size in enumerate(np.asarray(sizes)):
    size = int(min(max(size, 0), x.shape[0] - start))
    if 0 <= g - first < w.shape[0] and size:
      h = x[start:start + size] @ w[g - first]
      out[start:start + size] = h[:, 0::2] / (1 + np.exp(-h[:, 0::2])) * (
          h[:, 1::2])
    start += size
  return out


def _fused(f, *args):
  return [s for s in plan_lib.traced_specs(f, *args)
          if s.epilogue == "swiglu"]


@pytest.mark.parametrize("k", [136, 135])  # 135: odd K, composed
@pytest.mark.parametrize("sizes", SIZES)
@pytest.mark.parametrize("dt", [BF16, F16])
def test_swiglu_fused_matches_float64(sizes, dt, k):
  """The fused kernel (K a multiple of 8; an odd K composes the call: the
  product in float32, then XLA) against float64 NumPy: uniform, skewed and
  empty groups, sums below and past m, rows past the groups zero."""
  lhs, rhs, _ = _data(11, dt, k=k, n=208)
  gs = jnp.asarray(sizes, jnp.int32)
  f = lambda a, b, g: dyn.ragged_dot(a, b, g, activation="swiglu")
  assert len(_fused(f, lhs, rhs, gs)) == (1 if k % 8 == 0 else 0)
  got = jax.jit(f)(lhs, rhs, gs)
  assert got.shape == (300, 104) and got.dtype == dt
  assert _err(got, _swiglu64(lhs, rhs, gs)) < 2 ** -7
  want = ref_highest(lambda a, b, g: dyn.reference.ragged_dot(
      a, b, g, activation="swiglu"))(lhs, rhs, gs)
  assert _err(got, want) < 2 ** -7
  np.testing.assert_array_equal(np.asarray(got[sum(sizes):], np.float32), 0)


@pytest.mark.parametrize("offset", [0, 2, 3, -1, 10 ** 6])
def test_swiglu_fused_group_offset(offset):
  """group_offset on the fused kernel: rhs's 2 experts from the offset on
  (clamped), rows of the other groups zeros; its gradient against the
  reference's."""
  lhs, rhs5, _ = _data(12, BF16, n=208)
  gs = jnp.asarray(SIZES[0], jnp.int32)
  first = min(max(offset + 5 if offset < 0 else offset, 0), 3)
  rhs = rhs5[first:first + 2]
  go = jnp.asarray([offset], jnp.int32)
  f = lambda mod: lambda a, b: mod.ragged_dot(a, b, gs, group_offset=go,
                                              activation="swiglu")
  assert len(_fused(f(dyn), lhs, rhs)) == 1
  got = jax.jit(f(dyn))(lhs, rhs)
  assert _err(got, _swiglu64(lhs, rhs, gs, first)) < 2 ** -7
  ct = jnp.asarray(np.random.default_rng(3).uniform(-1, 1, (300, 104)), F32)
  grads = lambda mod: jax.grad(
      lambda a, b: jnp.sum(f(mod)(a, b).astype(F32) * ct), argnums=(0, 1))
  dl, dw = jax.jit(grads(dyn))(lhs, rhs)
  wl, ww = ref_highest(lambda a, b: grads(dyn.reference)(
      a.astype(F32), b.astype(F32)))(lhs, rhs)
  assert _err(dl, wl) < 2 ** -6 and _err(dw, ww) < 2 ** -6


@pytest.mark.parametrize("dt", [BF16, F16])
def test_swiglu_fused_writes_only_the_groups_rows(dt):
  """Into a NaN-poisoned out wider than n / 2 (the fused call with the
  caller's out): the groups' rows of the window are silu(gate) * up, every
  other element keeps its bits (rows past the groups: the pointer kernel's
  zero span is D's valid part only; columns past the window)."""
  from checks import fused_swiglu_into  # pylint: disable=g-import-not-at-top
  lhs, rhs, _ = _data(13, dt, n=208)
  sizes = np.asarray([40, 0, 131, 29, 50], np.int32)
  offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int32)
  out = jnp.full((300, 104 + 24), jnp.nan, dt)
  got = jax.jit(fused_swiglu_into)(lhs, rhs, jnp.asarray(offsets),
                                   jnp.asarray(sizes), out)
  rows = int(sizes.sum())
  assert _err(got[:rows, :104], _swiglu64(lhs, rhs, sizes)[:rows]) < 2 ** -7
  np.testing.assert_array_equal(bits(got[rows:]), bits(out[rows:]))
  np.testing.assert_array_equal(bits(got[:, 104:]), bits(out[:, 104:]))


_LOGGED_SWIGLU = textwrap.dedent("""
    import sys, json
    import jax, jax.numpy as jnp
    import jax_dynoff as dyn
    m, k, n, dt = json.loads(sys.argv[1])
    lhs = jnp.ones((m, k), dt) / k
    rhs = jnp.ones((4, k, n), dt)
    gs = jnp.asarray([m // 2, 0, m // 4, m // 4], jnp.int32)
    f = lambda a, b: dyn.ragged_dot(a, b, gs, activation="swiglu")
    print(dyn.explain(f, lhs, rhs)[0])
    jax.block_until_ready(jax.jit(jax.value_and_grad(
        lambda a, b: jnp.sum(f(a, b).astype(jnp.float32)), (0, 1)))(lhs, rhs))
""")


@pytest.mark.parametrize("dt", [BF16, F16])
def test_swiglu_fused_kernel_ran(dt):
  """The handler's log: the forward is one launch of the fused swiglu
  kernel; the backward recomputes the product on the float32 grouped
  kernel, then d lhs (NT) and d rhs (TN) on the plain grouped ones (d rhs,
  64 rows a group, at the small-group weight-gradient kernel's bound, on
  that kernel)."""
  name = jnp.dtype(dt).name
  out, lines = run_logged(_LOGGED_SWIGLU, [256, 128, 192, name])
  assert "silu(gate) * up fused" in out.splitlines()[0], out
  kernels = sorted(l.split("kernel=")[1].split()[0] for l in lines)
  short = "Bf16" if dt == BF16 else "F16"
  tn = (f"kSm90SmallGroupGrad{short}TN"
        if 256 // 4 <= plan_lib.SMALL_GROUP_MAX_MEAN_ROWS
        else f"kSm90Grouped{short}TN")
  assert kernels == sorted([SWIGLU_KERNELS[dt], f"kSm90Grouped{short}F32NN",
                            f"kSm90Grouped{short}NT", tn]), (out, lines)
  assert all("planned=sm90_grouped" in l for l in lines), lines


# --- The small-group forward kernel with the swiglu epilogue (forced) -----

SMALL_SWIGLU_KERNELS = {BF16: "kSm90SmallGroupFwdSwigluBf16NN",
                        F16: "kSm90SmallGroupFwdSwigluF16NN"}
SMALL = dyn.KernelOptions(grouped_tile="small_groups")


@pytest.mark.parametrize("kn", [(136, 208), (72, 144), (128, 272)])
@pytest.mark.parametrize("sizes", FWD_SIZES)
@pytest.mark.parametrize("dt", [BF16, F16])
def test_small_group_swiglu(sizes, dt, kn):
  """ragged_dot(activation="swiglu") with KernelOptions(grouped_tile=
  "small_groups"): one launch of the small-group forward kernel's swiglu
  line, against float64 NumPy, the reference and the fused CUTLASS kernel
  the planner keeps: uniform, skewed and empty groups, sums below and past
  m, tall groups of several chunks, K and n edge tiles (n = 144: the
  second 128-feature block holds out's last 8 columns), rows past the
  groups zero."""
  k, n = kn
  lhs, rhs, _ = _fwd_data(25, dt, k=k, n=n)
  gs = jnp.asarray(sizes, jnp.int32)
  f = lambda opts: lambda a, b: dyn.ragged_dot(a, b, gs, activation="swiglu",
                                               opts=opts)
  [spec] = _fused(f(SMALL), lhs, rhs)
  assert plan_lib.launch_choice(spec)["kernel"] == SMALL_SWIGLU_KERNELS[dt]
  [planned] = _fused(f(None), lhs, rhs)
  assert plan_lib.launch_choice(planned)["kernel"] == SWIGLU_KERNELS[dt]
  got = jax.jit(f(SMALL))(lhs, rhs)
  assert got.shape == (256, n // 2) and got.dtype == dt
  assert _err(got, _swiglu64(lhs, rhs, gs)) < 2 ** -7
  want = ref_highest(lambda a, b: dyn.reference.ragged_dot(
      a, b, gs, activation="swiglu"))(lhs, rhs)
  assert _err(got, want) < 2 ** -7
  assert _err(got, jax.jit(f(None))(lhs, rhs)) < 2 ** -7
  used = min(sum(sizes), 256)
  np.testing.assert_array_equal(bits(got[used:]), 0)


@pytest.mark.parametrize("dt", [BF16, F16])
def test_small_group_swiglu_writes_only_the_groups_rows(dt):
  """The forced small-group swiglu call into a NaN-poisoned out wider than
  n / 2: the groups' rows of the window are silu(gate) * up, every other
  element keeps its bits."""
  from checks import fused_swiglu_into  # pylint: disable=g-import-not-at-top
  lhs, rhs, _ = _fwd_data(26, dt, k=136, n=208)
  sizes = np.asarray(FWD_SIZES[5], np.int32)
  offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int32)
  out = jnp.full((256 + 8, 104 + 24), jnp.nan, dt)
  args = (lhs, rhs, jnp.asarray(offsets), jnp.asarray(sizes), out)
  f = lambda *a: fused_swiglu_into(*a, opts=SMALL)
  [spec] = _fused(f, *args)
  assert plan_lib.launch_choice(spec)["kernel"] == SMALL_SWIGLU_KERNELS[dt]
  got = jax.jit(f)(*args)
  rows = int(sizes.sum())
  assert not np.isnan(np.asarray(got[:rows, :104], np.float32)).any()
  assert _err(got[:rows, :104], _swiglu64(lhs, rhs, sizes)[:rows]) < 2 ** -7
  np.testing.assert_array_equal(bits(got[rows:]), bits(out[rows:]))
  np.testing.assert_array_equal(bits(got[:, 104:]), bits(out[:, 104:]))


_LOGGED_SMALL_SWIGLU = textwrap.dedent("""
    import sys, json
    import jax, jax.numpy as jnp
    import jax_dynoff as dyn
    dt = jnp.dtype(json.loads(sys.argv[1])[0])
    lhs = jnp.ones((512, 128), dt) / 128
    # 144 columns: out's 72 are 144 bytes a row, the 16-byte multiple the
    # grouped path needs (136 would run composed: a float32 product, then
    # XLA's activation).
    rhs = jnp.ones((64, 128, 144), dt)
    gs = jnp.asarray([8] * 32 + [16] * 8 + [0] * 24, jnp.int32)
    opts = dyn.KernelOptions(grouped_tile="small_groups")
    y = jax.jit(lambda a, b: dyn.ragged_dot(
        a, b, gs, activation="swiglu", opts=opts))(lhs, rhs)
    print(float(y[0, 0]), float(y[383, 71]), float(y[384:].sum()))
""")


@pytest.mark.parametrize("dt", ["bfloat16", "float16"])
def test_small_group_swiglu_kernel_ran(dt):
  """The handler's log: forced, ragged_dot(activation="swiglu") is one
  launch of the small-group forward kernel's swiglu line."""
  out, lines = run_logged(_LOGGED_SMALL_SWIGLU, [dt])
  kernels = [l.split("kernel=")[1].split()[0] for l in lines]
  assert kernels == [SMALL_SWIGLU_KERNELS[{"bfloat16": BF16,
                                            "float16": F16}[dt]]], (out, lines)
  # h = 1 everywhere in a group: silu(1) * 1.
  silu1 = 1 / (1 + np.exp(-1.0))
  first, last, rest = (float(v) for v in out.split())
  assert abs(first - silu1) < 2 ** -7 and abs(last - silu1) < 2 ** -7
  assert rest == 0.0


# ---------------------------------------------------------------------------
# ragged_dot's fresh out: the grouped call gets no `out` operand (no XLA
# fill before it); the grouped pointer kernel zeroes D's rows no group
# covers.  The result buffer is fresh memory, so each case first leaves
# NaNs in the allocator (`_poison_allocator`) and, in loops, the body's
# result buffer holds the previous iteration's values: a row left unzeroed
# shows.

FRESH_SIZES = [
    [40, 0, 131, 29, 100],   # every row covered
    [7, 64, 1, 0, 33],       # 105 of 300 rows: the rest zeros
    [0, 0, 0, 0, 0],         # no row covered: all zeros
    [0, 0, 300, 0, 0],       # one group, every row
    [0, 13, 0, 0, 0],        # one group, 13 rows at the top
    [200, 90, 50, 30, 10],   # past m: cut
]


def _poison_allocator(shape=(1 << 22,)):
  """Leaves NaN bit patterns in freed device memory (best effort: XLA's
  allocator hands freed blocks out again), so that an output buffer
  nobody writes is not zeros by chance."""
  for dt in (F32, BF16):
    x = jnp.full(shape, jnp.nan, dt)
    x.block_until_ready()
    del x


def _covered_rows(sizes, m=300, first=0, groups=None):
  """Which of the m rows the groups [first, first + groups) hold."""
  ends = np.minimum(np.cumsum(sizes), m)
  starts = np.concatenate([[0], ends[:-1]])
  mine = np.zeros(m, bool)
  for g in range(first, len(sizes) if groups is None else first + groups):
    mine[starts[g]:ends[g]] = True
  return mine


def _custom_calls_hlo(compiled_text):
  return [l for l in compiled_text.splitlines()
          if "custom-call(" in l and "jax_dynoff_gemm" in l]


@pytest.mark.parametrize("sizes", FRESH_SIZES)
@pytest.mark.parametrize("dt,out", [(BF16, None), (F16, None), (BF16, F32)])
def test_fresh_out_forward(sizes, dt, out):
  """The forward against lax, rows past the groups exactly zero, one
  grouped call without an `out` operand or alias, and no fill of out's
  shape anywhere in the compiled program."""
  lhs, rhs, _ = _data(11, dt)
  gs = jnp.asarray(sizes, jnp.int32)
  f = lambda a, b, g: dyn.ragged_dot(a, b, g, preferred_element_type=out)
  (spec,) = plan_lib.traced_specs(f, lhs, rhs, gs)
  assert plan_lib.plan(spec).kernel.fresh_out, plan_lib.explain(spec)
  compiled = jax.jit(f).lower(lhs, rhs, gs).compile()
  text = compiled.as_text()
  calls = _custom_calls_hlo(text)
  assert len(calls) == 1, text
  assert "output_to_operand_aliasing" not in calls[0], calls[0]
  out_t = "f32" if out is not None else ("bf16" if dt == BF16 else "f16")
  shape = f"{out_t}[300,200]"
  operands = calls[0].split("custom-call(", 1)[1]
  assert shape not in operands.split(")", 1)[0], calls[0]
  assert not [l for l in text.splitlines()
              if f"= {shape}" in l and ("broadcast(" in l or "fusion(" in l)
              ], text
  _poison_allocator()
  got = np.asarray(compiled(lhs, rhs, gs), np.float32)
  assert not np.isnan(got).any()
  mine = _covered_rows(sizes)
  np.testing.assert_array_equal(got[~mine], 0)
  assert _err(got, _lax32(lhs, rhs, gs)) < 2 ** -7


@pytest.mark.parametrize("sizes", FRESH_SIZES[:3])
@pytest.mark.parametrize("dt", [BF16, F16])
def test_fresh_out_gradients(sizes, dt):
  """d lhs (its own fresh out) and d rhs against lax's; d lhs's rows past
  the groups exactly zero."""
  lhs, rhs, ct = _data(12, dt)
  gs = jnp.asarray(sizes, jnp.int32)

  def grads(f, cast):
    def loss(a, b):
      return jnp.sum(f(a, b, gs).astype(F32) * ct.astype(F32))
    return jax.grad(loss, argnums=(0, 1))(cast(lhs), cast(rhs))

  _poison_allocator()
  got = jax.jit(lambda: grads(dyn.ragged_dot, lambda x: x))()
  want = grads(lambda a, b, g: lax.ragged_dot(
      a, b, g, precision=lax.Precision.HIGHEST), lambda x: x.astype(F32))
  for g, w in zip(got, want):
    assert not np.isnan(np.asarray(g, np.float32)).any()
    assert _err(g, w) < 2 ** -6
  np.testing.assert_array_equal(
      np.asarray(got[0], np.float32)[~_covered_rows(sizes)], 0)


@pytest.mark.parametrize("offset", [0, 1, 3, -2, 10 ** 6])
@pytest.mark.parametrize("act", [None, "swiglu"])
def test_fresh_out_group_offset(offset, act):
  """An expert shard (2 of 5 groups): rows of the other shards' groups,
  before and after its own, exactly zero, forward and d lhs; swiglu's
  forward too."""
  lhs, rhs5, ct = _data(13, BF16)
  sizes = [40, 50, 60, 70, 30]   # 250 of 300 rows
  gs = jnp.asarray(sizes, jnp.int32)
  first = min(max(offset + 5 if offset < 0 else offset, 0), 3)
  rhs = rhs5[first:first + 2]
  go = jnp.asarray([offset], jnp.int32)
  f = lambda a, b: dyn.ragged_dot(a, b, gs, group_offset=go, activation=act)
  mine = _covered_rows(sizes, first=first, groups=2)
  _poison_allocator()
  got = np.asarray(jax.jit(f)(lhs, rhs), np.float32)
  want = np.asarray(ref_highest(lambda a, b: dyn.reference.ragged_dot(
      a.astype(F32), b.astype(F32), gs, group_offset=go, activation=act))(
          lhs, rhs))
  np.testing.assert_array_equal(got[~mine], 0)
  assert _err(got, want) < 2 ** -7
  if act is None:
    loss = lambda a, b: jnp.sum(f(a, b).astype(F32) * ct.astype(F32))
    dl, _ = jax.jit(jax.grad(loss, argnums=(0, 1)))(lhs, rhs)
    np.testing.assert_array_equal(np.asarray(dl, np.float32)[~mine], 0)


def _fresh_scan(mod, act=None):
  """A scan over size vectors computed on the device (each row of
  `sizes`, its sum changing), one ragged_dot a step, every step's result
  stacked: the body's result buffer is reused, so a row it does not
  zero keeps the previous step's value."""
  def f(lhs, rhs, sizes):
    def body(c, s):
      y = mod.ragged_dot(lhs, rhs, s, activation=act)
      return c, y
    return lax.scan(body, 0, sizes)[1]
  return f


@pytest.mark.parametrize("act", [None, "swiglu"])
@pytest.mark.parametrize("dt", [BF16, F16])
def test_fresh_out_in_a_scan_with_changing_sizes(dt, act):
  lhs, rhs, _ = _data(14, dt)
  sizes = jnp.asarray(FRESH_SIZES + FRESH_SIZES[::-1], jnp.int32)
  _poison_allocator()
  got = np.asarray(jax.jit(_fresh_scan(dyn, act))(lhs, rhs, sizes),
                   np.float32)
  want = np.asarray(ref_highest(_fresh_scan(dyn.reference, act))(
      lhs.astype(F32), rhs.astype(F32), sizes))
  for i, s in enumerate(np.asarray(sizes)):
    np.testing.assert_array_equal(got[i][~_covered_rows(s)], 0, str(s))
    assert _err(got[i], want[i]) < 2 ** -7, s


def test_fresh_out_loop_is_captured_and_replays_new_sizes():
  """A fori_loop of ragged_dots whose sizes come from the device, captured
  into a CUDA graph and replayed with size vectors of other sums: the
  zeros follow the sizes of each replay."""
  lhs, rhs, _ = _data(15, BF16)

  def loop(mod):
    def f(lhs, rhs, base):
      def body(i, y):
        s = jnp.roll(base, i) * (i % 2)  # every other step: no rows at all
        return y * 0.5 + mod.ragged_dot(lhs, rhs, s).astype(F32)
      return lax.fori_loop(0, 4, body, jnp.zeros((lhs.shape[0],
                                                  rhs.shape[2]), F32))
    return f

  base = jnp.asarray(FRESH_SIZES[1], jnp.int32)
  compiled = _whole_loop_graph(loop(dyn), lhs, rhs, base)
  ref = ref_highest(loop(dyn.reference))
  for sizes in FRESH_SIZES:
    s = jnp.asarray(sizes, jnp.int32)
    _poison_allocator()
    got = np.asarray(compiled(lhs, rhs, s))
    assert not np.isnan(got).any(), sizes
    covered = np.zeros(300, bool)
    for i in (1, 3):
      covered |= _covered_rows(np.roll(sizes, i))
    np.testing.assert_array_equal(got[~covered], 0)
    assert _err(got, ref(lhs.astype(F32), rhs.astype(F32), s)) < 2 ** -6, \
        sizes
