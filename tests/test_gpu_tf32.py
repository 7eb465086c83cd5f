"""float32 on the SM90 TF32 kernels (ffi/kernels/sm90_tf32.h): TF32 wgmma
at default precision, 3xTF32 at precision=HIGHEST, the staging of MN-major
operands, the direct NN kernels that need no staging (ffi/kernels/
sm90_direct_tf32.h), and the fallbacks (the staged ptr-array kernel,
CUTLASS 2.x TF32 / generic) for windows those kernels cannot read.

The plan checks run everywhere; everything that runs a kernel is skipped
when jax has no GPU (the SM90 kernels themselves need compute capability
9.0: elsewhere the handler falls back and the results must still hold).
Inputs are random (never zero), outputs are NaN-poisoned first and must be
bit-for-bit unchanged outside the window.

Run on an H200:  pytest -v tests/test_gpu_tf32.py
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
from jax_dynoff.options import KernelOptions

on_gpu = pytest.mark.skipif(jax.default_backend() != "gpu",
                            reason="needs a CUDA GPU")
gpu = [pytest.mark.gpu, on_gpu]

F32 = jnp.float32
HIGHEST = lax.Precision.HIGHEST
TRANS = [(False, False), (False, True), (True, False), (True, True)]
# Scaled max error bounds (error / max(1, max |reference|)): TF32 keeps 10
# mantissa bits; 3xTF32 about float32's (the reference is XLA's float32
# product at HIGHEST).
TF32_TOL = 8e-3
F32_TOL = 4e-5


def _rand(key, shape):
  # Uniform in [-1, 1] shifted away from 0: never a zero input.
  x = jax.random.uniform(key, shape, F32, -1, 1)
  return jnp.where(jnp.abs(x) < 1e-3, 0.5, x)


def _err(got, want):
  got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
  assert np.isfinite(got).all(), "NaN/inf in the window: not written?"
  return float(np.abs(got - want).max()) / max(1.0, float(np.abs(want).max()))


def _case(m, n, k, ta, tb, precision, col=0, pad=8, key=0, opts=None,
          c=True):
  """A, B inside bigger arrays at dynamic row starts and a static column
  start `col` (4-aligned: the TMA kernels read them in place; odd: only a
  staged operand or the fallback can), C given, out poisoned with the
  window at a dynamic row and column 4.  Returns (f(mod, *args), args,
  the window's slice of out)."""
  ks = jax.random.split(jax.random.key(key), 3)
  ar, ac = (k, m) if ta else (m, k)
  br, bc = (n, k) if tb else (k, n)
  a = _rand(ks[0], (ar + 24, ac + col + pad))
  b = _rand(ks[1], (br + 40, bc + col + pad))
  cc = _rand(ks[2], (m, n))
  out = jnp.full((m + 16, n + 8), jnp.nan, F32)
  opts = opts or KernelOptions()

  def f(mod, a, b, cc, out, ia, ib, io):
    return mod.gemm(dyn.window(a, (ia, col), (ar, ac)),
                    dyn.window(b, (ib, col), (br, bc)),
                    cc if c else None, out=dyn.window(out, (io, 4), (m, n)),
                    transpose_a=ta, transpose_b=tb, alpha=0.75,
                    beta=-1.5 if c else 1.0, precision=precision, opts=opts)

  args = (a, b, cc, out, jnp.int32(8), jnp.int32(24), jnp.int32(5))
  return f, args, (slice(5, 5 + m), slice(4, 4 + n))


def _explain(f, args):
  return plan_lib.explain_calls(lambda *x: f(dyn, *x), *args)


def _run(f, args, win):
  """Ours and the reference; checks that out is untouched outside the
  window.  Returns the scaled error inside it."""
  got = jax.jit(lambda *x: f(dyn, *x))(*args)
  want = ref_highest(lambda *x: f(dyn.reference, *x))(*args)
  outside = np.ones(got.shape, bool)
  outside[win] = False
  np.testing.assert_array_equal(bits(got)[outside], bits(args[3])[outside])
  return _err(got[win], want[win])


# ---------------------------------------------------------------------------
# The plan (no GPU needed).

@pytest.mark.parametrize("ta,tb", TRANS)
def test_plan_takes_the_sm90_tf32_kernels(ta, tb):
  """Aligned windows: TF32 wgmma at default precision (the MN-major
  operands staged), 3xTF32 at HIGHEST; odd columns: the CUTLASS 2.x TF32
  kernel unless the odd operand is staged anyway."""
  f, args, _ = _case(300, 132, 260, ta, tb, None)
  [e] = _explain(f, args)
  assert "(TF32 wgmma, ptr-array kernel" in e, e
  staged = [x for x, s in (("A", ta), ("B", not tb)) if s]
  if staged:
    assert " and ".join(staged) + " staged K-major" in e, e
  f, args, _ = _case(300, 132, 260, ta, tb, HIGHEST)
  [e] = _explain(f, args)
  assert "(3xTF32 wgmma" in e, e
  # Odd column starts: A and B both at 4-byte alignment only.
  f, args, _ = _case(300, 132, 260, ta, tb, None, col=1)
  [e] = _explain(f, args)
  in_place = (not ta) or tb  # A read in place (NN, NT) or B (NT, TT)
  assert e.startswith("tf32 (CUTLASS 2.x") == in_place, e
  f, args, _ = _case(300, 132, 260, ta, tb, HIGHEST, col=1)
  assert "(3xTF32 wgmma" in _explain(f, args)[0]


def test_plan_default_matmul_precision_is_honoured():
  f, args, _ = _case(256, 256, 256, False, False, None)
  with jax.default_matmul_precision("highest"):
    assert "3xTF32" in _explain(f, args)[0]
  with jax.default_matmul_precision("tensorfloat32"):
    assert "(TF32 wgmma" in _explain(f, args)[0]
  f, args, _ = _case(256, 256, 256, False, False, lax.Precision.HIGH)
  assert "(TF32 wgmma" in _explain(f, args)[0]


# ---------------------------------------------------------------------------
# Against the reference.

@pytest.mark.parametrize("ta,tb", TRANS)
@pytest.mark.parametrize("precision", [None, HIGHEST])
@pytest.mark.gpu
@on_gpu
def test_matches_reference(ta, tb, precision):
  """Every transpose, a shape that is no tile multiple, C with alpha and
  beta, windows at device offsets."""
  f, args, win = _case(300, 132, 260, ta, tb, precision, key=1)
  assert plan_lib.traced_paths(lambda *x: f(dyn, *x), *args)[0].startswith(
      "sm90_")
  err = _run(f, args, win)
  assert err <= (F32_TOL if precision else TF32_TOL), err


@pytest.mark.parametrize("tile", ["large", "medium"])
@pytest.mark.parametrize("ta,tb", [(False, False), (False, True)])
@pytest.mark.gpu
@on_gpu
def test_both_tiles(tile, ta, tb):
  """Each float32 tile, forced, at a size of several waves of tiles."""
  f, args, win = _case(1100, 1060, 520, ta, tb, None, key=2,
                       opts=KernelOptions(tile=tile))
  assert plan_lib.traced_paths(lambda *x: f(dyn, *x), *args) == [
      "sm90_" + tile]
  assert _run(f, args, win) <= TF32_TOL


@pytest.mark.parametrize("ta,tb", TRANS)
@pytest.mark.gpu
@on_gpu
def test_highest_is_float32_accurate_not_tf32(ta, tb):
  """HIGHEST (3xTF32) is far more accurate than TF32 on the same inputs,
  K large enough for TF32's rounding to show."""
  errs = {}
  for precision in (None, HIGHEST):
    f, args, win = _case(256, 192, 2048, ta, tb, precision, key=3, c=False)
    errs[precision] = _run(f, args, win)
  assert errs[HIGHEST] <= F32_TOL, errs
  assert errs[None] > 20 * errs[HIGHEST], errs


@pytest.mark.parametrize("precision", [None, HIGHEST])
@pytest.mark.gpu
@on_gpu
def test_misaligned_windows(precision):
  """Odd column starts and leading dimensions: the CUTLASS 2.x TF32 kernel
  at default precision, the staged 3xTF32 at HIGHEST (it reads A and B
  element by element); an odd D keeps HIGHEST on the exact generic
  kernel."""
  f, args, win = _case(77, 52, 61, False, False, precision, col=1, pad=3,
                       key=4)
  [path] = plan_lib.traced_paths(lambda *x: f(dyn, *x), *args)
  assert path == ("tf32" if precision is None else path), path
  if precision is not None:
    assert path.startswith("sm90_"), path
  assert _run(f, args, win) <= (F32_TOL if precision else TF32_TOL)
  # D at an odd column: the fallbacks.
  ks = jax.random.split(jax.random.key(5), 2)
  a, b = _rand(ks[0], (70, 61)), _rand(ks[1], (61, 52))
  out = jnp.full((80, 60), jnp.nan, F32)

  def g(mod, a, b, out, i):
    return mod.gemm(a, b, out=dyn.window(out, (i, 3), (70, 52)),
                    precision=precision)

  gargs = (a, b, out, jnp.int32(6))
  assert plan_lib.traced_paths(lambda *x: g(dyn, *x), *gargs) == [
      "tf32" if precision is None else "generic"]
  got = jax.jit(lambda *x: g(dyn, *x))(*gargs)
  want = ref_highest(lambda *x: g(dyn.reference, *x))(*gargs)
  outside = np.ones(got.shape, bool)
  outside[6:76, 3:55] = False
  np.testing.assert_array_equal(bits(got)[outside], bits(out)[outside])
  assert _err(got[6:76, 3:55], want[6:76, 3:55]) <= (
      F32_TOL if precision else TF32_TOL)


@pytest.mark.parametrize("precision", [None, HIGHEST])
@pytest.mark.gpu
@on_gpu
def test_clamped_offsets(precision):
  """Starts past either end clamp as lax.dynamic_slice does."""
  f, args, win = _case(128, 96, 132, False, True, precision, key=6)
  for ia, ib, io in ((10**6, -5, 10**6), (-10**6, 10**6, -3)):
    a2 = args[:4] + (jnp.int32(ia), jnp.int32(ib), jnp.int32(io))
    got = jax.jit(lambda *x: f(dyn, *x))(*a2)
    want = ref_highest(lambda *x: f(dyn.reference, *x))(*a2)
    w = np.asarray(want)
    written = ~np.isnan(w)
    np.testing.assert_array_equal(bits(got)[~written], bits(w)[~written])
    assert _err(np.asarray(got)[written], w[written]) <= (
        F32_TOL if precision else TF32_TOL)


@pytest.mark.parametrize("tb", [False, True])
@pytest.mark.parametrize("precision", [None, HIGHEST])
@pytest.mark.gpu
@on_gpu
def test_vmap(tb, precision):
  """vmap over offsets and over a stacked operand: one batched ptr-array
  launch of the TF32 kernel (staging per item)."""
  ks = jax.random.split(jax.random.key(7), 2)
  L, m, n, k = 5, 96, 136, 200
  a = _rand(ks[0], (L, m + 32, k))
  b = _rand(ks[1], ((n, k) if tb else (k, n)))
  starts = jnp.asarray([0, 7, 32, 13, 3], jnp.int32)

  def f(mod, a, b, s):
    return jax.vmap(lambda ai, si: mod.gemm(
        dyn.window(ai, (si, 0), (m, k)), b, transpose_b=tb,
        precision=precision))(a, s)

  [path] = plan_lib.traced_paths(lambda *x: f(dyn, *x), a, b, starts)
  assert path.startswith("sm90_"), path
  got = jax.jit(lambda *x: f(dyn, *x))(a, b, starts)
  want = ref_highest(lambda *x: f(dyn.reference, *x))(a, b, starts)
  assert _err(got, want) <= (F32_TOL if precision else TF32_TOL)


@pytest.mark.parametrize("precision", [None, HIGHEST])
@pytest.mark.gpu
@on_gpu
def test_grad(precision):
  """The gradients' GEMMs (NT and TN, into windows of zeros) take the
  SM90 TF32 kernels too (where they are GEMMs: by default both read no
  window larger than they write, and are XLA's dots)."""
  ks = jax.random.split(jax.random.key(8), 3)
  a = _rand(ks[0], (200, 160))
  b = _rand(ks[1], (160, 120))
  g = _rand(ks[2], (64, 120))

  def loss(mod, a, b, i, opts):
    y = mod.gemm(dyn.window(a, (i, 0), (64, 160)), b, precision=precision,
                 opts=opts)
    return jnp.sum(y * g)

  grad = lambda mod, opts: jax.grad(
      lambda a, b, i: loss(mod, a, b, i, opts), argnums=(0, 1))
  want = ref_highest(grad(dyn.reference, None))(a, b, jnp.int32(40))
  for opts, calls in ((dyn.KernelOptions(xla_cotangent_dot=False), 3),
                      (None, 1)):
    paths = plan_lib.traced_paths(grad(dyn, opts), a, b, jnp.int32(40))
    assert len(paths) == calls and all(
        p.startswith("sm90_") for p in paths), paths
    got = jax.jit(grad(dyn, opts))(a, b, jnp.int32(40))
    for x, y in zip(got, want):
      assert _err(x, y) <= (F32_TOL if precision else TF32_TOL)


# ---------------------------------------------------------------------------
# The direct NN kernels (ffi/kernels/sm90_direct_tf32.h): one launch, B read
# in place through registers, D^T computed into the row-major D window.

# (name, m, n, k, A buffer, A starts, B buffer, B starts, out buffer or
# None (a fresh result), out starts, C: None / "own"); the leading starts
# are dynamic (int32, some past either end: clamped), the last one of A, B
# and out a static column start (a multiple of 4 elements).
DIRECT_CASES = [
    # Row windows of bigger buffers, two starts clamped (B's from above,
    # out's from below).
    ("rows", 512, 256, 192, (600, 192), (40, 0), (300, 256), (10 ** 6, 0),
     (1000, 256), (-488, 0), None),
    # Stacked weights (B: layer 2 of 3, its start clamped), out a 3-d
    # cache (layer 1, rows from a dynamic position).
    ("layers", 256, 128, 320, (256, 320), (0, 0), (3, 320, 128),
     (10 ** 6, 0, 0), (2, 600, 128), (1, 300, 0), None),
    # k = 260: no multiple of 32 but A's whole width and B's whole height;
    # out a fresh 300 x 200: no tile multiple, but its array's dims.
    ("edges", 300, 200, 260, (300, 260), (0, 0), (260, 200), (0, 0), None,
     None, None),
    # A at a static column (8) of a wider buffer, B's columns inside wider
    # rows, C its own array read at a dynamic row (beta != 0).
    ("column_c", 256, 384, 128, (300, 136), (44, 8), (128, 392), (0, 4),
     (512, 392), (-1, 8), "own"),
    # 3 column tiles of 128: the large tile's CTA pairs (cluster 2 along n)
    # round them up to 4, the 4th past the window inside out's rows: it
    # must store nothing.
    ("cluster_n", 256, 384, 128, (300, 128), (40, 0), (128, 512), (0, 0),
     (600, 512), (100, 0), None),
    # More tiles than SMs: the scheduler's swizzle rounds the tile grid up
    # past the window (out's buffer goes on below it).
    ("swizzle", 4352, 1024, 64, (4400, 64), (20, 0), (64, 1024), (0, 0),
     (5200, 1024), (8, 0), None),
]


def _direct_case(case, tile, opts=None):
  """(f, args) of a DIRECT_CASES case: f(mod, *args), the SM90 tile and
  its direct twin forced (`opts` replaces that)."""
  name, m, n, k, ash, ast, bsh, bst, osh, ost, cmode = case
  ks = jax.random.split(jax.random.key(31), 3)
  a = _rand(ks[0], ash)
  b = _rand(ks[1], bsh)
  c = _rand(ks[2], (m + 20, n)) if cmode == "own" else None
  out = jnp.full(osh, jnp.nan, F32) if osh else None
  starts = [jnp.int32(v)
            for v in (*ast[:-1], *bst[:-1], *(ost or (0,))[:-1])]
  na, nb = len(ast) - 1, len(bst) - 1
  opts = opts or KernelOptions(tile=tile, direct_tile=tile)

  def f(mod, a, b, c, out, *st):
    sa, sb, so = st[:na], st[na:na + nb], st[na + nb:]
    aw = dyn.window(a, (*sa, ast[-1]), (m, k))
    bw = dyn.window(b, (*sb, bst[-1]), (k, n))
    kw = dict(alpha=0.75, opts=opts)
    if c is not None:
      c = dyn.window(c, (so[0] if so else 0, 0), (m, n))
      kw["beta"] = -1.5
    if out is None:
      return mod.gemm(aw, bw, c, **kw)
    return mod.gemm(aw, bw, c, out=dyn.window(out, (*so, ost[-1]), (m, n)),
                    **kw)

  return f, (a, b, c, out, *starts)


def _check_written(f, args, m, n):
  """Ours against the reference: the window (the reference's non-NaN
  elements, m * n of them) within TF32's error, every other element of
  out bit for bit the poison.  Returns the scaled error."""
  got = jax.jit(lambda *x: f(dyn, *x))(*args)
  want = np.asarray(ref_highest(lambda *x: f(dyn.reference, *x))(*args))
  written = ~np.isnan(want)
  assert written.sum() == m * n, (written.sum(), m * n)
  np.testing.assert_array_equal(bits(got)[~written], bits(want)[~written])
  return _err(np.asarray(got)[written], want[written])


DIRECT_IDS = [c[0] for c in DIRECT_CASES]


@pytest.mark.parametrize("case", DIRECT_CASES, ids=DIRECT_IDS)
@pytest.mark.parametrize("tile", ["large", "medium"])
def test_plan_direct_cases(case, tile):
  """Each case plans the forced tile's direct kernel, and without the
  forcing the planner's own tile with its direct twin, no staging (m above
  4096: the staged ptr-array kernel, the copy of B costing less there)."""
  f, args = _direct_case(case, tile)
  [spec] = plan_lib.traced_specs(lambda *x: f(dyn, *x), *args)
  assert plan_lib.plan(spec).path == "sm90_" + tile
  assert plan_lib.direct_reasons(spec) == []
  assert plan_lib.direct_kernel(spec) == tile
  e = plan_lib.explain(spec)
  assert f"(TF32 wgmma, direct kernel, {tile} tile, B read in place;" in e, e
  f, args = _direct_case(case, tile, opts=KernelOptions())
  [spec] = plan_lib.traced_specs(lambda *x: f(dyn, *x), *args)
  p = plan_lib.plan(spec)
  w = plan_lib.workspace_layout(spec, p.path, 1, p.kernel)
  if case[1] > 4096:
    assert plan_lib.direct_kernel(spec) is None
    assert plan_lib.direct_reasons(spec) == [
        f"m = {case[1]} > 4096: staging B costs less than the "
        "register-sourced mainloop"]
    assert w.stage_b_item == case[2] * case[3] * 4
  else:
    assert plan_lib.direct_kernel(spec) == p.path.removeprefix("sm90_")
    assert w.stage_b_item == 0
  assert p.workspace_bytes == w.total


@pytest.mark.parametrize("case", DIRECT_CASES, ids=DIRECT_IDS)
@pytest.mark.parametrize("tile", ["large", "medium"])
@pytest.mark.gpu
@on_gpu
def test_direct_matches_reference(case, tile):
  """Each direct tile on each case: the window within TF32's error, out
  untouched outside it (tiles past the window store nothing)."""
  f, args = _direct_case(case, tile)
  assert _check_written(f, args, case[1], case[2]) <= TF32_TOL


# Windows the direct kernels cannot take: the staged ptr-array kernel
# runs.  (name, the reason's start, case as in DIRECT_CASES.)
DIRECT_FALLBACK_CASES = [
    # B at an odd column start: not 16-byte aligned (the staging reads it
    # element by element).
    ("b_misaligned", "b: ", ("", 256, 128, 128, (300, 128), (4, 0),
                             (128, 140), (0, 1), (400, 136), (7, 4), None)),
    # k = 260 inside a wider A: a K tile past the window would be summed.
    ("k_inside", "a: k = 260", ("", 256, 128, 260, (300, 268), (4, 0),
                                (260, 128), (0, 0), (400, 136), (7, 4),
                                None)),
    # m = 300 inside a taller out: the last row tile would store past it.
    ("d_rows", "out: m = 300", ("", 300, 128, 128, (300, 128), (0, 0),
                                (128, 128), (0, 0), (400, 136), (50, 4),
                                "own")),
]


@pytest.mark.parametrize("name,why,case", DIRECT_FALLBACK_CASES,
                         ids=[c[0] for c in DIRECT_FALLBACK_CASES])
@pytest.mark.parametrize("direct_off", [False, True])
def test_plan_direct_fallbacks(name, why, case, direct_off):
  """Windows the direct kernels do not suit (or direct=False): the
  ptr-array kernel with B staged, the reason in direct_reasons."""
  opts = KernelOptions(direct=not direct_off)
  f, args = _direct_case(case, None, opts=opts)
  [spec] = plan_lib.traced_specs(lambda *x: f(dyn, *x), *args)
  p = plan_lib.plan(spec)
  assert p.path.startswith("sm90_"), p
  assert any(r.startswith(why) for r in plan_lib.direct_reasons(spec)), (
      plan_lib.direct_reasons(spec))
  assert plan_lib.direct_kernel(spec) is None
  e = plan_lib.explain(spec)
  assert "ptr-array kernel (not direct: " in e and "B staged K-major" in e, e
  assert plan_lib.workspace_layout(spec, p.path, 1,
                                   p.kernel).stage_b_item > 0


@pytest.mark.parametrize("name,why,case", DIRECT_FALLBACK_CASES,
                         ids=[c[0] for c in DIRECT_FALLBACK_CASES])
@pytest.mark.gpu
@on_gpu
def test_direct_fallbacks_match_reference(name, why, case):
  f, args = _direct_case(case, None, opts=KernelOptions())
  assert _check_written(f, args, case[1], case[2]) <= TF32_TOL


@pytest.mark.parametrize("tile", ["large", "medium"])
@pytest.mark.gpu
@on_gpu
def test_direct_off_matches_direct(tile):
  """direct=False (the staged ptr-array kernel of the same tile) against
  the direct kernel on the same call: both within TF32's error of the
  reference, and of each other."""
  case = DIRECT_CASES[0]
  got = {}
  for direct in (True, False):
    f, args = _direct_case(case, tile, opts=KernelOptions(
        tile=tile, direct_tile=tile, direct=direct))
    assert _check_written(f, args, case[1], case[2]) <= TF32_TOL
    got[direct] = np.asarray(jax.jit(lambda *x: f(dyn, *x))(*args))
  written = ~np.isnan(got[True])
  assert _err(got[True][written], got[False][written]) <= TF32_TOL


_SCRIPT = textwrap.dedent("""
    import json, sys
    import jax, jax.numpy as jnp
    from jax import lax
    import jax_dynoff as dyn
    args = json.loads(sys.argv[1])
    prec = lax.Precision.HIGHEST if args.pop("highest") else None
    opts = dyn.KernelOptions(**args)
    ks = jax.random.split(jax.random.key(0), 2)
    a = jax.random.uniform(ks[0], (1024, 520), jnp.float32, -1, 1)
    b = jax.random.uniform(ks[1], (512, 768), jnp.float32, -1, 1)
    f = lambda mod, a, b, r: mod.gemm(dyn.window(a, (r, 4), (512, 512)), b,
                                      precision=prec, opts=opts)
    got = jax.jit(lambda a, b, r: f(dyn, a, b, r))(a, b, jnp.int32(300))
    with jax.default_matmul_precision("highest"):
      want = jax.jit(lambda a, b, r: f(dyn.reference, a, b, r))(a, b, jnp.int32(300))
    print("ERR", float(jnp.abs(got - want).max() / jnp.abs(want).max()))
""")


def _run_script(**args):
  """The script in a fresh process with the kernel log: its ERR and the
  handler's kernel lines."""
  out, lines = run_logged(_SCRIPT, args)
  return float(out.split("ERR")[1].split()[0]), lines


def _is_sm90() -> bool:
  return (jax.default_backend() == "gpu" and str(getattr(
      jax.devices()[0], "compute_capability", "")) in ("9.0", "90"))


@pytest.mark.gpu
@pytest.mark.skipif(not _is_sm90(), reason="needs an SM90 GPU")
def test_the_kernels_that_ran():
  """The handler's log: the direct TF32 kernel at default precision (the
  script's NN windows suit it), the staged ptr-array one with direct=False,
  the SM90 TF32 kernel at HIGHEST (3xTF32, float32-accurate); sm90=False:
  CUTLASS 2.x TF32 / generic; tf32=False: the exact generic kernel."""
  err, lines = _run_script(highest=False)
  assert all("kernel=kSm90Direct" in l and "F32NN" in l for l in lines), lines
  assert 0 < err < 2e-3, err  # TF32 rounding shows
  err_p, lines = _run_script(highest=False, direct=False)
  assert all("kernel=kSm90Tf32" in l for l in lines), lines
  assert 0 < err_p < 2e-3, err_p
  err_h, lines = _run_script(highest=True)
  assert all("kernel=kSm90Tf32" in l for l in lines), lines
  assert err_h < 1e-5 and err_h * 20 < err, (err_h, err)
  _, lines = _run_script(highest=False, sm90=False)
  assert all("kernel=kTf32NN" in l for l in lines), lines
  _, lines = _run_script(highest=True, sm90=False)
  assert all("kernel=kGenericF32F32" in l for l in lines), lines
  err, lines = _run_script(highest=False, tf32=False)
  assert all("kernel=kGenericF32F32" in l for l in lines), lines
  assert err < 1e-5
