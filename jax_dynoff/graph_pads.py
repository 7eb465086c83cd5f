"""Graph pads: what lifts a short loop body over XLA's minimum graph size.

At XLA's default flags (jax 0.11) a run of thunks becomes a CUDA graph
only from `xla_gpu_graph_min_graph_size` = 5 thunks up.  A `fori_loop` body
of one `gemm` is two thunks, the call and the loop's counter, so XLA
launches them one by one from the host every iteration, while its own
loop (slice copy, dot, update, counter: five with its copies) is one graph
launch.  Host-bound, such a loop lost to XLA's by up to 30-40% at the
defaults although its kernels were faster.

So a call bound at the top level of a loop body (`fori_loop`, `scan`,
`lax.map`, a `while_loop`'s body) is followed, on CUDA, by LOOP_GRAPH_PADS
pass-through FFI calls (ffi/graph_pad.cc): each takes the call's result
and returns it aliased, launches nothing and moves no byte.  Being pure
(no side effect), they keep a jitted call on JAX's fast dispatch path; a
side-effecting no-op took 128-185 us a dispatch against 32-33.

Measured with the same pads put beside the sweep's calls
(benchmarks/graph_min_size/pad_probe.py --pure, 9 cells a pattern, ratio =
XLA's loop / ours at XLA's defaults; docs/cuda_graphs.md has the table):
every padded body became one graph; the stacked loop's minimum went from
0.70 to 1.04 on an H200 (0.57 to 0.89 on an H100), the table loop's from
0.88 to 1.38 and the KV loop's from 1.29 to 1.56 on an H100.  Where the
body is a graph anyway (body graphs) the pads moved a call by -10% to
+13%, as much as two runs of a cell differ; a jitted call with 3 pads
dispatched in 37-40 us on the H200, as without (48-50 against 40 on an
H100's host), and no pad goes where a call is not in a loop body.

Under autodiff part of a call's loop lands where the call is not: the
forward loop of a gradient keeps the window starts (residuals for the
backward loop) and, where the loss's value goes unused, nothing of the
call (XLA drops it).  That loop is then counter, slices and residual
stores, four thunks on an H100 in the sweep's backward pattern, under
the threshold, while XLA's own (which also stores the sliced operand) is
a graph.  So the JVP rule (rules.py) anchors as many pads to a padded
call's first dynamic start (`anchor`: the identity in JAX, so it sits in
whichever loop computes the start and lives as long as the start is
used).  The anchor's pads, like a graph token's (below), read the loop
counter or argument the start is computed from and return fresh buffers;
nothing reads the last one, which is marked as having a side effect in
the HLO alone, so XLA keeps the chain.  JAX sees no effect (a jitted call
stays on its fast dispatch path; an FFI effect took it off,
docs/cuda_graphs.md).  The start itself comes out as it went in, so XLA
fuses it into the residual store: an earlier form passed the start
through aliasing pads, which cost the start a fusion of its own.

A call inside a `cond` branch cannot lift its loop body (XLA counts the
conditional as one thunk), but a window made at the body's top level and
used in the branch can: `window()` there (`window_token`) starts a chain
of LOOP_GRAPH_PADS pads from its first traced start (from the loop counter
or argument that start is computed from, so that XLA computes nothing for
the pads) that, unlike a call's pads, alias nothing: each returns a fresh
buffer it never writes, the window's graph token.  A call bound below a
loop body's top level (in a `cond` branch, a nested `jit`) takes its first
window's token as a trailing operand its handlers ignore
(`use_window_pads`), so the pads sit at the body's top level and count
there, and the call reads its starts as they are (no kernel of the pads'
own: an aliasing pad on a live start, the loop counter, would cost XLA a
copy, and a clamp into a fresh value its own fusion).  A call at a loop
body's top level takes no token (its own pads lift the body), and XLA
drops the unused pads.  The token is no pytree leaf of the window, so a
window passed as a jit's argument or carried through a loop arrives
without it (and without pads), and a carried window keeps one structure
whether it was made inside the body or not.

Measured on an H100 with the sweep (12 cells, bfloat16, ratio = XLA's
loop / ours, min / geomean; docs/cuda_graphs.md has the tables): at the
defaults table 0.67 / 1.56 -> 1.18 / 2.13, stacked 0.68 / 1.18 -> 1.16 /
1.50, cond 0.72 / 0.92 -> 0.96 / 1.16, backward 0.63 / 0.97 -> 0.99 /
1.07, every padded body one graph.  Those pads cost one small kernel a
step (cond: the start clamped into a fresh value, which the window's
pads then aliased; backward: the start's own fusion), which lost 5-6%
where the body is a graph anyway (body graphs).  The graph token and the
gradient's anchor remove both kernels: on an H100 (c88cc43) cond 1.06 /
1.25 at the defaults and 1.05 / 1.24 with body graphs, backward 1.07 /
1.16 and 1.06 / 1.14 (0.95 / 1.08 with body graphs under the aliasing
pads, on the same machine).

Where no pads go: a call inside a `cond` branch on windows made inside
it (XLA counts the conditional as one thunk, whatever its branches
hold), inside a nested `jit` or `checkpoint` on windows made there (XLA
inlines them, but their trace does not say it sits in a loop), outside
loops, and on the CPU.  KernelOptions' loop_graph_pads overrides the
count (0: none; for a window's pads, 0 on the call leaves them unused).
"""

