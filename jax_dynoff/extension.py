"""The compiled extension (`_jax_dynoff`: the FFI handlers, and the
workspace layout the CUDA handler uses), imported once with a clear error
when the package was installed without it."""

try:
  from jax_dynoff import _jax_dynoff as ext
except ImportError as e:  # pragma: no cover - a broken install
  raise ImportError(
      "jax_dynoff's compiled extension (_jax_dynoff) is missing; reinstall "
      "the package with `pip install .` so that it is built") from e
