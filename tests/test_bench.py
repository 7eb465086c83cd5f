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


def test_timeline_idle_report():
  """benchmarks/timeline.py attributes idle device time to the event that
  ends each gap (synthetic events: name, start ns, duration ns)."""
  import importlib.util
  import pathlib
  path = pathlib.Path(__file__).parent.parent / "benchmarks" / "timeline.py"
  spec = importlib.util.spec_from_file_location("timeline", path)
  tl = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(tl)
  events = []
  t = 0
  for _ in range(2):  # two iterations: gemm, then a 5 us wait, then clamp
    events.append(("gemm", t, 100_000))
    t += 100_000 + 5_000
    events.append(("clamp", t, 1_000))
    t += 1_000 + 500        # a 0.5 us gap: below the 1 us threshold
  lines = tl.idle_report(events, iters=2)
  assert len(lines) == 1, lines
  assert lines[0].startswith("idle before clamp:")
  assert "5.00 us/iter in 2 gaps, largest 5.00 us" in lines[0]
  assert tl.idle_report(events[:1], iters=1) == []
