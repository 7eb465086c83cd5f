"""CUDA graphs: the XLA flags that capture loop bodies or whole loops, and a
capture check.

XLA turns runs of graph-safe thunks into command buffers (CUDA graphs) after
HLO compilation, so `compiled.as_text()` never shows them; the thunk
sequence XLA dumps does.  `check_capture` compiles a function with a dump and
reads that file back, so users can see which of their calls run inside a
command buffer.

    import os, jax_dynoff as dyn
    os.environ["XLA_FLAGS"] = dyn.cuda_graph_flags()   # before JAX's first use
    ...
    print(dyn.check_capture(f, *args))

`cuda_graph_flags()` is the reliable way: graphs from one command up, so
each loop body (calls, counter, conditionals) is one graph and the loop runs
on the host; `whole_loops=True` adds WHILE to XLA's default command kinds,
so a whole loop is one graph.  `cuda_graph_options()` does the same per
compile, but must spell out the whole list, and some kinds XLA uses by
default cannot be named there.

What keeps a loop out of one graph under `whole_loops=True` (jax 0.11.2,
H200): XLA reads a bare `table[i]` (i the loop counter) that feeds a custom
call through an asynchronous dynamic-slice copy, and a while loop holding
one stays on the host, with only its body captured.  `gemm` passes a
`table[i]` start (also at `i // c` or `i % L`) as the table and the index,
which its kernels read, and computes any other traced start in one XLA
fusion before the call, so `window(x, (table[i], 0), ...)` never becomes
such a copy and the loop is whole.  A `lax.scan` over `xs` has the same copy
for `xs[i]`, outside any jax_dynoff call: carry the step counter instead
(`lax.scan(step, (c, 0), None, length=L)`) or use `fori_loop`, and check
with `check_capture`.
"""

from __future__ import annotations

import dataclasses
import glob
import os
import re
import tempfile
from typing import Callable, Optional

import jax

from jax_dynoff.graph_pads import PAD_TARGET

# Per-compile command kinds: XLA's defaults that compile options accept, plus
# WHILE (off by default), which puts a whole fori_loop / scan / while_loop
# into one graph.
_COMMANDS = ("FUSION,CUBLAS,CUBLASLT,CUSTOM_CALL,CUDNN,CONDITIONAL,WHILE,"
             "DYNAMIC_SLICE_FUSION")


def cuda_graph_flags(min_graph_size: int = 1, whole_loops: bool = False) -> str:
  """XLA_FLAGS text for CUDA-graph capture; set it before JAX starts.

  `min_graph_size=1` lets even a single call form a graph.  XLA's default
  (5) leaves a loop body of one `gemm` call (two or three thunks: the call,
  the counter, and the fusion that makes its offsets vector where a start
  is computed) outside any graph, launched thunk by thunk from the host.

  By default each loop body is one graph (conditionals and FFI calls such
  as jax_dynoff's are among XLA's default command kinds) and the loop runs
  on the host.  Where XLA knows the trip count (`fori_loop` and `scan` with
  static bounds) it enqueues the iterations without waiting for the
  device, and this is the fastest setting for such loops: faster than one
  whole-loop graph, and than XLA's defaults, where the host's two
  launches per iteration bound a loop of small GEMMs.

  `whole_loops=True` adds WHILE to the command kinds, so a whole loop is one
  graph and its control runs on the device: condition kernels and a
  conditional node every iteration, which costs more than a small GEMM.
  That pays where XLA cannot know the trip count (a `while_loop` on a
  computed condition, a `fori_loop` to a traced bound): with the loop on
  the host, XLA copies the predicate back and waits for it every
  iteration, which costs more still.  Measurements: docs/cuda_graphs.md.
  """
  size = f"--xla_gpu_graph_min_graph_size={min_graph_size}"
  return f"--xla_gpu_enable_command_buffer=+WHILE {size}" if whole_loops else size


def cuda_graph_options(min_graph_size: int = 1,
                       whole_loops: bool = False) -> dict[str, str]:
  """The same per compile: `.compile(compiler_options=cuda_graph_options())`."""
  kinds = [k for k in _COMMANDS.split(",") if whole_loops or k != "WHILE"]
  return {"xla_gpu_enable_command_buffer": ",".join(kinds),
          "xla_gpu_graph_min_graph_size": str(min_graph_size)}


NO_GRAPHS = {"xla_gpu_enable_command_buffer": ""}  # compile options: none
# Compile options: each loop body one graph (from one command up, so a body
# of one `gemm` and its counter is one), the loop on the host:
# cuda_graph_flags() per compile.
BODY_GRAPHS = cuda_graph_options()
# Compile options: a whole loop one graph, its control on the device:
# cuda_graph_flags(whole_loops=True) per compile.
WHOLE_LOOP_GRAPHS = cuda_graph_options(whole_loops=True)


