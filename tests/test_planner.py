"""The one planner (ffi/planner.cc) through the extension: it reproduces
the decisions the Python planner made before it moved to C++, and the
attributes the CUDA lowering emits carry its answer.  No GPU needed."""

from __future__ import annotations

import dataclasses
import json

import ml_dtypes
import numpy as np
import pytest

from jax_dynoff import options
from jax_dynoff import plan as plan_lib
from jax_dynoff.extension import ext
from jax_dynoff.options import KernelOptions
from jax_dynoff.spec import GemmSpec, WinSpec, call_attrs
import planner_cases

BF16 = np.dtype(ml_dtypes.bfloat16)


def _golden():
  with open(planner_cases.GOLDEN) as f:
    return json.load(f)


def test_golden_decisions_are_reproduced():
  """Path, split_k, direct tile, skinny split, workspace bytes and which
  reasons lists are empty, for 3,000 random specs on 132, 114 and 78 SMs."""
  cases = _golden()
  assert len(cases) == 3000
  bad = []
  for i, (j, want) in enumerate(cases):
    spec = planner_cases.spec_from_json(j)
    assert planner_cases.spec_to_json(spec) == j
    for sms in planner_cases.SM_COUNTS:
      w = want[str(sms)] if isinstance(want, dict) else want
      got = planner_cases.decision_on(plan_lib, spec, sms)
      if got != w:
        bad.append((i, sms, w, got))
  assert not bad, f"{len(bad)} decisions differ, first: {bad[:3]}"


def _spec(m=512, n=4096, k=4096, opts=KernelOptions(), d=None, c=None,
          c_mode="none", beta=0.0, dt=BF16, tb=False, out_dt=None):
  bk = (n, k) if tb else (k, n)
  return GemmSpec(
      m=m, n=n, k=k, a=WinSpec((m, k), (m, k), (0, 0)),
      b=WinSpec(bk, bk, (0, 0)), c=c,
      d=d or WinSpec((m, n), (m, n), (0, 0)), in_dtype=dt,
      out_dtype=dt if out_dt is None else out_dt,
      trans_a=False, trans_b=tb, c_mode=c_mode, has_out=False,
      alpha=1.0, beta=beta, precision="default", opts=opts)


def _ask(spec, sms=132, cc=(9, 0)):
  return ext.plan(call_attrs(spec), sms, *cc)


def _check(spec, path, split_k=1, **kernel):
  """The CUDA handler's check of a call planned for `path` with the
  planned kernel `kernel` (PlannedKernel fields)."""
  p = plan_lib.Plan(path, split_k, 0, plan_lib.PlannedKernel(**kernel))
  return ext.check_planned(call_attrs(spec, plan=p.attrs()))


def test_module_plan_answers_everything():
  a = _ask(_spec())
  assert a["error"] == ""
  assert (a["path"], a["split_k"], a["direct_tile"]) == (
      "sm90_medium", 1, "medium")
  assert a["workspace"]["total"] == plan_lib.SM90_KERNEL_WORKSPACE + 256
  assert a["sm90_reasons"] == [] and a["direct_reasons"] == []
  assert a["skinny_reasons"] == ["m = 512 > 16"]
  assert a["split_k_reasons"] == ["m = 512 > 256"]
  assert a["explain"].startswith("sm90_medium (direct kernel, medium tile")
  assert set(a["tile_times"]) == set(plan_lib.SM90_TILES)
  assert min(a["tile_times"], key=a["tile_times"].get) == "medium"
  # The planned kernel: the direct tile, no skinny split or cluster-K width.
  assert a["kernel"] == dict(direct_tile="medium", skinny_split=0,
                             cluster_k_tile_n=0, grouped_tile="medium",
                             fresh_out=False, skinny_tile="wide")


