"""benchmarks/moe_peers.py, the MoE peer bench: its group sizes, and one
tiny case run end to end on the CPU (the timings are not checked: a CPU is
no GPU; the accuracy against the float32 reference is)."""

from __future__ import annotations

import importlib.util
import json
import os

import numpy as np
import pytest

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


def test_cases_run_in_the_order_named(tmp_path, monkeypatch):
  """--cases's order is the run's (a run cut short keeps the first named),
  and a name that is no case is an error naming the cases."""
  monkeypatch.setattr(moe_peers, "CASES", (("tiny_a", 2, 16, 16, 16),
                                           ("tiny_b", 2, 16, 16, 24)))
  assert moe_peers.main([str(tmp_path), "--cases", "tiny_b,tiny_a",
                         "--groups", "uniform", "--repeats", "1"]) == 0
  rows = json.loads((tmp_path / "moe_peers.json").read_text())["rows"]
  assert [r["case"] for r in rows] == ["tiny_b", "tiny_a"]
  with pytest.raises(SystemExit):
    moe_peers.main(["--cases", "tiny_a,nope"])


def test_grouped_sweep_cases_of_the_peer_layers(capsys):
  """benchmarks/sm90_tiles/grouped_cases.py --peers: one line per layer and
  kind (name E T d f, then E sizes summing to T), the names it is given
  only, and an unknown name refused."""
  path = os.path.join(os.path.dirname(moe_peers.__file__), "sm90_tiles",
                      "grouped_cases.py")
  spec = importlib.util.spec_from_file_location("grouped_cases", path)
  gc = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(gc)
  gc.main(["--peers", "qwen3_30b_down,decode_e64"])
  lines = capsys.readouterr().out.splitlines()
  assert [l.split()[0] for l in lines] == [
      "qwen3_30b_down_uniform", "qwen3_30b_down_skewed",
      "decode_e64_uniform", "decode_e64_skewed"]
  for l in lines:
    E, T, d, f, *sizes = (int(v) for v in l.split()[1:])
    assert len(sizes) == E and sum(sizes) == T and min(sizes) >= 0
    assert (E, T) in ((128, 32768), (64, 512))
  gc.main(["--peers"])
  assert len(capsys.readouterr().out.splitlines()) == 2 * len(moe_peers.CASES)
  with pytest.raises(SystemExit, match="unknown case 'nope'"):
    gc.main(["--peers", "nope"])


def test_ragged_once_runs_a_tiny_layer(capsys):
  """benchmarks/ragged_once.py (a layer's forward for a profiler): each
  setting's group sizes printed, as moe_peers draws them, and the calls
  run."""
  import ragged_once  # pylint: disable=g-import-not-at-top
  assert ragged_once.main(["4", "64", "32", "48", "--repeats", "1"]) == 0
  lines = capsys.readouterr().out.splitlines()
  assert [l.split()[0] for l in lines] == ["uniform", "skewed"]
  skewed = json.loads(lines[1].split(" ", 1)[1])
  assert skewed == moe_peers.group_sizes("skewed", 4, 64).tolist()