from __future__ import annotations

import jax
from jax._src import core as _core  # the trace state _in_loop_body reads
from jax._src.lib.mlir import ir
from jax.extend.core import Primitive
from jax.interpreters import ad, batching, mlir

# XLA's default minimum graph size (5) less the call and the loop's counter.
LOOP_GRAPH_PADS = 3
PAD_TARGET = "jax_dynoff_graph_pad"
# What JAX's tracer names a loop body it traces (DebugInfo.traced_for):
# fori_loop's and scan's (lax.map's too) bodies, and while_loop's body
# (not its condition, "while_cond").
_LOOP_BODIES = frozenset({"fori_loop", "scan", "while_body"})


def _in_loop_body() -> bool:
  """Whether the call (or window) being made lands at the top level of a
  loop body: the innermost staging trace (under any vmap or JVP trace) is
  tracing a loop's body.  Read off JAX's private trace state; where that
  is not as expected the answer is no (no pads: slower at the defaults,
  never wrong)."""
  try:
    trace = _core.trace_ctx.trace
    while not hasattr(trace, "frame") and hasattr(trace, "parent_trace"):
      trace = trace.parent_trace
    return trace.frame.debug_info.traced_for in _LOOP_BODIES
  except AttributeError:
    return False


def count(opts) -> int:
  """The pads after a call bound now with KernelOptions `opts`."""
  if not _in_loop_body():
    return 0
  if opts.loop_graph_pads is None:
    return LOOP_GRAPH_PADS
  return opts.loop_graph_pads


def emit(ctx, value, pads: int):
  """The CUDA lowering's end: `value` (the call's result, ctx's one
  result) through `pads` pass-through calls, each aliasing its operand."""
  if pads == 0:
    return value
  aval = ctx.avals_out[0]
  pad = jax.ffi.ffi_lowering(PAD_TARGET, operand_output_aliases={0: 0})
  pctx = ctx.replace(avals_in=[aval], avals_out=[aval])
  for _ in range(pads):
    value, = pad(pctx, value)
  return value


# A window's graph token (see the module's docstring): LOOP_GRAPH_PADS pads
# in a chain, the first reading the window's start (on CUDA the loop
# counter or argument it is computed from: _plain_root), each result a fresh
# buffer that no pad writes and no kernel reads.  A call below the loop
# body's top level takes the last one as a trailing operand (its handlers
# ignore trailing operands), which keeps the chain alive at the top level.
# The identity on the CPU, elementwise under vmap, no derivative (integer).
token_p = Primitive("jax_dynoff_graph_token")
token_p.def_abstract_eval(lambda x, *, pads: x)
token_p.def_impl(lambda x, *, pads: x)
ad.defjvp(token_p, None)  # no tangent: an integer
batching.defvectorized(token_p)