def test_module_plan_takes_the_device():
  """The SM count moves the wave model; a GPU other than compute
  capability 9.0 gets no SM90 path, and the reasons say so."""
  s = _spec(m=2048, n=2048, k=2048)
  assert _ask(s, sms=132)["path"] == "sm90_large"
  a = _ask(s, cc=(8, 0))
  assert a["path"] == "generic"
  assert a["workspace"]["total"] == 256
  assert any("compute capability 8.0" in r for r in a["sm90_reasons"])
  assert a["explain"].startswith("generic: compute capability 8.0")
  assert any("compute capability" in r
             for r in _ask(_spec(m=16, opts=KernelOptions(split_k=True)),
                           cc=(8, 0))["split_k_reasons"])


def test_module_plan_forced_slices_error():
  s = _spec(m=16, opts=KernelOptions(split_k=True, split_k_slices=3))
  a = _ask(s)
  assert a["error"].startswith("split_k_slices=3: k = 4096")
  with pytest.raises(ValueError, match="split_k_slices=3"):
    plan_lib.plan(s)
  attrs = call_attrs(s)
  for option in ("tile", "grouped_tile", "skinny_tile", "direct_tile"):
    bad = dict(attrs, options=dict(attrs["options"], **{option: "huge"}))
    with pytest.raises(ValueError,
                       match=f"attribute options.{option}: unknown tile"):
      ext.plan(bad, 132, 9, 0)


def test_skinny_plan_carries_split_and_fallback_tile():
  """The skinny path's planned kernel: its split on the device's SMs, and
  the direct tile of its fallback: the tiny path's, here the cluster-K
  tile 64 wide on 132 SMs (64 tiles, 128 CTAs), the tiny tile on 78."""
  s = _spec(m=16)
  p = plan_lib.plan(s)
  assert p.path == "sm90_skinny"
  ck = plan_lib.PlannedKernel("cluster_k", 4, 64)
  assert p.kernel == ck
  assert _ask(s, sms=78)["kernel"] == dict(
      direct_tile="tiny", skinny_split=plan_lib.skinny_split(s, 78),
      cluster_k_tile_n=0, grouped_tile="medium",
      fresh_out=False, skinny_tile="wide")
  # D inside a taller buffer of 16 rows: the tiny tile cannot store it,
  # the cluster-K tile (stores predicated on the window) can, on 78 SMs too.
  d = WinSpec((48, 4096), (16, 4096), (None, 0))
  assert plan_lib.plan(_spec(m=16, d=d)).kernel == ck
  assert _ask(_spec(m=16, d=d), sms=78)["kernel"] == dict(
      direct_tile="cluster_k", skinny_split=plan_lib.skinny_split(s, 78),
      cluster_k_tile_n=64, grouped_tile="medium",
      fresh_out=False, skinny_tile="wide")


