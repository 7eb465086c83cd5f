"""The demo notebooks run top to bottom, and are committed without outputs.

Each notebook in notebooks/ is executed by nbclient in a fresh IPython kernel
with notebooks/ as its working directory, as a reader would run it.  The
kernel must be this very interpreter (the one that has jax_dynoff
installed), not whatever `python` a stray kernelspec names: the tests write a
kernelspec "python3" whose argv is `sys.executable` into a temporary folder
and hand nbclient a kernel manager that looks only there.

On a CPU the notebooks keep their sizes tiny and take seconds each; on a GPU
they take their GPU branches (capture report, a small benchmark rerun).
"""

from __future__ import annotations

import json
import shutil
import sys
import time
from pathlib import Path

# The notebook tools come with the `test` extra; a bare GPU machine may lack
# them, and then these tests skip (CI installs the extra, so they run there).
import pytest

nbformat = pytest.importorskip("nbformat")
pytest.importorskip("nbclient")
from jupyter_client.kernelspec import KernelSpecManager
from jupyter_client.manager import AsyncKernelManager
from nbclient import NotebookClient
from traitlets import default

ROOT = Path(__file__).resolve().parents[1]
NB_DIR = ROOT / "notebooks"
EXPECTED = ["01_quickstart.ipynb", "02_cuda_graphs.ipynb",
            "03_performance.ipynb", "04_decoder.ipynb"]
NOTEBOOKS = sorted(p.name for p in NB_DIR.glob("*.ipynb"))
CELL_TIMEOUT_S = 300  # per cell; on a CPU the slowest cell takes seconds

# Appended to each notebook (in memory only) to prove which interpreter ran it.
_WHOAMI = "import sys; print('KERNEL-PREFIX=' + sys.prefix)"


@pytest.fixture(scope="module")
def kernel_dir(tmp_path_factory) -> Path:
  """A kernels/ folder whose "python3" kernel runs sys.executable."""
  d = tmp_path_factory.mktemp("kernels")
  (d / "python3").mkdir()
  (d / "python3" / "kernel.json").write_text(json.dumps({
      "argv": [sys.executable, "-m", "ipykernel_launcher", "-f",
               "{connection_file}"],
      "display_name": "Python 3 (pytest's interpreter)",
      "language": "python",
  }))
  return d


def _kernel_manager_class(kernel_dir: Path) -> type:
  """An AsyncKernelManager that finds kernelspecs in `kernel_dir` only."""

  class KernelManager(AsyncKernelManager):

    @default("kernel_spec_manager")
    def _only_our_kernelspec(self):
      return KernelSpecManager(kernel_dirs=[str(kernel_dir)],
                               ensure_native_kernel=False)

  return KernelManager


def _execute(path: Path, cwd: Path, kernel_dir: Path):
  """Runs the notebook at `path` with `cwd` as working directory.

  Returns the executed notebook and the wall time; raises nbclient's
  CellExecutionError (with the failing cell and traceback) on any error.
  """
  nb = nbformat.read(path, as_version=4)
  nb.cells.append(nbformat.v4.new_code_cell(_WHOAMI))
  client = NotebookClient(
      nb, kernel_name="python3",
      kernel_manager_class=_kernel_manager_class(kernel_dir),
      timeout=CELL_TIMEOUT_S, resources={"metadata": {"path": str(cwd)}})
  t0 = time.perf_counter()
  client.execute()
  return nb, time.perf_counter() - t0


def _text(nb) -> str:
  """All stream and text/plain output of an executed notebook."""
  parts = []
  for cell in nb.cells:
    for out in cell.get("outputs", []):
      if out.get("output_type") == "stream":
        parts.append(out.get("text", ""))
      elif "data" in out:
        parts.append(out["data"].get("text/plain", ""))
  return "".join(parts)


def _has_image(nb) -> bool:
  return any("image/png" in out.get("data", {})
             for cell in nb.cells for out in cell.get("outputs", []))


