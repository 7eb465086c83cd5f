"""The shell scripts that GPU calls start from (benchmarks/run_gpu.sh, the
sweep and probe build scripts) and CI's own (.ci/run) parse: `bash -n`
here catches a syntax slip that would otherwise cost a device call."""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess

import pytest

REPO = pathlib.Path(__file__).resolve().parent.parent
BASH = shutil.which("bash")
SCRIPTS = sorted((REPO / "benchmarks").rglob("*.sh")) + [REPO / ".ci" / "run"]


def test_the_scripts_are_found():
  names = {p.relative_to(REPO).as_posix() for p in SCRIPTS}
  assert {"benchmarks/run_gpu.sh", "benchmarks/sm90_tiles/build_grouped.sh",
          ".ci/run"} <= names, names


@pytest.mark.skipif(BASH is None, reason="bash not found")
@pytest.mark.parametrize("script", SCRIPTS,
                         ids=lambda p: p.relative_to(REPO).as_posix())
def test_script_parses(script):
  r = subprocess.run([BASH, "-n", str(script)], capture_output=True,
                     text=True, check=False)
  assert r.returncode == 0, r.stderr


@pytest.mark.skipif(BASH is None or shutil.which("nvcc") is None,
                    reason="bash or nvcc not found")
def test_ab_probes_builds_both_versions_and_packs(tmp_path):
  """ab_probes.sh builds a probe against a base copy of ffi/ and against
  this tree's, runs each entry for both (here without a GPU, so each run
  logs its CUDA error), and PACK=1 leaves one archive of every log."""
  import tarfile
  base = tmp_path / "base"
  shutil.copytree(REPO / "ffi", base / "ffi")
  out = tmp_path / "out"
  r = subprocess.run(
      [BASH, str(REPO / "benchmarks" / "ab_probes.sh"), str(base / "ffi"),
       str(out), "skinny/stream;skinny/stream --launch"],
      capture_output=True, text=True, check=False,
      env={**os.environ, "PACK": "1"}, timeout=600)
  lines = [l for l in r.stdout.splitlines() if l.startswith("--- ")]
  assert [l.split(":")[0] for l in lines] == [
      "--- skinny_stream new", "--- skinny_stream base",
      "--- skinny_stream_launch new", "--- skinny_stream_launch base"], r.stdout
  assert sorted(p.name for p in out.iterdir()) == ["ab.tgz"]
  with tarfile.open(out / "ab.tgz") as t:
    assert sorted(t.getnames()) == sorted(
        f"skinny_stream{a}_{v}.txt" for a in ("", "_launch")
        for v in ("new", "base"))
