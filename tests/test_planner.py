"""The one planner (ffi/planner.cc) through the extension: it reproduces
the decisions the Python planner made before it moved to C++, and the
desc the CUDA lowering emits carries its answer.  No GPU needed."""

from __future__ import annotations

import dataclasses
import json

import ml_dtypes
import numpy as np
import pytest

from jax_dynoff import plan as plan_lib
from jax_dynoff.extension import ext
from jax_dynoff.options import KernelOptions
from jax_dynoff.spec import GemmSpec, WinSpec, encode_desc
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
          c_mode="none", beta=0.0, dt=BF16):
  return GemmSpec(
      m=m, n=n, k=k, a=WinSpec((m, k), (m, k), (0, 0)),
      b=WinSpec((k, n), (k, n), (0, 0)), c=c,
      d=d or WinSpec((m, n), (m, n), (0, 0)), in_dtype=dt, out_dtype=dt,
      trans_a=False, trans_b=False, c_mode=c_mode, has_out=False,
      alpha=1.0, beta=beta, precision="default", opts=opts)


def _ask(spec, sms=132, cc=(9, 0)):
  o = spec.opts
  return ext.plan([int(v) for v in encode_desc(spec, 0, 1)], spec.alpha,
                  spec.beta, sms, *cc, o.tile or "", o.split_k,
                  o.split_k_slices or 0)


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
  # The planned kernel field: the direct tile's code (1 + its index).
  assert a["kernel"] == 1 + list(plan_lib.DIRECT_TILES).index("medium")


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
  with pytest.raises(ValueError, match="unknown SM90 tile"):
    ext.plan([int(v) for v in encode_desc(s, 0, 1)], 1.0, 0.0, 132, 9, 0,
             "huge", False, 0)


def test_skinny_plan_carries_split_and_fallback_tile():
  """The skinny path's kernel field: its split on the device's SMs, and
  the direct tile of its fallback (the tiny tile)."""
  s = _spec(m=16)
  p = plan_lib.plan(s)
  assert p.path == "sm90_skinny"
  tiny = 1 + list(plan_lib.DIRECT_TILES).index("tiny")
  assert p.kernel == tiny + 8 * 4
  assert _ask(s, sms=78)["kernel"] == tiny + 8 * plan_lib.skinny_split(s, 78)
  # D inside a taller buffer of 16 rows: the tiny tile cannot store it.
  d = WinSpec((48, 4096), (16, 4096), (None, 0))
  assert plan_lib.plan(_spec(m=16, d=d)).kernel == 8 * 4


def test_lowered_desc_carries_the_plan():
  for s in (_spec(), _spec(m=16), _spec(m=16, opts=KernelOptions(
      split_k=True)), _spec(m=2048, n=2048, k=2048), _spec(dt=np.dtype(
          np.float32))):
    p = plan_lib.plan(s)
    d = plan_lib.desc(s)
    assert (d[10], d[11], d[20]) == (plan_lib.PATHS[p.path], p.split_k,
                                     p.kernel), s
    assert ext.check_planned([int(v) for v in d], s.alpha, s.beta) == ""


def test_handler_refuses_a_plan_the_rules_reject():
  """The CUDA handler's instantiate stage checks the desc's decision with
  the planner's own rules (ext.check_planned runs that check)."""
  def check(spec, path, split_k=1, kernel=0):
    d = encode_desc(spec, plan_lib.PATHS[path], split_k, kernel=kernel)
    return ext.check_planned([int(v) for v in d], spec.alpha, spec.beta)
  tile = {t: 1 + i for i, t in enumerate(plan_lib.DIRECT_TILES)}
  s = _spec()
  assert check(s, "sm90_medium", kernel=tile["medium"]) == ""
  assert check(s, "sm90_medium") == ""          # the ptr-array kernel
  assert "not a tile of sm90_medium" in check(s, "sm90_medium",
                                              kernel=tile["large"])
  assert "bad skinny split" in check(s, "sm90_medium", kernel=8)
  assert "not a tile of generic" in check(s, "generic", kernel=tile["tiny"])
  # An unaligned window planned for SM90.
  a = WinSpec((512, 4100), (512, 4096), (0, 3))
  bad = dataclasses.replace(s, a=a)
  assert "a: " in check(bad, "sm90_medium")
  assert check(bad, "generic") == ""
  # The skinny path: m <= 16 and a split of 1..8.
  assert "m = 512 > 16" in check(s, "sm90_skinny", kernel=8)
  assert "bad skinny split" in check(_spec(m=16), "sm90_skinny")
  assert check(_spec(m=16), "sm90_skinny", kernel=8 * 4 + tile["tiny"]) == ""
  # Split-K: the slices must split K into equal 16-byte slices.
  s16 = _spec(m=16)
  assert check(s16, "sm90_split_k", split_k=4) == ""
  assert "split_k_slices=3" in check(s16, "sm90_split_k", split_k=3)
  # D inside a taller buffer: no direct store of 16 rows in 128-row tiles.
  d = WinSpec((48, 4096), (16, 4096), (None, 0))
  assert "out: m = 16" in check(_spec(m=16, d=d), "sm90_split_k", split_k=4,
                                kernel=tile["split_k"])


def test_tables_come_from_the_planner():
  assert plan_lib.PATHS == {"generic": 0, "sm90_large": 1, "sm90_small_m": 2,
                            "sm90_split_k": 3, "sm90_medium": 4,
                            "sm90_tiny": 5, "tf32": 6, "sm90_skinny": 7}
  from jax_dynoff import options
  assert plan_lib.SM90_TILES == options.SM90_TILES
  assert tuple(plan_lib.DIRECT_TILES) == options.DIRECT_TILES
  assert plan_lib.DIRECT_TILES["wide"] == (128, 256)
  assert plan_lib.DIRECT_TILE_PATHS["wide"] == "sm90_large"
  assert sorted(plan_lib.SM90_KERNELS) == [
      ("bfloat16", "bfloat16", False, False),
      ("bfloat16", "bfloat16", False, True),
      ("bfloat16", "bfloat16", True, False),
      ("float16", "float16", False, False)]
