"""README's demo step: `python -m jax_dynoff` from the repository root.

There the source folder shadows the installed package (which holds the
compiled extension); the package loads the installed extension then
(jax_dynoff/extension.py), so README's commands work in order."""

from __future__ import annotations

import os
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_demo_runs_from_the_repository_root():
  env = dict(os.environ, JAX_PLATFORMS="cpu")
  r = subprocess.run([sys.executable, "-m", "jax_dynoff", "--layers", "2",
                      "--m", "8", "--n", "64", "--repeats", "1"],
                     cwd=REPO, env=env, capture_output=True, text=True,
                     timeout=300)
  assert r.returncode == 0, r.stdout + r.stderr
  assert "relative error vs jax_dynoff.reference" in r.stdout, r.stdout