def test_skinny_tile_rule():
  """The skinny path's tile: narrow (16 columns a CTA over all of K, no
  cluster, so split 1) where its n / 16 CTAs fit one wave at
  SKINNY_NARROW_CTAS_PER_SM an SM and, NN, K <= SKINNY_NARROW_MAX_K, or K
  <= SKINNY_NARROW_LONG_MAX_K and n <= SKINNY_NARROW_LONG_MAX_N; NT, K <=
  SKINNY_NARROW_NT_MAX_K; wide elsewhere; a forced tile where built; the
  wide tile's split stays in the answer."""
  kmax = plan_lib.SKINNY_NARROW_MAX_K
  klong, nlong = (plan_lib.SKINNY_NARROW_LONG_MAX_K,
                  plan_lib.SKINNY_NARROW_LONG_MAX_N)
  knt, per_sm = (plan_lib.SKINNY_NARROW_NT_MAX_K,
                 plan_lib.SKINNY_NARROW_CTAS_PER_SM)
  assert (kmax, klong, nlong, knt, per_sm) == (1024, 2048, 2048, 3072, 2)
  assert plan_lib.SKINNY_TILES == options.SKINNY_TILES
  # On 132 SMs (plan's device where none is visible): one wave is n <= 16
  # * 2 * 132 = 4224.
  wave_n = 16 * per_sm * 132
  for m, n, k, tb, want in [
      (1, 512, 1024, False, "narrow"), (8, 4096, 512, False, "narrow"),
      (16, 4096, kmax, False, "narrow"), (16, 4096, kmax + 8, False, "wide"),
      (16, nlong, kmax + 8, False, "narrow"),
      (16, nlong + 8, kmax + 8, False, "wide"),
      (16, nlong, klong, False, "narrow"),
      (1, 512, klong + 8, False, "wide"),
      (16, 4096, 4096, False, "wide"), (5, 136, 72, False, "narrow"),
      # NT: up to its own K bound, whatever n within the wave.
      (16, 4096, knt, True, "narrow"), (8, 1536, klong + 8, True, "narrow"),
      (16, 4096, knt + 8, True, "wide"), (16, 4096, 4096, True, "wide"),
      # The wave: past it the wide tile, NN or NT, however short K.
      (8, wave_n, 1024, False, "narrow"), (8, wave_n + 8, 1024, False, "wide"),
      (16, 8192, 512, True, "wide"), (1, 8192, 1536, False, "wide")]:
    s = _spec(m=m, n=n, k=k, tb=tb)
    p = plan_lib.plan(s)
    assert p.path == "sm90_skinny", (m, n, k, tb)
    assert plan_lib.skinny_tile(s) == p.kernel.skinny_tile == want, (
        m, n, k, tb)
    assert p.kernel.skinny_split == (
        1 if want == "narrow" else plan_lib.skinny_split(s)), (m, n, k, tb)
    assert ("narrow tile: 16 columns a CTA" in plan_lib.explain(s)) == (
        want == "narrow")
    assert ext.check_planned(plan_lib.attrs(s)) == ""
    for forced in plan_lib.SKINNY_TILES:
      f = _spec(m=m, n=n, k=k, tb=tb, opts=KernelOptions(skinny_tile=forced))
      assert plan_lib.plan(f).kernel.skinny_tile == forced
      assert ext.check_planned(plan_lib.attrs(f)) == ""
  # The wave is the device's: n = 4096 is 256 CTAs, one wave at two an SM
  # on 132 SMs, two waves on 78.
  s = _spec(m=8, n=4096, k=1024)
  assert _ask(s, sms=132)["kernel"]["skinny_tile"] == "narrow"
  assert _ask(s, sms=78)["kernel"]["skinny_tile"] == "wide"
  # B transposed and a float32 result: the narrow lines are built too.
  for tb, out in [(True, None), (False, np.dtype(np.float32)),
                  (True, np.dtype(np.float32))]:
    s = _spec(m=8, n=1024, k=512, tb=tb, out_dt=out)
    assert plan_lib.plan(s).kernel.skinny_tile == "narrow", (tb, out)
  # Off the skinny path the tile is wide, forced or not.
  s = _spec(opts=KernelOptions(skinny_tile="narrow"))
  assert plan_lib.plan(s).path == "sm90_medium"
  assert plan_lib.plan(s).kernel.skinny_tile == "wide"


def test_handler_refuses_a_bad_skinny_tile():
  s = _spec(m=16, n=512, k=512)
  assert _check(s, "sm90_skinny", skinny_split=1, skinny_tile="narrow") == ""
  assert _check(s, "sm90_skinny", skinny_split=4, skinny_tile="wide") == ""
  assert "bad skinny tile" in _check(s, "sm90_skinny", skinny_split=4,
                                     skinny_tile="narrow")
  assert "bad skinny tile" in _check(_spec(), "sm90_medium",
                                     skinny_tile="narrow")
  with pytest.raises(ValueError, match="attribute plan.skinny_tile: unknown"):
    _check(s, "sm90_skinny", skinny_split=1, skinny_tile="huge")


def test_lowered_attributes_carry_the_plan():
  for s in (_spec(), _spec(m=16), _spec(m=16, opts=KernelOptions(
      split_k=True)), _spec(m=2048, n=2048, k=2048), _spec(dt=np.dtype(
          np.float32))):
    p = plan_lib.plan(s)
    a = plan_lib.attrs(s)
    assert a["plan"] == dict(path=p.path, split_k=p.split_k,
                             **dataclasses.asdict(p.kernel)), s
    assert ext.check_planned(a) == ""


