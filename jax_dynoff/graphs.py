"""CUDA graphs: the XLA flags that capture whole loops, and a capture check.

XLA turns runs of graph-safe thunks into command buffers (CUDA graphs) after
HLO compilation, so `compiled.as_text()` never shows them; the thunk
sequence XLA dumps does.  `check_capture` compiles a function with a dump and
reads that file back, so users can see which of their calls run inside a
command buffer.

    import os, jax_dynoff as dyn
    os.environ["XLA_FLAGS"] = dyn.cuda_graph_flags()   # before jax starts
    # or per compile:
    jax.jit(f).lower(*args).compile(compiler_options=dyn.cuda_graph_options())
"""

from __future__ import annotations

import dataclasses
import glob
import os
import re
import tempfile
from typing import Callable

import jax

# Command-buffer kinds to capture: XLA's defaults (fusions, cuBLAS, cuDNN,
# custom calls such as jax_dynoff's, conditionals, dynamic-slice fusions) plus
# WHILE, which is off by default and is what puts a whole fori_loop / scan /
# while_loop into one graph.  Per-compile options take the full list (no
# "+WHILE" syntax there), so the list is spelled out.
_COMMANDS = ("FUSION,CUBLAS,CUBLASLT,CUSTOM_CALL,CUDNN,CONDITIONAL,WHILE,"
             "DYNAMIC_SLICE_FUSION")


def cuda_graph_options(min_graph_size: int = 1) -> dict[str, str]:
  """XLA options (for `compile(compiler_options=...)`) for whole-loop capture."""
  return {"xla_gpu_enable_command_buffer": _COMMANDS,
          "xla_gpu_graph_min_graph_size": str(min_graph_size)}


def cuda_graph_flags(min_graph_size: int = 1) -> str:
  """The same as `XLA_FLAGS` text; set it before JAX initialises its backend."""
  return " ".join(f"--{k}={v}"
                  for k, v in cuda_graph_options(min_graph_size).items())


@dataclasses.dataclass
class CaptureReport:
  """Where the jax_dynoff calls of one compiled program run.

  thunks: the dumped thunk sequence (XLA's text), for reading.
  captured / uncaptured: jax_dynoff custom calls inside / outside a command
  buffer.  whole_program: the program's top level is one command buffer.
  """

  thunks: str
  captured: int
  uncaptured: int
  whole_program: bool

  @property
  def all_captured(self) -> bool:
    return self.captured > 0 and self.uncaptured == 0


_TARGET = "jax_dynoff_gemm"


def _parse(text: str) -> CaptureReport:
  """Counts jax_dynoff calls inside and outside kCommandBuffer thunks.

  The dump nests by indentation: a line's depth is its leading whitespace,
  and a call is captured when some shallower line above it, still open,
  is a kCommandBuffer thunk.
  """
  captured = uncaptured = 0
  stack: list[tuple[int, bool]] = []  # (indent, is command buffer)
  top_kinds = []
  for line in text.splitlines():
    if not line.strip():
      continue
    indent = len(line) - len(line.lstrip())
    while stack and stack[-1][0] >= indent:
      stack.pop()
    is_cb = "kCommandBuffer" in line
    if not stack:
      m = re.search(r"\bk[A-Z][A-Za-z]+", line)
      if m:
        top_kinds.append(m.group(0))
    if "kCustomCall" in line and (_TARGET in line or _TARGET not in text):
      if any(cb for _, cb in stack):
        captured += 1
      else:
        uncaptured += 1
    stack.append((indent, is_cb))
  whole = bool(top_kinds) and all(k == "kCommandBuffer" for k in top_kinds)
  return CaptureReport(text, captured, uncaptured, whole)


def check_capture(fn: Callable, *args, min_graph_size: int = 1,
                  whole_loops: bool = True, **kwargs) -> CaptureReport:
  """Compiles `jax.jit(fn)(*args, **kwargs)` with a dump and reports capture.

  With `whole_loops`, loops and conditionals may become one graph each (the
  flags of `cuda_graph_options`); without, XLA's default kinds apply.  Only
  meaningful on a CUDA device; elsewhere no command buffers exist.
  """
  with tempfile.TemporaryDirectory(prefix="jax_dynoff_dump_") as d:
    opts = {"xla_dump_to": d}
    if whole_loops:
      opts.update(cuda_graph_options(min_graph_size))
    else:
      opts["xla_gpu_graph_min_graph_size"] = str(min_graph_size)
    jax.jit(fn).lower(*args, **kwargs).compile(compiler_options=opts)
    files = sorted(glob.glob(os.path.join(
        d, "*thunk_sequence_after_thunk_passes.txt")))
    if not files:
      raise RuntimeError(
          "XLA wrote no thunk sequence: check_capture needs a CUDA device "
          f"(default backend: {jax.default_backend()})")
    # The largest module is the jitted program (others are tiny helpers).
    text = max((open(f).read() for f in files), key=len)
  return _parse(text)