@dataclasses.dataclass
class CaptureReport:
  """Where the jax_dynoff calls of one compiled program run.

  thunks: the dumped thunk sequence (XLA's text), for reading.
  captured / uncaptured: jax_dynoff's custom-call thunks inside / outside
  a command buffer: its calls, and after a call at a loop body's top level
  its graph pads (graph_pads.py; XLA's dump does not tell them apart).
  whole_program: the program's top level is one command buffer.
  hints: why it is not, when the dump shows a known cause (plain text).
  """

  thunks: str
  captured: int
  uncaptured: int
  whole_program: bool
  hints: list = dataclasses.field(default_factory=list)

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
  loop_copies = False  # a host-side loop's body holds an async slice copy
  thunk = re.compile(r"^\s*\d+: k[A-Z]")
  for line in text.splitlines():
    if not thunk.match(line):  # "condition:", "body:", "branch_0:" labels
      continue
    indent = len(line) - len(line.lstrip())
    while stack and stack[-1][0] >= indent:
      stack.pop()
    is_cb = "kCommandBuffer" in line
    if not stack:
      m = re.search(r"\bk[A-Z][A-Za-z]+", line)
      if m:
        top_kinds.append(m.group(0))
    elif top_kinds and top_kinds[-1] == "kWhile" and (
        "kDynamicSliceFusion" in line or "kAsyncStart" in line):
      loop_copies = True
    if "kCustomCall" in line and (_TARGET in line or PAD_TARGET in line
                                  or _TARGET not in text):
      if any(cb for _, cb in stack):
        captured += 1
      else:
        uncaptured += 1
    stack.append((indent, is_cb))
  whole = bool(top_kinds) and all(k == "kCommandBuffer" for k in top_kinds)
  hints = []
  if loop_copies:
    hints.append(
        "a loop runs on the host because its body holds an asynchronous "
        "dynamic-slice copy (kDynamicSliceFusion); XLA makes one for a "
        "scan's xs[i] (carry the step counter: lax.scan(step, (c, 0), None, "
        "length=L), or use fori_loop) and for a bare table[i] fed to a "
        "custom call")
  elif "kWhile" in top_kinds:
    hints.append(
        "a loop runs on the host with its body captured (body graphs: the "
        "fastest setting where XLA knows the trip count, as for fori_loop "
        "and scan); to make the whole loop one graph, its control on the "
        "device, as pays for a loop whose trip count XLA cannot know, add "
        "WHILE to the command kinds: cuda_graph_flags(whole_loops=True) or "
        "cuda_graph_options(whole_loops=True)")
  if uncaptured:
    sizes = sorted(set(_uncaptured_run_sizes(text)))
    where = (f"; the sequence around them has {'/'.join(map(str, sizes))} "
             "top-level thunk(s) (those inside a cond's branches do not "
             "count)") if sizes else ""
    hints.append(
        f"{uncaptured} jax_dynoff call(s) outside any command buffer: XLA "
        "forms no graph of fewer thunks than --xla_gpu_graph_min_graph_size "
        f"(default 5){where}: set it to 1 (cuda_graph_flags(min_graph_size=1)"
        ", or per compile cuda_graph_options()), or unroll the loop "
        "(fori_loop(..., unroll=k))")
  return CaptureReport(text, captured, uncaptured, whole, hints)


def _uncaptured_run_sizes(text: str) -> list[int]:
  """For each jax_dynoff call outside any command buffer, the number of
  top-level thunks of the sequence it runs in: its loop body's (the
  nearest enclosing `body:`; a call inside a cond's branch belongs to the
  body holding the cond), or the program's.  XLA compares that number
  with min_graph_size."""
  lines = [(len(l) - len(l.lstrip()), l.strip()) for l in text.splitlines()
           if l.strip()]
  thunk = re.compile(r"^\d+: k[A-Z]")
  sizes = []
  for i, (indent, body) in enumerate(lines):
    if not (thunk.match(body) and "kCustomCall" in body):
      continue
    # The enclosing thunks (each shallower than the last) and the nearest
    # enclosing body label.
    cur, start, cb = indent, None, False
    for j in range(i - 1, -1, -1):
      ind, txt = lines[j]
      if thunk.match(txt) and ind < cur:
        cur = ind
        cb = cb or "kCommandBuffer" in txt
      elif txt == "body:" and ind < cur and start is None:
        start = j
    if cb:
      continue  # captured
    if start is None:  # the program's top level
      top = min(ind for ind, txt in lines if thunk.match(txt))
      sizes.append(sum(1 for ind, txt in lines
                       if thunk.match(txt) and ind == top))
      continue
    label = lines[start][0]
    first = None
    n = 0
    for ind, txt in lines[start + 1:]:
      if ind <= label:
        break
      if thunk.match(txt):
        first = ind if first is None else first
        n += ind == first
    sizes.append(n)
  return sizes


def check_capture(fn: Callable, *args,
                  compiler_options: Optional[dict] = None,
                  **kwargs) -> CaptureReport:
  """Compiles `jax.jit(fn)(*args, **kwargs)` with a dump and reports capture.

  The command kinds are those in force: XLA_FLAGS (see `cuda_graph_flags`)
  or `compiler_options` (e.g. `cuda_graph_options()`).  Only meaningful on a
  CUDA device; elsewhere no command buffers exist.
  """
  with tempfile.TemporaryDirectory(prefix="jax_dynoff_dump_") as d:
    opts = {"xla_dump_to": d, **(compiler_options or {})}
    jax.jit(fn).lower(*args, **kwargs).compile(compiler_options=opts)
    # After XLA's thunk passes (command buffers formed) where it writes
    # that; else the thunk sequence as emitted.
    files = sorted(glob.glob(os.path.join(
        d, "*thunk_sequence_after_thunk_passes.txt"))) or sorted(glob.glob(
            os.path.join(d, "*thunk_sequence*.txt")))
    if not files:
      raise RuntimeError(
          "XLA wrote no thunk sequence: check_capture needs a CUDA device "
          f"(default backend: {jax.default_backend()}; dumped: "
          f"{sorted(os.listdir(d))[:20]})")
    # The largest module is the jitted program (others are tiny helpers).
    text = max((open(f).read() for f in files), key=len)
  return _parse(text)