def _plain_root(value, budget: int = 64):
  """A block argument of value's own type (a loop counter, a function
  argument) that `value` is computed from, or None: the first pad reads it
  instead of value, so that XLA need not compute value for the pads alone
  (a bare `table[i]` read by a custom call would become a dynamic-slice
  copy).  Depth first, a dynamic slice's indices before its array, so that
  `table[i]` leads to `i`, which varies in the loop, not to `table`."""
  todo = [value]  # a start's producers are few: `budget` bounds the walk
  while todo and budget > 0:
    v = todo.pop()
    budget -= 1
    if isinstance(v, ir.BlockArgument):
      if v.type == value.type:
        return v
      continue
    op = v.owner
    order = list(op.operands)  # the order to visit them in
    if op.name == "stablehlo.dynamic_slice":
      order = order[1:] + order[:1]
    todo.extend(reversed(order))  # a stack: order[0] comes next
  return None


def _chain(ctx, aval, x, pads: int, side_effect: bool = False):
  """`pads` pads in a chain from x's plain root (else x), each result a
  fresh buffer (no alias); the last marked as having a side effect in the
  HLO where `side_effect` (XLA then keeps it unread).  Returns the last."""
  root = _plain_root(x)
  x = x if root is None else root
  pctx = ctx.replace(avals_in=[aval], avals_out=[aval])
  for j in range(pads):
    pad = jax.ffi.ffi_lowering(
        PAD_TARGET, has_side_effect=side_effect and j == pads - 1)
    x, = pad(pctx, x)
  return x


def _token_lowering(ctx, x, *, pads):
  return [_chain(ctx, ctx.avals_out[0], x, pads)]


mlir.register_lowering(token_p, lambda ctx, x, *, pads: [x])
# Not cacheable: lowered inline, where the start's producers are visible.
mlir.register_lowering(token_p, _token_lowering, platform="cuda",
                       cacheable=False)


# A gradient's anchor (see the module's docstring): the identity on a start,
# whose CUDA lowering adds `pads` pads in a chain from the start's loop
# counter (as a graph token's), the last one marked as having a side
# effect in the HLO, so that XLA keeps the chain although nothing reads it.
# The start comes out as the very value that went in (the pads only read
# beside it); being its value's producer in JAX keeps the primitive as
# long as the start is used.  No effect in JAX: a jitted call stays on the
# fast dispatch path.  Linear (a start's tangent is a symbolic zero
# anyway), elementwise under vmap, nothing on the CPU.
anchor_p = Primitive("jax_dynoff_graph_anchor")
anchor_p.def_abstract_eval(lambda x, *, pads: x)
anchor_p.def_impl(lambda x, *, pads: x)
ad.deflinear2(anchor_p, lambda ct, x, *, pads: [ct])
batching.defvectorized(anchor_p)


def _anchor_lowering(ctx, x, *, pads):
  _chain(ctx, ctx.avals_in[0], x, pads, side_effect=True)
  return [x]


mlir.register_lowering(anchor_p, lambda ctx, x, *, pads: [x])
mlir.register_lowering(anchor_p, _anchor_lowering, platform="cuda",
                       cacheable=False)


def anchor(start, pads: int):
  """`start`, with `pads` pads (none: start itself) anchored to its loop
  counter where `start` is computed (a gradient's forward loop)."""
  return start if pads == 0 else anchor_p.bind(start, pads=pads)


def window_token(start):
  """For a window made now with starts `start`: at a loop body's top
  level, a graph token from its first traced start (LOOP_GRAPH_PADS pads);
  elsewhere, or without a traced start, None."""
  if not _in_loop_body():
    return None
  s = next((s for s in start if not isinstance(s, int)), None)
  return None if s is None else token_p.bind(s, pads=LOOP_GRAPH_PADS)


def use_window_pads(graph_token, opts) -> bool:
  """Whether a call bound now takes its window's graph token: the window
  has one, the call does not turn pads off, and the call is not at a loop
  body's top level itself (it is in a `cond` branch, a nested `jit`); at
  a loop body's top level the call's own pads lift the body, and the
  token goes unused (XLA drops its pads)."""
  return (graph_token is not None and opts.loop_graph_pads != 0
          and not _in_loop_body())
