"""Calls that tests/test_gpu_kernels.py::test_sanitizers_clean runs under
`compute-sanitizer` (memcheck, racecheck, synccheck): one per kernel path
and per piece of handler machinery (pointer prep, clamping, C copies,
split-K reduction, k = 0, batches), each small so that the instrumented
run stays short.

Run as a script; prints "CASE name err" per case and exits non-zero if a
result is off (the sanitizer's own exit code reports memory errors).  With
the argument `skinny`, runs the skinny kernel's cases alone; with
`grouped`, the grouped kernel's (for a sanitizer run by hand).  Last it prints "COMPILES n of m":
the XLA compiles that JAX's persistent compilation cache did not serve, of
all (the test fills the cache in a run without the sanitizer first, so
that none happens under it: compute-sanitizer 2025.3 crashed inside XLA
compiles, at a different case each time).
"""

import sys
import time

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

import jax_dynoff as dyn
from jax_dynoff import plan

BF16, F16, F32 = jnp.bfloat16, jnp.float16, jnp.float32


def rand(seed, shape, dtype):
  return jax.random.uniform(jax.random.key(seed), shape, F32, -1,
                            1).astype(dtype)


def check(name, f, *args, opts=None):
  """Runs f(dyn, *args) against the reference, f(dyn.reference, *args);
  with `opts` (a KernelOptions) f takes them, f(mod, *args, opts=opts), and
  passes them to its gemm calls."""
  kw = {} if opts is None else {"opts": opts}
  t0 = time.perf_counter()
  paths = plan.traced_paths(lambda *a: f(dyn, *a, **kw), *args)
  got = jax.jit(lambda *a: f(dyn, *a, **kw))(*args)
  got.block_until_ready()
  with jax.default_matmul_precision("highest"):
    want = jax.jit(lambda *a: f(dyn.reference, *a, **kw))(*args)
  g = np.asarray(got.astype(F32))
  w = np.asarray(want.astype(F32))
  same_nan = np.isnan(g) == np.isnan(w)
  err = float(np.nanmax(np.abs(g - w)) / max(1.0, np.nanmax(np.abs(w))))
  # The seconds each case took (compile, run, reference) name the slow one
  # should the sanitizer's run outlast its test's limit.
  print("CASE", name, paths, f"{err:.3g}",
        f"{time.perf_counter() - t0:.1f} s", flush=True)
  return same_nan.all() and err < 2 ** -5


def skinny_cases() -> bool:
  """The skinny kernel's cases, both tiles: the wide one shares data
  through distributed shared memory, the narrow one through its CTA's, so
  racecheck runs these alone."""
  ok = True
  for tile in ("wide", "narrow"):
    ok &= _skinny_tile_cases(tile)
  return ok


def _skinny_tile_cases(tile: str) -> bool:
  ok = True
  opts = dyn.KernelOptions(skinny_tile=tile)
  rows = jnp.asarray([10 ** 6, -(2 ** 31), 2 ** 31 - 1, 5], jnp.int32)
  # m <= 16; the wide tile: a cluster of 8 CTAs per column tile (n = 136:
  # two tiles, the second mostly past n; k = 1024), C its own array,
  # clamped starts; then k = 72 (one CTA per tile, a K tail).  The narrow
  # tile: 9 CTAs of 16 columns, the last one half past n.
  xk = rand(11, (20, 1024 + 8), BF16)
  wk = rand(12, (2, 1024, 136), BF16)
  ck = rand(13, (13, 136), BF16)
  outk = jnp.full((40, 144), jnp.nan, BF16)

  def skinny(mod, x, w, c, out, r, i, o):
    return mod.gemm(dyn.window(x, (r, 8), (13, 1024)),
                    dyn.window(w, (i, 0, 0), (1024, 136)), c, beta=0.5,
                    out=dyn.window(out, (o, 8), (13, 136)), opts=opts)

  ok &= check(f"skinny_{tile}", skinny, xk, wk, ck, outk, jnp.int32(-1),
              jnp.int32(10 ** 6), jnp.int32(2 ** 31 - 1))
  ok &= check(f"skinny_{tile}_k72",
              lambda mod, a, b: mod.gemm(a, b, opts=opts), xk[:5, :72],
              wk[0, :72])
  ok &= check(f"lookup_skinny_{tile}", lambda mod, x, w, rows, i: mod.gemm(
      dyn.window(x, (rows[i], 8), (13, 1024)),
      dyn.window(w, (i, 0, 0), (1024, 136)), opts=opts), xk, wk, rows,
      jnp.int32(-3))
  # B transposed (n x k rows, K contiguous), a clamped layer.
  wt = rand(14, (2, 136, 1024 + 8), BF16)
  ok &= check(f"skinny_{tile}_nt", lambda mod, x, w, i, o: mod.gemm(
      dyn.window(x, (3, 8), (13, 1024)), dyn.window(w, (i, 0, 8), (136, 1024)),
      out=dyn.window(o, (2, 8), (13, 136)), transpose_b=True, opts=opts),
      xk, wt, jnp.int32(7), outk)
  # A float32 result and C, B transposed, n = 132: the last 8-column
  # chunk half inside the window.
  out32 = jnp.full((40, 144), jnp.nan, F32)
  ok &= check(f"skinny_{tile}_f32_nt", lambda mod, x, w, c, i, o: mod.gemm(
      dyn.window(x, (3, 8), (13, 1024)), dyn.window(w, (i, 0, 8), (132, 1024)),
      c, beta=0.5, out=dyn.window(o, (2, 8), (13, 132)), transpose_b=True,
      preferred_element_type=F32, opts=opts),
      xk, wt, rand(19, (13, 132), F32), jnp.int32(-4), out32)
  return ok


