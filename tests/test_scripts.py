"""The shell scripts that GPU calls start from (benchmarks/run_gpu.sh, the
sweep and probe build scripts) and CI's own (.ci/run) parse: `bash -n`
here catches a syntax slip that would otherwise cost a device call."""

from __future__ import annotations

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
