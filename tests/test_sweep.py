"""benchmarks/sweep.py, the small-GEMM acceptance sweep: its grid sample
covers every m, n and k, and a tiny run (CPU: one timed call per side)
writes a checked cell for every pattern, setting and grid point, a summary
and one heat map per pattern and setting."""

import importlib.util
import json
import math
import pathlib
import sys

import pytest

pytest.importorskip("matplotlib")

_PATH = pathlib.Path(__file__).resolve().parent.parent / "benchmarks" / "sweep.py"


@pytest.fixture(scope="module")
def sweep():
  spec = importlib.util.spec_from_file_location("sweep", _PATH)
  mod = importlib.util.module_from_spec(spec)
  sys.modules["sweep"] = mod  # dataclasses look their module up there
  spec.loader.exec_module(mod)
  return mod


def test_sample_covers_every_value_and_balances_m(sweep):
  ms, nk = sweep.M_VALUES, sweep.NK_VALUES
  for cells in (9, 18, 27):
    grid = sweep.sample_grid(cells, ms, nk, nk)
    assert len(grid) == len(set(grid)) == cells
    assert {c[0] for c in grid} == set(ms)
    assert {c[1] for c in grid} == set(nk)
    assert {c[2] for c in grid} == set(nk)
    per_m = [sum(c[0] == m for c in grid) for m in ms]
    assert max(per_m) - min(per_m) <= 1, per_m
    assert any(c[1] != c[2] for c in grid)  # non-square pairs
  assert sweep.sample_grid(18, ms, nk, nk) == sweep.sample_grid(18, ms, nk, nk)
  assert len(sweep.sample_grid(10 ** 6, ms, nk, nk)) == len(ms) * 36


def test_tiny_sweep_writes_cells_summary_and_maps(sweep, tmp_path):
  args = [str(tmp_path), "--quick", "--m", "8,16", "--n", "64", "--k", "128",
          "--dtypes", "bfloat16", "--settings", "default,body",
          "--repeats", "1"]
  assert sweep.main(args) == 0
  data = json.loads((tmp_path / "sweep.json").read_text())
  cells = data["cells"]
  keys = {(c["pattern"], c["setting"], c["m"]) for c in cells}
  assert keys == {(p, s, m) for p in sweep.PATTERNS
                  for s in ("default", "body") for m in (8, 16)}
  for c in cells:
    assert c["ok"] and c["max_rel_err"] < sweep.TOLERANCE, c
    assert math.isfinite(c["ratio"]) and c["ratio"] > 0
    assert c["ratio"] == pytest.approx(c["xla_us_per_call"] /
                                       c["ours_us_per_call"])
    assert c["flops"] > 0 and c["bytes"] > 0 and c["floor_us_per_call"] > 0
  assert {c["pattern"] for c in cells if "weights_tbps" in c} == {
      "stacked", "cond", "kv"}
  summary = data["summary"]
  assert len(summary) == len(sweep.PATTERNS) * 2
  for s in summary:
    assert s["cells"] == 2 and s["min_ratio"] <= s["geomean_ratio"] + 1e-12
  assert data["command"].startswith("python benchmarks/sweep.py")
  for p in sweep.PATTERNS:
    for s in ("default", "body"):
      assert (tmp_path / f"sweep_{p}_{s}.png").stat().st_size > 5_000
  # The maps again from the JSON alone.
  again = tmp_path / "again"
  assert sweep.main([str(again), "--from-json",
                     str(tmp_path / "sweep.json")]) == 0
  assert len(list(again.glob("sweep_*.png"))) == len(sweep.PATTERNS) * 2


def test_a_mismatch_fails_the_run(sweep, tmp_path, monkeypatch):
  """A cell where ours differs from XLA's loop is recorded, printed and
  makes the run exit non-zero."""
  monkeypatch.setattr(sweep, "_rel_err", lambda got, want: 1.0)
  args = [str(tmp_path), "--quick", "--m", "8", "--n", "64", "--k", "64",
          "--patterns", "table", "--dtypes", "bfloat16",
          "--settings", "default", "--repeats", "1"]
  assert sweep.main(args) == 1
  cell, = json.loads((tmp_path / "sweep.json").read_text())["cells"]
  assert not cell["ok"]
