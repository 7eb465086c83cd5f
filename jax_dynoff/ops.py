"""The public op: `gemm` on windows at device-resident offsets.

The package's layers, each importing only those below it: the public API
(this module, ragged.py, window.py, options.py) -> call building (call.py:
windows -> spec -> bind) -> the primitive's transformation rules
(rules.py) -> its lowering (lowering.py: one device's call; partition.py:
the registered lowering, which splits a call over a mesh) -> sharding
(sharding.py).  Importing this module makes the registrations, once each.
"""

from jax_dynoff import partition  # noqa: F401  (the lowering)
from jax_dynoff import rules  # noqa: F401  (vmap, jvp, transpose)
from jax_dynoff.call import Operand, gemm, make_spec

__all__ = ["Operand", "gemm", "make_spec"]
