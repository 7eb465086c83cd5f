"""benchmarks/body_variants.py end to end on a tiny cell (any backend): every
loop runs, and the JSON holds a positive time per call for each."""
import json
import pathlib
import subprocess
import sys

import pytest

_SCRIPT = (pathlib.Path(__file__).resolve().parent.parent / "benchmarks" /
           "body_variants.py")


def test_body_variants_quick(tmp_path):
  pytest.importorskip("jax_dynoff")
  r = subprocess.run([sys.executable, str(_SCRIPT), str(tmp_path), "--quick"],
                     capture_output=True, text=True, timeout=600)
  assert r.returncode == 0, r.stderr[-3000:]
  out = json.loads((tmp_path / "body_variants.json").read_text())
  row = out["cells"]["8x64x64"]
  assert set(row) == {"ours", "ours_unroll2", "ours_static_windows",
                      "ours_rows_at_i", "xla", "xla_unroll2"}
  assert all(us > 0 for us in row.values())