def test_handler_refuses_a_plan_the_rules_reject():
  """The CUDA handler's instantiate stage checks the call's plan with
  the planner's own rules (ext.check_planned runs that check)."""
  s = _spec()
  assert _check(s, "sm90_medium", direct_tile="medium") == ""
  assert _check(s, "sm90_medium") == ""          # the ptr-array kernel
  assert "not a tile of sm90_medium" in _check(s, "sm90_medium",
                                               direct_tile="large")
  assert "bad skinny split" in _check(s, "sm90_medium", skinny_split=1)
  assert "not a tile of generic" in _check(s, "generic", direct_tile="tiny")
  assert "outside the split-K path" in _check(s, "sm90_medium", split_k=2)
  # An unaligned window planned for SM90.
  a = WinSpec((512, 4100), (512, 4096), (0, 3))
  bad = dataclasses.replace(s, a=a)
  assert "a: " in _check(bad, "sm90_medium")
  assert _check(bad, "generic") == ""
  # The skinny path: m <= 16 and a split of 1..8.
  assert "m = 512 > 16" in _check(s, "sm90_skinny", skinny_split=1)
  assert "bad skinny split" in _check(_spec(m=16), "sm90_skinny")
  assert _check(_spec(m=16), "sm90_skinny", skinny_split=4,
                direct_tile="tiny") == ""
  # Split-K: the slices must split K into equal 16-byte slices.
  s16 = _spec(m=16)
  assert _check(s16, "sm90_split_k", split_k=4) == ""
  assert "split_k_slices=3" in _check(s16, "sm90_split_k", split_k=3)
  # D inside a taller buffer: no direct store of 16 rows in 128-row tiles.
  d = WinSpec((48, 4096), (16, 4096), (None, 0))
  assert "out: m = 16" in _check(_spec(m=16, d=d), "sm90_split_k", split_k=4,
                                 direct_tile="split_k")
  # The cluster-K tile: a width of 32 or 64, on the tiny path only; no
  # width for another tile.
  s128 = _spec(m=128, n=1024, k=1024)
  for width in (32, 64):
    assert _check(s128, "sm90_tiny", direct_tile="cluster_k",
                  cluster_k_tile_n=width) == ""
  for width in (0, 96, 128):
    assert "bad cluster-K width" in _check(
        s128, "sm90_tiny", direct_tile="cluster_k", cluster_k_tile_n=width)
  assert "bad cluster-K width" in _check(s128, "sm90_tiny", direct_tile="tiny",
                                         cluster_k_tile_n=32)
  assert "not a tile of sm90_small_m" in _check(
      s128, "sm90_small_m", direct_tile="cluster_k", cluster_k_tile_n=32)
  assert _check(_spec(m=16), "sm90_skinny", direct_tile="cluster_k",
                skinny_split=4, cluster_k_tile_n=64) == ""
  # Unknown names are refused by the decoder, naming the attribute.
  with pytest.raises(ValueError, match="attribute plan.path: unknown value"):
    _check(s, "sm90_huge")
  with pytest.raises(ValueError, match="attribute plan.direct_tile: unknown"):
    _check(s, "sm90_medium", direct_tile="huge")


def test_cluster_k_plan_in_the_attributes():
  """The cluster-K tile's width reaches the lowered call's plan (64x32 at
  128x1024x1024 on 132 SMs, 64x64 on 78), and the handler's check accepts
  it."""
  s = _spec(m=128, n=1024, k=1024,
            opts=KernelOptions(tile="tiny", direct_tile="cluster_k"))
  p = plan_lib.plan(s)
  a = plan_lib.attrs(s)
  assert p.kernel == plan_lib.PlannedKernel("cluster_k", 0, 32)
  assert a["plan"]["direct_tile"] == "cluster_k"
  assert a["plan"]["cluster_k_tile_n"] == 32
  assert ext.check_planned(a) == ""
  assert _ask(s)["cluster_k_tile_n"] == 32
  assert _ask(s, sms=78)["kernel"]["cluster_k_tile_n"] == 64


