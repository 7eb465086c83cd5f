"""The standalone CUDA probes under benchmarks/ (no JAX: each is one nvcc
command, run on a GPU machine by hand or by a results script) still
compile against today's kernel headers.  Needs nvcc (CI has it), and for
the probes built on CUTLASS the nvidia-cutlass package's headers (a build
requirement: present where the package was built in place, as in a
development environment); compiles for sm_90a, runs nothing."""

from __future__ import annotations

import pathlib
import shutil
import subprocess

import pytest

try:
  import cutlass_library  # pylint: disable=g-import-not-at-top
  CUTLASS = pathlib.Path(cutlass_library.__file__).parent / "source"
except ImportError:
  CUTLASS = None

REPO = pathlib.Path(__file__).resolve().parent.parent
NVCC = shutil.which("nvcc")

PROBES = [
    "benchmarks/skinny/probe.cu",        # the skinny kernel alone
    "benchmarks/skinny/variants.cu",     # skinny tile shapes without a cluster
    "benchmarks/skinny/phases.cu",       # the skinny kernel phase by phase
    "benchmarks/skinny/stream.cu",       # a column tile of B by TMA, no math
    "benchmarks/small_k_grad/probe.cu",  # a small-group weight gradient
    "benchmarks/small_groups_fwd/probe.cu",  # a small-group forward
]
# Probes of CUTLASS kernels: the grouped GEMM with silu(gate) * up fused.
CUTLASS_PROBES = ["benchmarks/grouped_glu/probe.cu"]


@pytest.mark.skipif(NVCC is None, reason="nvcc not found")
@pytest.mark.parametrize("probe", PROBES)
def test_probe_compiles(probe, tmp_path):
  r = subprocess.run(
      [NVCC, "-O1", "-std=c++17", "-gencode=arch=compute_90a,code=sm_90a",
       "-I", str(REPO / "ffi"), str(REPO / probe), "-o",
       str(tmp_path / "probe")], capture_output=True, text=True, check=False)
  assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]


@pytest.mark.skipif(NVCC is None, reason="nvcc not found")
@pytest.mark.skipif(CUTLASS is None, reason="nvidia-cutlass not installed")
@pytest.mark.parametrize("probe", CUTLASS_PROBES)
def test_cutlass_probe_compiles(probe, tmp_path):
  r = subprocess.run(
      [NVCC, "-O1", "-DNDEBUG", "-std=c++17", "--expt-relaxed-constexpr",
       "-gencode=arch=compute_90a,code=sm_90a", "-I", str(REPO / "ffi"),
       "-I", str(CUTLASS / "include"),
       "-I", str(CUTLASS / "tools" / "util" / "include"),
       str(REPO / probe), "-o", str(tmp_path / "probe")],
      capture_output=True, text=True, check=False)
  assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
