"""The compiled extension (`_jax_dynoff`: the FFI handlers, and the
workspace layout the CUDA handler uses), imported once with a clear error
when the package was installed without it.

Run from a source checkout (`python -m jax_dynoff` in the repository root,
after `pip install .`), the source folder shadows the installed package,
which holds the extension: then the installed one's is loaded.
"""

import importlib.machinery
import importlib.metadata
import importlib.util
import os
import sys

_NAME = "jax_dynoff._jax_dynoff"


def _installed_extension():
  """The extension file of the installed jax_dynoff distribution, or None."""
  try:
    dist = importlib.metadata.distribution("jax_dynoff")
  except importlib.metadata.PackageNotFoundError:
    return None
  for f in dist.files or ():
    name = os.path.basename(str(f))
    if name.startswith("_jax_dynoff.") and name.endswith(
        tuple(importlib.machinery.EXTENSION_SUFFIXES)):
      path = str(dist.locate_file(f))
      if os.path.exists(path):
        return path
  return None


def _load():
  try:
    from jax_dynoff import _jax_dynoff  # pylint: disable=g-import-not-at-top
    return _jax_dynoff
  except ImportError as e:
    path = _installed_extension()
    if path is None:
      raise ImportError(
          "jax_dynoff's compiled extension (_jax_dynoff) is missing; install "
          "the package with `pip install .` so that it is built") from e
  spec = importlib.util.spec_from_file_location(_NAME, path)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  sys.modules[_NAME] = module
  return module


ext = _load()