def test_tables_come_from_the_planner():
  assert plan_lib.PATHS == {"generic": 0, "sm90_large": 1, "sm90_small_m": 2,
                            "sm90_split_k": 3, "sm90_medium": 4,
                            "sm90_tiny": 5, "tf32": 6, "sm90_skinny": 7,
                            "sm90_grouped": 8}
  from jax_dynoff import options
  assert plan_lib.SM90_TILES == options.SM90_TILES
  assert tuple(plan_lib.DIRECT_TILES) == options.DIRECT_TILES
  assert tuple(plan_lib.GROUPED_TILES) == options.GROUPED_TILES
  assert plan_lib.DIRECT_TILES["wide"] == (128, 256)
  assert plan_lib.DIRECT_TILE_PATHS["wide"] == "sm90_large"
  # 16-bit: every dtype pair of one input dtype and every transpose but
  # both, at every tile; float32: every transpose (staged), two tiles.
  sixteen = [(i, o, ta, tb) for i in ("bfloat16", "float16")
             for o in (i, "float32")
             for ta, tb in ((False, False), (False, True), (True, False))]
  f32 = [("float32", "float32", ta, tb) for ta in (False, True)
         for tb in (False, True)]
  assert sorted(plan_lib.SM90_KERNELS) == sorted(sixteen + f32)
  for key in sixteen:
    assert plan_lib.SM90_KERNELS[key] == plan_lib.SM90_TILES, key
  assert plan_lib.SM90_KERNELS[("float32", "float32", True, True)] == (
      "large", "medium")


def test_catalogue_is_the_generated_table():
  """plan.CATALOGUE (the extension's table) holds ffi/kernels/catalogue.py's
  lines, in its order, with their dtypes, tiles and layouts."""
  import importlib.util  # pylint: disable=g-import-not-at-top
  import os  # pylint: disable=g-import-not-at-top
  path = os.path.join(os.path.dirname(__file__), "..", "ffi", "kernels",
                      "catalogue.py")
  spec = importlib.util.spec_from_file_location("catalogue_source", path)
  src = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(src)
  names = {"bf16": "bfloat16", "f16": "float16", "f32": "float32"}
  lines = [k for u in src.UNITS for k in u.kernels]
  assert [l.name for l in plan_lib.CATALOGUE] == [k.name for k in lines]
  for got, k in zip(plan_lib.CATALOGUE, lines):
    kind = src.KINDS[k.kind]
    i, o = k.dtypes.split("->")
    assert (got.family, got.in_dtype, got.out_dtype) == (
        kind.family, names[i], names[o]), k.name
    assert set(got.tiles) == set(k.tile.split("|") if k.tile else ()), k.name
    assert set(got.layouts) == (set(src.LAYOUTS) if kind.any_layout
                                else {k.layout}), k.name


# --- float32: the SM90 TF32 kernels, 3xTF32 at HIGHEST, the fallbacks. -------

F32 = np.dtype(np.float32)


def _f32(m=1024, n=1024, k=1024, ta=False, tb=False, precision="default",
         a=None, b=None, d=None, batch_shape=(), opts=KernelOptions()):
  a = a or WinSpec((k, m) if ta else (m, k), (k, m) if ta else (m, k), (0, 0))
  b = b or WinSpec((n, k) if tb else (k, n), (n, k) if tb else (k, n), (0, 0))
  d = d or WinSpec((m, n), (m, n), (0, 0), (True,) * len(batch_shape))
  return GemmSpec(m=m, n=n, k=k, a=a, b=b, c=None, d=d, in_dtype=F32,
                  out_dtype=F32, trans_a=ta, trans_b=tb, c_mode="none",
                  has_out=False, alpha=1.0, beta=0.0, precision=precision,
                  batch_shape=batch_shape, opts=opts)


def _layout(spec):
  p = plan_lib.plan(spec)
  return p, plan_lib.workspace_layout(spec, p.path, p.split_k, p.kernel)


@pytest.mark.parametrize("ta,tb,staged", [
    (False, False, "B"), (False, True, None), (True, False, "A and B"),
    (True, True, "A")])