def test_the_notebooks_exist():
  assert set(EXPECTED) <= set(NOTEBOOKS), f"notebooks/ holds {NOTEBOOKS}"


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_committed_notebook_has_no_outputs(name):
  """Outputs and execution counts stay out of git (they are regenerated)."""
  nb = json.loads((NB_DIR / name).read_text())
  nbformat.validate(nbformat.from_dict(nb))
  assert nb["metadata"].get("kernelspec", {}).get("name") == "python3"
  for i, cell in enumerate(nb["cells"]):
    if cell["cell_type"] != "code":
      continue
    assert cell.get("outputs") == [], f"{name}: cell {i} has outputs"
    assert cell.get("execution_count") is None, (
        f"{name}: cell {i} has execution_count {cell['execution_count']}")


def test_kernelspec_resolves_to_this_interpreter(kernel_dir):
  km = _kernel_manager_class(kernel_dir)(kernel_name="python3")
  spec = km.kernel_spec
  assert spec.argv[0] == sys.executable


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_notebook_runs(name, kernel_dir):
  nb, seconds = _execute(NB_DIR / name, NB_DIR, kernel_dir)
  print(f"{name}: {seconds:.1f} s")
  assert f"KERNEL-PREFIX={sys.prefix}" in _text(nb), (
      "the notebook ran in another interpreter than pytest's")
  if name == "03_performance.ipynb":
    assert _has_image(nb), "the performance notebook drew no plot"
  if name == "04_decoder.ipynb":
    assert "decode loop matches the dynamic_update_slice model" in _text(nb)


def _fake_results(root: Path, date: str, device: str, shapes):
  """A bench.json as `python benchmarks/bench.py` writes it."""
  import bench  # benchmarks/bench.py
  rows = [bench.Row("plain", f"{m}x{n}x{k}", "bfloat16", ms, 1.1 * ms,
                    2.0 * m * n * k).as_dict() for (m, n, k, ms) in shapes]
  # A row of a scenario whose case is not MxNxK: kept in the table and the
  # bars, left out of the roofline.
  rows.append(bench.Row("slices", "16 x 512x4096x4096", "bfloat16", 0.6, 1.08,
                        16 * 2.0 * 512 * 4096 * 4096).as_dict())
  d = root / "benchmarks" / "results" / f"{date}-h200"
  d.mkdir(parents=True)
  (d / "bench.json").write_text(json.dumps(
      {"device": device, "jax": "0.11.2", "date": date,
       "command": "python benchmarks/bench.py", "rows": rows}))


def test_performance_notebook_reads_the_newest_committed_results(
    tmp_path, kernel_dir):
  """03 finds benchmarks/results/*/bench.json above its folder, newest first.

  (The run in the real notebooks/ folder covers whichever case the repository
  is in; this one covers committed results even before any exist.)
  """
  (tmp_path / "notebooks").mkdir()
  for name in ("03_performance.ipynb", "perf_plots.py"):
    shutil.copy(NB_DIR / name, tmp_path / "notebooks")
  (tmp_path / "benchmarks").mkdir()  # the notebook's bench, found upwards
  shutil.copy(NB_DIR.parent / "benchmarks" / "bench.py",
              tmp_path / "benchmarks")
  _fake_results(tmp_path, "2026-11-02", "OLD RUN",
                [(4096, 4096, 4096, 0.25)])
  _fake_results(tmp_path, "2026-12-01", "NVIDIA H200",
                [(4096, 4096, 4096, 0.2), (128, 4096, 4096, 0.03),
                 (8192, 8192, 8192, 1.5)])
  nb, _ = _execute(tmp_path / "notebooks" / "03_performance.ipynb",
                   tmp_path / "notebooks", kernel_dir)
  text = _text(nb)
  assert "using benchmarks/results/2026-12-01-h200/bench.json" in text
  assert "4 rows from 2026-12-01-h200 (NVIDIA H200" in text
  assert "No committed benchmark results" not in text
  assert _has_image(nb)
