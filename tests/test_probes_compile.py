"""The standalone CUDA probes under benchmarks/ (no JAX, no CUTLASS: each
is one nvcc command, run on a GPU machine by hand or by a results
script) still compile against today's kernel headers.  Needs nvcc (CI has
it); compiles for sm_90a, runs nothing."""

from __future__ import annotations

import pathlib
import shutil
import subprocess

import pytest

REPO = pathlib.Path(__file__).resolve().parent.parent
NVCC = shutil.which("nvcc")

PROBES = [
    "benchmarks/skinny/probe.cu",        # the skinny kernel alone
    "benchmarks/small_k_grad/probe.cu",  # a small-group weight gradient
]


@pytest.mark.skipif(NVCC is None, reason="nvcc not found")
@pytest.mark.parametrize("probe", PROBES)
def test_probe_compiles(probe, tmp_path):
  r = subprocess.run(
      [NVCC, "-O1", "-std=c++17", "-gencode=arch=compute_90a,code=sm_90a",
       "-I", str(REPO / "ffi"), str(REPO / probe), "-o",
       str(tmp_path / "probe")], capture_output=True, text=True, check=False)
  assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