def grouped_cases() -> bool:
  """The grouped kernel's cases (ragged windows): ragged_dot with an
  empty group, a group past the rows (cut), rows past the groups (zeroed
  by the pointer kernel where out is fresh), on
  the planned (wide) and the medium tile; its gradient (NT, and TN whose
  K is each group's rows, on the small-group kernel where the groups hold
  few rows: an empty group's zeros written by it, and on the CUTLASS
  kernel: by the pointer kernel); the small-group forward kernel, NN and
  NT (d lhs), planned on decode groups and forced on tall ones; a vmap
  whose out's valid parts exceed A's (zeros; 64 rows over 4 items: on the
  small-group forward kernel); ragged_dot with the swiglu epilogue fused
  (the CUTLASS kernel, and forced, the small-group forward kernel's swiglu
  line), and its gradient."""
  ok = True
  xg = rand(25, (200, 136), BF16)
  wg = rand(26, (4, 136, 72), BF16)
  gs = jnp.asarray([50, 0, 100, 90], jnp.int32)
  ok &= check("grouped_ragged_dot", lambda mod, a, b, g: mod.ragged_dot(
      a, b, g), xg, wg, gs)
  # Groups covering 110 of the 200 rows: ragged_dot's out is no operand
  # (no zero fill), and the pointer kernel zeroes rows 110-199 itself.
  ok &= check("grouped_ragged_dot_uncovered", lambda mod, a, b, g:
              mod.ragged_dot(a, b, g), xg, wg,
              jnp.asarray([60, 0, 20, 30], jnp.int32))
  # The same on the medium tile (bfloat16 NN plans the wide one).
  medium = dyn.KernelOptions(grouped_tile="medium")
  ok &= check("grouped_ragged_dot_medium", lambda mod, a, b, g: (
      mod.ragged_dot(a, b, g, opts=medium) if mod is dyn else
      mod.ragged_dot(a, b, g)), xg, wg, gs)
  ok &= check("grouped_weight_grad", lambda mod, a, b, g: jax.grad(
      lambda a, b: jnp.sum(mod.ragged_dot(a, b, g).astype(F32) ** 2),
      argnums=1)(a, b), xg, wg, jnp.asarray([60, 0, 20, 30], jnp.int32))
  # The same weight gradient on the CUTLASS kernel (200 rows over 4
  # groups plan the small-group kernel), and a decode-shaped one: 16
  # groups over 96 rows, skewed, empty groups, edge tiles (K 136, N 72).
  ok &= check("grouped_weight_grad_medium", lambda mod, a, b, g: jax.grad(
      lambda a, b: jnp.sum((mod.ragged_dot(a, b, g, opts=medium)
                            if mod is dyn else mod.ragged_dot(a, b, g)
                            ).astype(F32) ** 2),
      argnums=1)(a, b), xg, wg, jnp.asarray([60, 0, 20, 30], jnp.int32))
  ok &= check("small_group_weight_grad", lambda mod, a, b, g: jax.grad(
      lambda a, b: jnp.sum(mod.ragged_dot(a, b, g).astype(F32) ** 2),
      argnums=1)(a, b), rand(28, (96, 136), BF16),
      rand(29, (16, 136, 72), BF16),
      jnp.asarray([40, 0, 0, 1, 0, 9, 0, 0, 30, 0, 2, 0, 0, 14, 0, 0],
                  jnp.int32))
  # The small-group forward kernel (NN, and NT: d lhs) on the same decode
  # shape: 6 rows a group on average, the edge tiles of K 136 and N 72,
  # empty groups, rows past the groups; a float32 result; and forced on
  # tall groups (70 rows: two 64-row chunks of one expert, the second of 6).
  decode = (rand(28, (96, 136), BF16), rand(29, (16, 136, 72), BF16),
            jnp.asarray([40, 0, 0, 1, 0, 9, 0, 0, 30, 0, 2, 0, 0, 8, 0, 0],
                        jnp.int32))
  ok &= check("small_group_fwd", lambda mod, a, b, g: mod.ragged_dot(
      a, b, g), *decode)
  ok &= check("small_group_fwd_f32", lambda mod, a, b, g: mod.ragged_dot(
      a, b, g, preferred_element_type=F32), *decode)
  ok &= check("small_group_fwd_dlhs", lambda mod, a, b, g: jax.grad(
      lambda a, b: jnp.sum(mod.ragged_dot(a, b, g).astype(F32) ** 2),
      argnums=0)(a, b), *decode)
  small = dyn.KernelOptions(grouped_tile="small_groups")
  ok &= check("small_group_fwd_tall", lambda mod, a, b, g: jax.grad(
      lambda a, b: jnp.sum((mod.ragged_dot(a, b, g, opts=small)
                            if mod is dyn else mod.ragged_dot(a, b, g)
                            ).astype(F32) ** 2),
      argnums=0)(a, b), xg, wg, jnp.asarray([70, 0, 26, 100], jnp.int32))
  # A float32 result (its own grouped kernel), and float16's gradients.
  ok &= check("grouped_ragged_dot_f32", lambda mod, a, b, g: mod.ragged_dot(
      a, b, g, preferred_element_type=F32), xg, wg, gs)
  ok &= check("grouped_grads_f16", lambda mod, a, b, g: jax.grad(
      lambda a, b: jnp.sum(mod.ragged_dot(a, b, g).astype(F32) ** 2),
      argnums=(0, 1))(a, b)[1], xg.astype(F16), wg.astype(F16),
      jnp.asarray([60, 0, 20, 30], jnp.int32))

  def grouped_vmap(mod, a, b, out, sa, va, vd):
    return jax.vmap(lambda b, out, sa, va, vd: mod.gemm(
        dyn.window(a, (sa, 0), (64, 136), valid=(va, 136)), b,
        out=dyn.window(out, (0, 8), (64, 72), valid=(vd, 72))))(
            b, out, sa, va, vd)

  # ragged_dot with the swiglu epilogue fused: rhs's 144 interleaved
  # columns -> out 72 wide (the planner fuses where out's width is whole
  # 16-byte vectors), an empty group, rows past the groups zeroed by the
  # pointer kernel at out's width, a sum past the rows (float16); and the
  # gradient (the float32 product again, then the plain grouped calls).
  wsw = rand(27, (4, 136, 144), BF16)
  ok &= check("grouped_swiglu", lambda mod, a, b, g: mod.ragged_dot(
      a, b, g, activation="swiglu"), xg, wsw, gs)
  ok &= check("grouped_swiglu_past_m", lambda mod, a, b, g: mod.ragged_dot(
      a, b, g, activation="swiglu"), xg.astype(F16), wsw.astype(F16),
      jnp.asarray([120, 0, 30, 90], jnp.int32))
  ok &= check("grouped_swiglu_grad", lambda mod, a, b, g: jax.grad(
      lambda a, b: jnp.sum(mod.ragged_dot(
          a, b, g, activation="swiglu").astype(F32) ** 2),
      argnums=(0, 1))(a, b)[1], xg, wsw,
      jnp.asarray([60, 0, 20, 30], jnp.int32))
  # The small-group forward kernel's swiglu line, forced (the planner
  # keeps the fused CUTLASS kernel): decode groups, a tall one of two
  # chunks, rows past the groups.
  ok &= check("small_group_swiglu", lambda mod, a, b, g: (
      mod.ragged_dot(a, b, g, activation="swiglu", opts=small)
      if mod is dyn else mod.ragged_dot(a, b, g, activation="swiglu")),
      xg, wsw, jnp.asarray([70, 0, 26, 100], jnp.int32))
  ok &= check("grouped_vmap", grouped_vmap, xg, wg,
              jnp.full((4, 80, 88), jnp.nan, BF16),
              jnp.asarray([190, -3, 10 ** 6, 5], jnp.int32),
              jnp.asarray([64, 0, 17, 40], jnp.int32),
              jnp.asarray([30, 64, 64, 0], jnp.int32))
  return ok


