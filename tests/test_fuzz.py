"""The differential fuzzer (tests/fuzz.py) within a budget: random static
problems at random start sets against its own float64 oracle, nothing
written outside a window.  On the CPU the CPU handler runs them; on a GPU
the CUDA kernels, with shapes that reach the SM90 paths."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys

import jax
import pytest

import fuzz

GPU = jax.default_backend() == "gpu"


def _run(seed, budget_s, gpu):
  log = io.StringIO()
  res = fuzz.run(seed, 10**6, 8, budget_s, gpu, out=log, batch=8)
  assert not res["failures"], log.getvalue()
  return res


@pytest.mark.skipif(GPU, reason="on a GPU the GPU budget runs")
def test_fuzz_cpu_budget():
  """About 100 seconds of problems (a few thousand calls)."""
  res = _run(11, 100.0, gpu=False)
  assert res["problems"] >= 200, res
  assert {"generic", "tf32"} <= set(res["families"]), res["families"]


@pytest.mark.skipif(not GPU, reason="needs a GPU")
def test_fuzz_gpu_budget():
  """Two minutes of problems with shapes that reach the SM90 paths."""
  res = _run(12, 120.0, gpu=True)
  assert res["problems"] >= 100, res
  assert any(f.startswith("sm90_") for f in res["families"]), res


def test_gpu_problems_reach_every_kernel_line():
  """--gpu-sizes problems reach every line of the kernel catalogue within
  the first 5,000 seeds (each call's line as the choice function picks it
  on an H200 with aligned buffers): a kernel added without a way for the
  fuzzer to reach it fails here, on any machine.  A GPU run of 20,000
  problems then meets each line a few dozen times."""
  from jax_dynoff import plan as plan_lib  # pylint: disable=g-import-not-at-top
  lines = {l.name for l in plan_lib.CATALOGUE}
  hit = set()
  for seed in range(5000):
    hit.update(fuzz.kernel_lines(fuzz.make_problem(seed, gpu=True)))
    if lines <= hit:
      break
  assert not lines - hit, sorted(lines - hit)
  assert hit <= lines | {""}, sorted(hit - lines)


def test_start_forms_reach_every_start_source():
  """The fuzzer's start forms reach the handler's every way of reading a
  start: with int32 starts a look-up, an affine map and a divided index
  are operands the kernels read (no offsets vector), a computed start
  and a narrow or unsigned index dtype go through the vector; every form
  comes up among gemm problems of both kinds of sizes."""
  import numpy as np  # pylint: disable=g-import-not-at-top
  seen = {}
  for gpu in (False, True):
    for seed in range(300):
      p = fuzz.make_problem(seed, gpu=gpu)
      if p.kind != "gemm" or (p.start_form, p.index_dtype) in seen:
        continue
      c = fuzz.case(p)
      args, _ = c.draw(np.random.default_rng(seed + 1), 0)
      text = jax.jit(c.fn).lower(*args).as_text()
      seen[(p.start_form, p.index_dtype)] = "concatenate" not in text
  for form in fuzz.START_FORMS:
    assert (form, "int32") in seen, (form, sorted(seen))
    direct = form in ("plain", "lookup", "affine", "divided")
    assert seen[(form, "int32")] == direct, (form, seen)
  assert not any(d for (f, t), d in seen.items() if t in ("int8", "uint16")
                 and f != "plain"), seen


def test_fuzz_catches_a_wrong_clamp(monkeypatch):
  """The oracle is not a mirror of the code under test: taught a wrong
  clamping rule, it reports failures."""
  monkeypatch.setattr(fuzz, "clamp", lambda s, d, z: max(0, min(s, d - z)))
  res = fuzz.run(1, 30, 5, 60.0, False, out=io.StringIO())
  assert res["failures"]


def test_fuzz_replays_a_seed():
  p, fails = fuzz.run_problem(100001, 3, False)
  assert p == fuzz.make_problem(100001) and fails == []


def test_a_batch_finds_what_problems_alone_find(monkeypatch):
  """Problems run in one jitted function draw the same data and fail at
  the same seeds and start sets as each alone."""
  monkeypatch.setattr(fuzz, "clamp", lambda s, d, z: max(0, min(s, d - z)))
  alone = fuzz.run(2, 12, 4, 60.0, False, out=io.StringIO())
  batched = fuzz.run(2, 12, 4, 60.0, False, out=io.StringIO(), batch=5)
  assert alone["failures"] and alone["failures"] == batched["failures"]
  assert alone["families"] == batched["families"]


def test_workers_merge_their_reports(tmp_path):
  """Two processes, seeds 7 and 8: every problem of both counted."""
  path = tmp_path / "r.json"
  r = subprocess.run([sys.executable, fuzz.__file__, "--problems", "6",
                      "--starts", "2", "--seed", "7", "--workers", "2",
                      "--batch", "3", "--json", str(path)],
                     capture_output=True, text=True, check=False,
                     env=dict(os.environ, JAX_PLATFORMS="cpu"))
  assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
  res = json.loads(path.read_text())
  assert res["problems"] == 12 and sum(res["families"].values()) == 12
