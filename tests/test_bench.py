"""The benchmark driver runs end to end (tiny sizes on CPU) and records
what it measured: JSON rows for every scenario and a plot."""

import json

import numpy as np
import pytest

from jax_dynoff import bench

pytest.importorskip("matplotlib")


def test_bench_writes_every_scenario(tmp_path, capsys):
  bench.main([str(tmp_path), "--quick"])
  data = json.loads((tmp_path / "bench.json").read_text())
  assert (tmp_path / "bench.png").stat().st_size > 10_000
  rows = data["rows"]
  scenarios = {r["scenario"] for r in rows}
  assert {"plain", "slices", "stacked", "cond", "kv", "loop_graph",
          "loop_graph_unroll8", "loop_bodygraph", "loop_nograph"} <= scenarios
  for r in rows:
    for key in ("ours_ms", "xla_ms", "flops", "bytes", "ratio", "floor_ms"):
      assert np.isfinite(r[key]) and r[key] > 0, (key, r)
    assert r["ratio"] == pytest.approx(r["xla_ms"] / r["ours_ms"])
  assert [r for r in rows if r["scenario"] == "slices"][0]["ideal_ms"] > 0
  assert data["command"].startswith("python -m jax_dynoff.bench")
  out = capsys.readouterr().out
  assert "ratio" in out and "stacked" in out


def test_unknown_scenario_is_an_error():
  with pytest.raises(SystemExit):
    bench.main(["--scenarios", "plain,nope"])