class CompileCounter:
  """Counts compiles that went to JAX's persistent cache (all, when one is
  configured) and the ones it served, from JAX's monitoring events."""

  def __init__(self):
    self.requests = self.hits = 0
    jax.monitoring.register_event_listener(self._event)

  def _event(self, event, **kwargs):
    if event == "/jax/compilation_cache/compile_requests_use_cache":
      self.requests += 1
    elif event == "/jax/compilation_cache/cache_hits":
      self.hits += 1

  def report(self):
    print(f"COMPILES {self.requests - self.hits} of {self.requests}",
          flush=True)


def main(argv):
  compiles = CompileCounter()
  try:
    return run(argv)
  finally:
    compiles.report()


def run(argv):
  subsets = {"skinny": skinny_cases, "grouped": grouped_cases}
  if len(argv) == 1 and argv[0] in subsets:
    ok = subsets[argv[0]]()
    print("ALL_OK" if ok else "MISMATCH", flush=True)
    return 0 if ok else 1

  ok = True
  m, n, k = 72, 136, 80
  x = rand(1, (m + 16, k + 8), BF16)
  w = rand(2, (3, k, n), BF16)
  out = jnp.full((m + 24, n + 16), jnp.nan, BF16)

  def windowed(mod, x, w, out, r, i, o, opts=None):
    return mod.gemm(dyn.window(x, (r, 8), (m, k)),
                    dyn.window(w, (i, 0, 0), (k, n)),
                    out=dyn.window(out, (o, 8), (m, n)), opts=opts)

  args = (x, w, out, jnp.int32(8), jnp.int32(2), jnp.int32(16))
  for tile in plan.SM90_TILES:
    ok &= check("sm90_" + tile, windowed, *args,
                opts=dyn.KernelOptions(tile=tile))
  # Clamped (out-of-range and negative) starts.
  ok &= check("clamped", windowed, x, w, out, jnp.int32(10 ** 6),
              jnp.int32(-5), jnp.int32(2 ** 31 - 1))
  # A float32 result of bfloat16 inputs (its own kernels, every tile), and
  # float16 with B transposed on the large tile's ptr-array kernel.
  out32 = jnp.full((m + 24, n + 16), jnp.nan, F32)

  def to_f32(mod, x, w, out, r, i, o, opts=None):
    return mod.gemm(dyn.window(x, (r, 8), (m, k)),
                    dyn.window(w, (i, 0, 0), (k, n)),
                    out=dyn.window(out, (o, 8), (m, n)),
                    preferred_element_type=F32, opts=opts)

  for tile in plan.SM90_TILES:
    ok &= check("sm90_f32_out_" + tile, to_f32, x, w, out32, jnp.int32(8),
                jnp.int32(-1), jnp.int32(10 ** 6),
                opts=dyn.KernelOptions(tile=tile))
  x16, wt16 = rand(5, (m + 16, k + 8), F16), rand(6, (2, n, k), F16)
  ok &= check("sm90_f16_nt_large", lambda mod, x, w, i, opts=None: mod.gemm(
      dyn.window(x, (i, 8), (m, k)), dyn.window(w, (i, 0, 0), (n, k)),
      transpose_b=True, opts=opts), x16, wt16, jnp.int32(1),
      opts=dyn.KernelOptions(tile="large"))

  # The direct kernel (no pointer kernel): tile-multiple windows of a 3-d
  # weight stack and a 3-d cache at clamped starts; then k = 80 and a
  # 72 x 136 output that are no tile multiples but span their arrays.
  xd = rand(7, (300, 128), BF16)
  wd = rand(8, (3, 128, 128), BF16)
  cache = jnp.full((2, 600, 128), jnp.nan, BF16)

  def direct(mod, x, w, cache, r, i, l, p, opts=None):
    return mod.gemm(dyn.window(x, (r, 0), (256, 128)),
                    dyn.window(w, (i, 0, 0), (128, 128)),
                    out=dyn.window(cache, (l, p, 0), (256, 128)), opts=opts)

  xe, we = rand(9, (m, k), BF16), rand(10, (k, n), BF16)
  for tile in plan.DIRECT_TILES:
    if tile == "split_k":  # K split in two: 64- and 40-deep slices
      opts = dyn.KernelOptions(split_k=True, split_k_slices=2,
                               direct_tile=tile)
    else:
      opts = dyn.KernelOptions(
          tile=plan.DIRECT_TILE_PATHS[tile].removeprefix("sm90_"),
          direct_tile=tile)
    ok &= check("direct_" + tile, direct, xd, wd, cache, jnp.int32(10 ** 6),
                jnp.int32(-1), jnp.int32(7), jnp.int32(2 ** 31 - 1),
                opts=opts)
    ok &= check("direct_edges_" + tile,
                lambda mod, a, b, opts: mod.gemm(a, b, opts=opts), xe, we,
                opts=opts)
  # A float32 result (its own direct kernels): the cache in float32, C.
  cache32 = jnp.full((2, 600, 128), jnp.nan, F32)
  for tile in ("large", "medium", "small_m", "tiny"):
    opts = dyn.KernelOptions(tile=plan.DIRECT_TILE_PATHS[tile].removeprefix(
        "sm90_"), direct_tile=tile)
    ok &= check("direct_f32_out_" + tile, lambda mod, x, w, c, cache, r, i,
                l, p, opts: mod.gemm(
                    dyn.window(x, (r, 0), (256, 128)),
                    dyn.window(w, (i, 0, 0), (128, 128)), c, alpha=0.5,
                    beta=-1.0, out=dyn.window(cache, (l, p, 0), (256, 128)),
                    preferred_element_type=F32, opts=opts),
                xd, wd, rand(18, (256, 128), F32), cache32,
                jnp.int32(10 ** 6), jnp.int32(-1), jnp.int32(7),
                jnp.int32(2 ** 31 - 1), opts=opts)

  # The cluster-K tile at both widths: 64x32 (10 K tiles over 2 ranks, C
  # a window at a clamped start); 64x64 (forced where K is short: 5 K
  # tiles over 2 ranks, the last 44 deep, m = 40 at out's buffer edge).
  ck = dyn.KernelOptions(tile="tiny", direct_tile="cluster_k")
  xc, wc = rand(15, (200, 640), BF16), rand(16, (640, 256), BF16)
  cc, oc = rand(17, (300, 256), BF16), jnp.full((300, 320), jnp.nan, BF16)

  def cluster_k(mod, x, w, c, out, r, s, o, opts=None):
    return mod.gemm(dyn.window(x, (r, 0), (128, 640)), w,
                    dyn.window(c, (s, 0), (128, 256)),
                    out=dyn.window(out, (o, 64), (128, 256)), alpha=0.5,
                    beta=-1.0, opts=opts)

  ok &= check("direct_cluster_k_w32", cluster_k, xc, wc, cc, oc,
              jnp.int32(-1), jnp.int32(10 ** 6), jnp.int32(2 ** 31 - 1),
              opts=ck)
  xr, wr = rand(18, (40, 300), BF16), rand(19, (300, 256), BF16)
  orr = jnp.full((40, 320), jnp.nan, BF16)
  ok &= check("direct_cluster_k_w64", lambda mod, x, w, out, opts: mod.gemm(
      x, w, out=dyn.window(out, (0, 64), (40, 256)), opts=opts), xr, wr, orr,
              opts=ck)

  # The transposed direct kernels (bfloat16 NT / TN): x^T @ y and x @ w^T
  # with windows at clamped starts.
  xt = rand(11, (300, 256), BF16)   # stored k x m: 192 rows of it
  wt = rand(12, (3, 128, 192), BF16)  # stored n x k
  yt = rand(13, (250, 128), BF16)

  def direct_tn(mod, x, y, cache, r, s, opts=None):
    return mod.gemm(dyn.window(x, (r, 0), (192, 256)),
                    dyn.window(y, (s, 0), (192, 128)),
                    out=dyn.window(cache, (1, 0, 0), (256, 128)),
                    transpose_a=True, opts=opts)

  def direct_nt(mod, x, w, cache, r, i, opts=None):
    return mod.gemm(dyn.window(x, (r, 0), (256, 192)),
                    dyn.window(w, (i, 0, 0), (128, 192)),
                    out=dyn.window(cache, (0, 300, 0), (256, 128)),
                    transpose_b=True, opts=opts)

  xn = rand(14, (300, 192), BF16)
  for tile in ("medium", "small_m", "tiny"):
    opts = dyn.KernelOptions(
        tile=plan.DIRECT_TILE_PATHS[tile].removeprefix("sm90_"),
        direct_tile=tile)
    ok &= check("direct_tn_" + tile, direct_tn, xt, yt, cache,
                jnp.int32(10 ** 6), jnp.int32(-3), opts=opts)
    ok &= check("direct_nt_" + tile, direct_nt, xn, wt, cache,
                jnp.int32(2 ** 31 - 1), jnp.int32(-1), opts=opts)

  ok &= skinny_cases()

  # Generic kernel: odd static column start, every transpose.
  def odd(mod, a, b, out, r, o, ta, tb):
    wa = (k, m) if ta else (m, k)
    wb = (n, k) if tb else (k, n)
    return mod.gemm(dyn.window(a, (r, 1), wa), dyn.window(b, (0, 1), wb),
                    out=dyn.window(out, (o, 3), (m, n)), transpose_a=ta,
                    transpose_b=tb)

  big = rand(3, (160, 160), F16)
  out16 = jnp.full((m + 24, n + 16), jnp.nan, F16)
  for ta in (False, True):
    for tb in (False, True):
      ok &= check(f"generic_{int(ta)}{int(tb)}",
                  lambda mod, *a, ta=ta, tb=tb: odd(mod, *a, ta, tb),
                  big, big, out16, jnp.int32(4), jnp.int32(7))

  # C from D's buffer, partly overlapping (copied to scratch first).
  def overlap(mod, buf, x, w, cr, dr):
    return mod.gemm(x, w, dyn.window(buf, (cr, 0), (m, n)),
                    out=dyn.window(buf, (dr, 0), (m, n)), alpha=0.5,
                    beta=-1.0)

  buf = rand(4, (3 * m, n), BF16)
  ok &= check("c_overlap", overlap, buf, x[:m, :k], w[0], jnp.int32(m + 5),
              jnp.int32(m))

  # Split-K (skinny m) with beta * C.
  xs = rand(5, (16, 1024), BF16)
  ws = rand(6, (1024, 256), BF16)
  cs = rand(7, (16, 256), F32)
  ok &= check("split_k", lambda mod, x, w, c, opts: mod.gemm(
      x, w, c, beta=2.0, preferred_element_type=F32, opts=opts),
              xs, ws, cs, opts=dyn.KernelOptions(split_k=True))

  # Starts read from tables on the device (table[i], i a plain value): the
  # index past both ends of the table and entries past both ends of the
  # arrays, on each kernel family that reads its starts itself.
  rows = jnp.asarray([10 ** 6, -(2 ** 31), 2 ** 31 - 1, 5], jnp.int32)

  def lookup(mod, x, w, out, rows, i, j, ta=False, opts=None):
    xa = (dyn.window(x, (0, rows[j]), (k, 64)) if ta else
          dyn.window(x, (rows[j], 0), (64, k)))
    return mod.gemm(xa, dyn.window(w, (i, 0, 0), (k, 128)),
                    out=dyn.window(out, (rows[i], 0), (64, 128)),
                    transpose_a=ta, opts=opts)

  xl = rand(14, (200, k), BF16)
  wl = rand(15, (3, k, 128), BF16)
  outl = jnp.full((130, 128), jnp.nan, BF16)
  for name, ta, opts in (("direct", False, None),
                         ("ptr_array", False, dyn.KernelOptions(direct=False)),
                         ("generic", False, dyn.KernelOptions(sm90=False))):
    ok &= check("lookup_" + name,
                lambda mod, *a, ta=ta, opts=opts: lookup(mod, *a, ta=ta,
                                                         opts=opts),
                xl, wl, outl, rows, jnp.int32(-7), jnp.int32(9))
  ok &= check("lookup_transposed",
              lambda mod, *a: lookup(mod, *a, ta=True),
              rand(16, (k, 200), BF16), wl, outl, rows, jnp.int32(2),
              jnp.int32(-1))

  # float32 on the SM90 TF32 kernels: every transpose (the staging of
  # MN-major operands), both tiles, TF32 and 3xTF32 (HIGHEST: both operands
  # staged as TF32 parts, K = 3 x 61 padded to 184), clamped starts; a
  # batch of staged items.
  def f32(mod, a, b, out, r, o, ta, tb, kk, prec, opts=None):
    wa = (kk, m) if ta else (m, kk)
    wb = (n, kk) if tb else (kk, n)
    return mod.gemm(dyn.window(a, (r, 4), wa), dyn.window(b, (0, 4), wb),
                    out=dyn.window(out, (o, 8), (m, n)), transpose_a=ta,
                    transpose_b=tb, precision=prec, opts=opts)

  a32 = rand(17, (160, 160), F32)
  out32 = jnp.full((m + 24, n + 16), jnp.nan, F32)
  for ta in (False, True):
    for tb in (False, True):
      for kk, prec, tile in ((k, None, "medium"), (61, lax.Precision.HIGHEST, "large")):
        name = f"sm90_tf32_{int(ta)}{int(tb)}_{'highest' if prec else 'tf32'}"
        ok &= check(name,
                    lambda mod, *a, ta=ta, tb=tb, kk=kk, prec=prec, **kw:
                    f32(mod, *a, ta, tb, kk, prec, **kw),
                    a32, a32, out32, jnp.int32(10 ** 6), jnp.int32(-3),
                    opts=dyn.KernelOptions(tile=tile))
  ok &= check("sm90_tf32_vmap", lambda mod, xb, w: jax.vmap(
      lambda xi: mod.gemm(xi, w, precision=lax.Precision.HIGHEST))(xb),
              rand(18, (3, m, k), F32), rand(19, (k, n), F32))

  # The direct float32 NN kernels (TF32, no staging; D^T computed into the
  # row-major window), each tile: windows of a weight stack and a 3-d
  # cache at clamped starts, C at a clamped row; 3 column tiles in a
  # wider out (the large tile's CTA pair rounds them up to 4: the 4th must
  # store nothing); then k = 80 and a 72 x 136 output that are no tile
  # multiples but span their arrays.
  xf = rand(20, (300, 128), F32)
  wf = rand(21, (3, 128, 512), F32)
  cf = rand(22, (280, 384), F32)
  cachef = jnp.full((2, 600, 512), jnp.nan, F32)

  def direct_f32(mod, x, w, c, cache, r, i, l, p, opts=None):
    return mod.gemm(dyn.window(x, (r, 0), (256, 128)),
                    dyn.window(w, (i, 0, 0), (128, 384)),
                    dyn.window(c, (p, 0), (256, 384)), beta=-0.5,
                    out=dyn.window(cache, (l, p, 0), (256, 384)), opts=opts)

  xe32, we32 = rand(23, (m, k), F32), rand(24, (k, n), F32)
  for tile in ("large", "medium"):
    opts = dyn.KernelOptions(tile=tile, direct_tile=tile)
    ok &= check("direct_f32_" + tile, direct_f32, xf, wf, cf, cachef,
                jnp.int32(10 ** 6), jnp.int32(-1), jnp.int32(7),
                jnp.int32(2 ** 31 - 1), opts=opts)
    ok &= check("direct_f32_edges_" + tile,
                lambda mod, a, b, opts: mod.gemm(a, b, opts=opts), xe32,
                we32, opts=opts)

  ok &= grouped_cases()

  # A batch (vmap) and k = 0.
  xb = rand(8, (4, m, k), BF16)
  ok &= check("vmap", lambda mod, xb, w: jax.vmap(
      lambda xi: mod.gemm(xi, w))(xb), xb, w[1])
  ok &= check("k0", lambda mod, c: mod.gemm(jnp.zeros((m, 0), F32),
                                            jnp.zeros((0, n), F32), c,
                                            beta=3.0), rand(9, (m, n), F32))
  print("ALL_OK" if ok else "MISMATCH", flush=True)
  return 0 if ok else 1


if __name__ == "__main__":
  sys.exit(main(sys.argv[1:]))
