"""The CPU handler under AddressSanitizer and UndefinedBehaviorSanitizer:
the extension built with `-DJAX_DYNOFF_SANITIZE=address,undefined`
(CMakeLists.txt; CPU only), loaded in place of the installed one by a
Python with the sanitizer runtimes preloaded, runs the semantic
properties, the start-source cases and a minute of the differential
fuzzer (tests/fuzz.py).  Any report fails the run: ASan aborts at its
first error, UBSan halts at its first."""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import sys
import sysconfig

import pytest

REPO = pathlib.Path(__file__).resolve().parent.parent
SANITIZERS = "address,undefined"


def _runtime(name: str):
  """The path of a GCC sanitizer runtime (libasan.so, libubsan.so), or
  None."""
  cxx = shutil.which("g++") or shutil.which("c++")
  if cxx is None:
    return None
  out = subprocess.run([cxx, f"-print-file-name={name}"], capture_output=True,
                       text=True, check=False).stdout.strip()
  return out if os.path.isabs(out) and os.path.exists(out) else None


def _tools():
  """Why the sanitized build cannot be made here, or ""."""
  if not sys.platform.startswith("linux"):
    return "Linux only"
  if shutil.which("cmake") is None:
    return "no cmake"
  if _runtime("libasan.so") is None or _runtime("libubsan.so") is None:
    return "no GCC sanitizer runtimes (libasan, libubsan)"
  try:
    import nanobind  # pylint: disable=g-import-not-at-top,unused-import
  except ImportError:
    return "nanobind is not importable (pip install nanobind)"
  return ""


def _gpu() -> bool:
  import jax  # pylint: disable=g-import-not-at-top
  return jax.default_backend() == "gpu"


@pytest.fixture(scope="module")
def sanitized_package(tmp_path_factory):
  """A folder holding jax_dynoff's Python sources and the sanitized
  extension: first on PYTHONPATH, it shadows the installed package."""
  why = _tools()
  if not why and _gpu():
    why = ("the CPU handler's check: CI runs it (a GPU machine's time goes "
           "to the GPU suite)")
  if why:
    pytest.skip(why)
  tmp = tmp_path_factory.mktemp("sanitized")
  build = tmp / "build"
  gen = ["-G", "Ninja"] if shutil.which("ninja") else []
  cfg = subprocess.run(
      ["cmake", "-S", str(REPO), "-B", str(build), *gen,
       f"-DPython_EXECUTABLE={sys.executable}",
       f"-DJAX_DYNOFF_SANITIZE={SANITIZERS}"],
      capture_output=True, text=True, check=False)
  assert cfg.returncode == 0, cfg.stdout[-3000:] + cfg.stderr[-3000:]
  built = subprocess.run(["cmake", "--build", str(build), "-j",
                          str(os.cpu_count() or 2)],
                         capture_output=True, text=True, check=False)
  assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
  suffix = sysconfig.get_config_var("EXT_SUFFIX")
  ext = build / f"_jax_dynoff{suffix}"
  assert ext.exists(), sorted(p.name for p in build.iterdir())
  pkg = tmp / "pkg"
  shutil.copytree(REPO / "jax_dynoff", pkg / "jax_dynoff",
                  ignore=shutil.ignore_patterns("*.so", "__pycache__"))
  shutil.copy(ext, pkg / "jax_dynoff" / ext.name)
  return pkg, ext


def _run(pkg, args, extra_env=None, timeout=900):
  env = dict(os.environ)
  env.update(
      LD_PRELOAD=f"{_runtime('libasan.so')} {_runtime('libubsan.so')}",
      # Python and jaxlib are not instrumented: no leak report of theirs,
      # and their allocators may pair malloc with delete.
      ASAN_OPTIONS="detect_leaks=0:alloc_dealloc_mismatch=0:abort_on_error=1",
      UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1",
      PYTHONPATH=str(pkg), JAX_PLATFORMS="cpu", **(extra_env or {}))
  return subprocess.run([sys.executable, *args], capture_output=True,
                        text=True, env=env, cwd=str(pkg), timeout=timeout,
                        check=False)


def _clean(res):
  out = res.stdout + res.stderr
  assert "AddressSanitizer" not in out and "runtime error:" not in out, (
      out[-6000:])
  assert res.returncode == 0, out[-6000:]
  return out


def test_the_sanitized_extension_is_the_one_loaded(sanitized_package):
  pkg, ext = sanitized_package
  res = _run(pkg, ["-c", "import jax_dynoff.extension as e; "
                   "print(e.ext.__file__)"])
  out = _clean(res)
  assert str(pkg) in out, out
  syms = subprocess.run(["nm", "-D", str(ext)], capture_output=True,
                        text=True, check=False).stdout
  assert "__asan_" in syms and "__ubsan_" in syms


def test_semantics_under_sanitizers(sanitized_package):
  pkg, _ = sanitized_package
  _clean(_run(pkg, ["-m", "pytest", "-q", "-p", "no:cacheprovider",
                    str(REPO / "tests" / "test_semantics.py"),
                    str(REPO / "tests" / "test_start_sources.py")],
              extra_env={"JAX_DYNOFF_HYPOTHESIS_PROFILE": "quick"}))


def test_fuzzer_under_sanitizers(sanitized_package):
  pkg, _ = sanitized_package
  out = _clean(_run(pkg, [str(REPO / "tests" / "fuzz.py"), "--problems",
                          "100000", "--starts", "6", "--budget-s", "60",
                          "--seed", "31"]))
  assert " 0 failures" in out, out[-3000:]