def test_f32_default_runs_sm90_tf32_staging_mn_major_operands(ta, tb, staged):
  """float32 at default precision takes an SM90 tile; the ptr-array
  kernels read A and B K-major, so A transposed or B not transposed is
  staged (NN: where the ptr-array kernel runs, here by the options)."""
  m, n, k = 1024, 768, 512
  nn = not ta and not tb
  s = _f32(m, n, k, ta=ta, tb=tb, opts=KernelOptions(direct=not nn))
  p, w = _layout(s)
  assert p.path in ("sm90_large", "sm90_medium")
  e = plan_lib.explain(s)
  assert e.startswith(p.path + " (TF32 wgmma, ptr-array kernel"), e
  if staged:
    assert f", {staged} staged K-major;" in e, e
  else:
    assert "staged" not in e, e
  assert w.stage_a_item == (m * k * 4 if ta else 0)
  assert w.stage_b_item == (n * k * 4 if not tb else 0)
  assert w.total == (w.stage_b + w.stage_b_item if staged else w.stage_ptrs)
  assert p.workspace_bytes == w.total
  if nn:  # planned, kept off by the options
    assert plan_lib.direct_kernel(s) == p.path[len("sm90_"):]
    assert "(KernelOptions(direct=False))" in e, e
  else:  # float32's direct kernels are NN only
    assert plan_lib.direct_kernel(s) is None
    assert plan_lib.direct_reasons(s) == ["transposed operand"]


def test_f32_nn_runs_the_direct_tf32_kernel():
  """float32 NN at default precision: the direct TF32 kernel of the
  planned tile, nothing staged (no workspace for B's copy), where the
  direct rules hold with float32's K tile of 32 and B aligned."""
  for m, n, k in ((1024, 768, 512), (2048, 2048, 2048), (4096, 8192, 8192)):
    s = _f32(m, n, k)
    p, w = _layout(s)
    tile = p.path[len("sm90_"):]
    assert tile in ("large", "medium")
    assert plan_lib.direct_kernel(s) == tile
    assert plan_lib.direct_reasons(s) == []
    assert plan_lib.explain(s).startswith(
        f"{p.path} (TF32 wgmma, direct kernel, {tile} tile, B read in "
        "place; workspace"), plan_lib.explain(s)
    assert w.stage_a_item == w.stage_b_item == 0
    assert p.workspace_bytes == w.total == w.stage_ptrs
    # The ptr-array layout of the same path stages B.
    staged = plan_lib.workspace_layout(s, p.path)
    assert staged.stage_b_item == n * k * 4 and staged.total > w.total
    assert ext.check_planned(plan_lib.attrs(s)) == ""
  # m above 4096: the staged ptr-array kernel (B's copy costs less than
  # the register-sourced mainloop); a forced direct tile still runs.
  s = _f32(4104, 2048, 2048)
  assert plan_lib.direct_kernel(s) is None
  assert plan_lib.direct_reasons(s) == [
      "m = 4104 > 4096: staging B costs less than the register-sourced "
      "mainloop"]
  assert _layout(s)[1].stage_b_item == 2048 * 2048 * 4
  s = _f32(8192, 8192, 8192, opts=KernelOptions(tile="large",
                                                direct_tile="large"))
  assert plan_lib.direct_kernel(s) == "large"
  assert _layout(s)[1].stage_b_item == 0
  # KernelOptions(direct=False): the same tile planned, B's copy reserved.
  s = _f32(opts=KernelOptions(direct=False))
  p, w = _layout(s)
  assert plan_lib.direct_kernel(s) == p.path[len("sm90_"):]
  assert w.stage_b_item == 1024 * 1024 * 4
  # K of 260 (no multiple of 32): direct where the windows span it, not
  # inside a wider A.
  assert plan_lib.direct_reasons(_f32(512, 512, 260)) == []
  a = WinSpec((512, 264), (512, 260), (None, 0))
  s = _f32(512, 512, 260, a=a)
  assert plan_lib.direct_reasons(s) == [
      "a: k = 260 neither a multiple of 32 nor the array's width"]
  e = plan_lib.explain(s)
  assert "ptr-array kernel (not direct: a: k = 260" in e, e
  assert ", B staged K-major;" in e, e
  assert plan_lib.plan(s).workspace_bytes == _layout(s)[1].stage_b + (
      512 * 260 * 4)
  # B not aligned: staged (any alignment), not direct.
  odd_b = WinSpec((513, 770), (512, 768), (1, 1))
  s = _f32(1024, 768, 512, b=odd_b)
  assert plan_lib.plan(s).path in ("sm90_large", "sm90_medium")
  assert [r[:3] for r in plan_lib.direct_reasons(s)] == ["b: "]
  # ... and a plan that claims the direct tile for it is refused.
  path = plan_lib.plan(s).path
  assert "b: " in _check(s, path, direct_tile=path[len("sm90_"):])
  # D no tile multiple inside a taller buffer; HIGHEST; batches; a tile
  # float32 has no direct twin of.
  d = WinSpec((1100, 1024), (1000, 1024), (None, 0))
  assert any(r.startswith("out: m = 1000") for r in plan_lib.direct_reasons(
      _f32(1000, 1024, 1024, d=d)))
  assert plan_lib.direct_reasons(_f32(precision="highest")) == [
      "float32 at precision=HIGHEST (3xTF32 on staged operands)"]
  assert plan_lib.direct_reasons(_f32(256, 256, 256, batch_shape=(8,))) == [
      "8 batch items"]
  s = _f32(8192, 8192, 8192, opts=KernelOptions(tile="large",
                                                direct_tile="wide"))
  assert plan_lib.direct_reasons(s) == [
      "direct_tile=wide: not built for these dtypes and transposes"]
  # No float32 split-K kernel, direct or not.
  assert plan_lib.answer(_f32())["split_k_direct_reasons"] == [
      "no float32 direct kernel for sm90_split_k"]


