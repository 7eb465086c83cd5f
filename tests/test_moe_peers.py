"""benchmarks/moe_peers.py, the MoE peer bench: its group sizes, and one
tiny case run end to end on the CPU (the timings are not checked: a CPU is
no GPU; the accuracy against the float32 reference is)."""

from __future__ import annotations

import json

import numpy as np

import moe_peers  # benchmarks/ (conftest puts it on the path)


def test_group_sizes():
  u = moe_peers.group_sizes("uniform", 64, 500)
  assert u.sum() == 500 and u.max() - u.min() <= 1
  s = moe_peers.group_sizes("skewed", 64, 512)
  assert s.sum() == 512 and (s >= 0).all()
  assert (s == 0).sum() > 0          # a router's draw leaves groups empty
  assert s.max() > 4 * 512 // 64     # and piles rows on a few
  assert (moe_peers.group_sizes("skewed", 64, 512) == s).all()  # seeded


def test_tiny_case_end_to_end(tmp_path, monkeypatch):
  monkeypatch.setattr(moe_peers, "CASES", (("tiny", 4, 64, 32, 48),))
  assert moe_peers.main([str(tmp_path), "--cases", "tiny", "--repeats",
                         "1"]) == 0
  rows = json.loads((tmp_path / "moe_peers.json").read_text())["rows"]
  assert [r["groups"] for r in rows] == ["uniform", "skewed"]
  for r in rows:
    ours = r["sides"]["ours"]
    assert max(ours["error"]) < 2e-2, ours  # bfloat16 against float32
    assert ours["fwd_ms"] > 0 and ours["train_ms"] > 0
    assert r["dense_ms"] > 0
    if "tokamax" in r["missing"]:
      assert "tokamax" not in r["sides"]
    np.testing.assert_allclose(
        r["sides"]["lax"]["error"], ours["error"], rtol=0.5, atol=5e-3)
