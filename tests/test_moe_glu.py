"""benchmarks/moe_glu.py, the fused activation against the unfused pair:
one tiny case run end to end on the CPU (the timings are not checked: a CPU
is no GPU; every side's accuracy against the float32 reference is)."""

from __future__ import annotations

import json

import moe_glu  # benchmarks/ (conftest puts it on the path)


def test_tiny_case_end_to_end(tmp_path, monkeypatch):
  monkeypatch.setattr(moe_glu, "CASES", (("tiny_up", 4, 64, 32, 48),))
  assert moe_glu.main([str(tmp_path), "--cases", "tiny_up", "--repeats",
                       "1"]) == 0
  rows = json.loads((tmp_path / "moe_glu.json").read_text())["rows"]
  assert [r["groups"] for r in rows] == ["uniform", "skewed"]
  for r in rows:
    assert set(r["sides"]) == {"fused", "interleave", "halves"}
    for side, v in r["sides"].items():
      assert max(v["error"]) < 3e-2, (side, v)  # bfloat16 against float32
      assert v["fwd_ms"] > 0 and v["train_ms"] > 0