def test_f32_highest_runs_3xtf32_on_staged_parts():
  """HIGHEST: both operands staged as TF32 parts along K x 3, rounded up
  to 4 elements (16-byte TMA rows)."""
  m, n, k = 300, 132, 257
  s = _f32(m, n, k, ta=True, precision="highest")
  p, w = _layout(s)
  assert p.path in ("sm90_large", "sm90_medium")
  assert "3xTF32 wgmma" in plan_lib.explain(s)
  kk = 3 * k + 1  # 771 -> 772
  assert w.stage_a_item == -(-m * kk * 4 // 256) * 256
  assert w.stage_b_item == -(-n * kk * 4 // 256) * 256
  assert w.stage_b == w.stage_a + w.stage_a_item


def test_f32_staged_operands_need_no_alignment_proof():
  """An operand read from its staged copy may sit anywhere (the staging
  reads element by element); one read in place needs the proof, else the
  CUTLASS 2.x TF32 kernel runs (HIGHEST: the generic one)."""
  odd_b = WinSpec((513, 770), (512, 768), (1, 1))   # B staged in NN
  s = _f32(1024, 768, 512, b=odd_b)
  assert plan_lib.alignment_proof(s) == {}
  assert plan_lib.plan(s).path in ("sm90_large", "sm90_medium")
  odd_a = WinSpec((1025, 515), (1024, 512), (1, 3))  # A in place in NN
  s = _f32(1024, 768, 512, a=odd_a)
  assert set(plan_lib.alignment_proof(s)) == {"a"}
  assert plan_lib.plan(s).path == "tf32"
  assert plan_lib.explain(s).startswith("tf32 (CUTLASS 2.x mma.sync, any "
                                        "alignment: a: ")
  # HIGHEST stages both: only D must be aligned.
  s = _f32(1024, 768, 512, a=odd_a, b=odd_b, precision="highest")
  assert plan_lib.plan(s).path in ("sm90_large", "sm90_medium")
  odd_d = WinSpec((1024, 771), (1024, 768), (0, 3))
  s = _f32(1024, 768, 512, d=odd_d, precision="highest")
  assert plan_lib.plan(s).path == "generic"
  assert "d: " in plan_lib.explain(s)
  assert plan_lib.plan(_f32(1024, 768, 512, d=odd_d)).path == "tf32"


def test_f32_tiles_and_the_wave_model():
  """The wave model picks among the two float32 tiles; a forced tile not
  built for float32 is ignored, a built one is honoured."""
  for m, n, k in ((512, 512, 512), (2048, 2048, 2048), (8192, 8192, 8192),
                  (128, 4096, 4096)):
    s = _f32(m, n, k)
    t = plan_lib.sm90_tile_times(s)
    best = min(("large", "medium"), key=t.get)
    assert plan_lib.plan(s).path == "sm90_" + best
  s = _f32(8192, 8192, 8192, opts=KernelOptions(tile="tiny"))
  assert plan_lib.plan(s).path in ("sm90_large", "sm90_medium")
  s = _f32(8192, 8192, 8192, opts=KernelOptions(tile="medium"))
  assert plan_lib.plan(s).path == "sm90_medium"


def test_f32_batched_and_staging_bound():
  """Batched calls take the ptr-array kernels too; staged copies above
  4 GiB keep the CUTLASS 2.x kernels."""
  s = _f32(256, 256, 256, batch_shape=(8,))
  p, w = _layout(s)
  assert p.path in ("sm90_large", "sm90_medium")
  assert w.stage_b_item == 256 * 256 * 4 and w.total == w.stage_b + 8 * (
      w.stage_b_item)
  big = _f32(4096, 4096, 4096, batch_shape=(80,))
  assert plan_lib.plan(big).path == "tf32"
  assert any(r.startswith("staged float32 copies of")
             for r in plan_lib.sm90_reasons(big))
  assert plan_lib.plan(_f32(4096, 4096, 4096, tb=True,
                            batch_shape=(80,))).path.startswith("sm90_")


def test_f32_lowered_attributes_pass_the_handler_check():
  for s in (_f32(), _f32(ta=True, tb=True), _f32(precision="highest"),
            _f32(batch_shape=(3,))):
    assert ext.check_planned(plan_lib.attrs(s)) == ""
  # An MN-major float32 operand in place is never refused (it is staged),
  # but an unaligned D planned for an SM90 tile is.
  odd_d = WinSpec((1024, 1027), (1024, 1024), (0, 3))
  s = _f32(d=odd_d)
  assert "d: " in _check(s, "sm90_large")


def _rule_data():
  """The newest committed `variants.cu --rule` runs (both skinny tiles as
  the handler launches them, B hot and streamed): every
  benchmarks/results/<date>-*/variants_rule.txt of the latest date."""
  import pathlib
  import re
  results = pathlib.Path(__file__).resolve().parent.parent / "benchmarks" / "results"
  files = sorted(results.glob("*/variants_rule.txt"))
  assert files, "no committed variants_rule.txt"
  newest = max(f.parent.name[:10] for f in files)
  line = re.compile(r"RULE (NN|NT) (hot|cold)\s+m=(\d+) n=(\d+) k=(\d+): "
                    r"narrow ([0-9.]+) wide c\d+ ([0-9.]+) us")
  rows = []
  for f in files:
    if f.parent.name[:10] != newest:
      continue
    for text in f.read_text().splitlines():
      if (g := line.match(text)):
        rows.append((f.parent.name, g[1] == "NT", g[2], int(g[3]), int(g[4]),
                     int(g[5]), float(g[6]), float(g[7])))
  return rows


def test_skinny_tile_rule_fits_its_committed_data():
  """The tile rule (plan.h SkinnyTileChoice) against the data behind it:
  over the newest committed rule runs, the planned tile costs at most 10%
  more than the faster one in any case and 1% by geometric mean.  A rule
  retaken from new data (new kernels) is committed with that data, and
  this holds for it, so the rule and its data cannot drift apart."""
  rows = _rule_data()
  assert len(rows) >= 100, len(rows)
  costs = []
  for folder, tb, where, m, n, k, narrow, wide in rows:
    planned = plan_lib.skinny_tile(_spec(m=m, n=n, k=k, tb=tb))
    t = narrow if planned == "narrow" else wide
    costs.append((t / min(narrow, wide), folder, tb, where, m, n, k, planned))
  worst = max(costs)
  geomean = float(np.exp(np.mean([np.log(c[0]) for c in costs])))
  assert worst[0] <= 1.10, worst
  assert geomean <= 1.01, geomean
