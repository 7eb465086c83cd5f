"""jax_dynoff: CUTLASS GEMMs at device-resident offsets, from JAX.

    import jax_dynoff as dyn
    dyn.window(x, start, shape)      # a 2-D block of x at (traced) starts
    dyn.gemm(a, b, c=None, *, out=None, alpha=1.0, beta=1.0, ...)
    dyn.window(x, start, shape, valid=(rows, cols))   # ragged: sizes too
    dyn.ragged_dot(lhs, rhs, group_sizes)   # lax.ragged_dot, one launch
    dyn.ragged_dot(x, w13, sizes, activation="swiglu")  # silu(gate) * up
    dyn.reference.gemm(...)          # the same in pure jax.lax: the oracle
"""

from jax_dynoff import reference
from jax_dynoff.graphs import (NO_GRAPHS, CaptureReport, check_capture,
                               cuda_graph_flags, cuda_graph_options)
from jax_dynoff.lowering import cuda_available
from jax_dynoff.ops import gemm
from jax_dynoff.options import KernelOptions
from jax_dynoff.plan import explain_calls as explain
from jax_dynoff.ragged import ragged_dot
from jax_dynoff.reference import interleave_gate_up
from jax_dynoff.window import Window, window

__all__ = ["gemm", "ragged_dot", "interleave_gate_up", "window", "Window", "KernelOptions", "explain", "reference",
           "cuda_available",
           "cuda_graph_flags", "cuda_graph_options", "check_capture",
           "CaptureReport", "NO_GRAPHS"]
__version__ = "0.1.0"
