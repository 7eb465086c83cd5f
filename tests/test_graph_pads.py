"""Graph pads (jax_dynoff/graph_pads.py): a call bound at a loop body's top
level is followed, in a CUDA lowering, by pass-through calls that lift a
short body over XLA's minimum command-buffer size at the default flags.
Checked here on the lowered text (no GPU needed): where the pads go and
where they do not, that each passes the call's result on aliased, and the
option; tests/test_gpu_graphs.py checks that such a body is one graph."""

from __future__ import annotations

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax
from jax.extend.core import ClosedJaxpr, Jaxpr

import jax_dynoff as dyn
from jax_dynoff import graph_pads

PAD = f"@{graph_pads.PAD_TARGET}("
CALL = "@jax_dynoff_gemm("
M, N, K, L = 8, 64, 32, 4


def _args():
  x = np.ones((L * M, K), np.float32)
  w = np.ones((L, K, N), np.float32)
  buf = np.zeros((L * M, N), np.float32)
  rows = np.arange(L, dtype=np.int32)[::-1] * M
  return x, w, buf, rows


def _call(x, w, buf, rows, i, opts=None):
  return dyn.gemm(dyn.window(x, (rows[i], 0), (M, K)),
                  dyn.window(w, (i, 0, 0), (K, N)),
                  out=dyn.window(buf, (i * M, 0), (M, N)), opts=opts)


def fori(x, w, buf, rows, opts=None):
  return lax.fori_loop(0, L, lambda i, b: _call(x, w, b, rows, i, opts), buf)


def fori_traced_bound(x, w, buf, rows):
  return lax.fori_loop(0, rows[-1] + L, lambda i, b: _call(x, w, b, rows, i),
                       buf)


def scan(x, w, buf, rows):
  def step(c, _):
    b, i = c
    return (_call(x, w, b, rows, i), i + 1), None
  return lax.scan(step, (buf, jnp.int32(0)), None, length=L)[0][0]


def while_loop(x, w, buf, rows):
  def body(c):
    i, b = c
    return i + 1, _call(x, w, b, rows, i)
  return lax.while_loop(lambda c: c[0] < L, body, (jnp.int32(0), buf))[1]


def lax_map(x, w, buf, rows):
  return lax.map(lambda i: dyn.gemm(dyn.window(x, (rows[i], 0), (M, K)),
                                    dyn.window(w, (i, 0, 0), (K, N))),
                 jnp.arange(L))


def vmap_in_fori(x, w, buf, rows):
  def body(i, b):
    y = jax.vmap(lambda wl: dyn.gemm(x[:M], wl))(w)  # (L, M, N)
    return lax.dynamic_update_slice(b, y[i], (i * M, 0))
  return lax.fori_loop(0, L, body, buf)


def top_level(x, w, buf, rows):
  return _call(x, w, buf, rows, 1)


def cond_in_fori(x, w, buf, rows):
  def body(i, b):
    return lax.cond(rows[i] > 0, lambda b: _call(x, w, b, rows, i),
                    lambda b: b, b)
  return lax.fori_loop(0, L, body, buf)


def cond_window_outside(x, w, buf, rows):
  """The windows made at the body's top level, the calls in the branches:
  the first window's start (clamped: i - 1 wraps at i = 0) padded there."""
  def body(i, b):
    xi = dyn.window(x, (i - 1, 0), (M, K))
    wi = dyn.window(w, (i, 0, 0), (K, N))
    return lax.cond(rows[i] > 0,
                    lambda b: dyn.gemm(xi, wi, out=dyn.window(
                        b, (rows[i], 0), (M, N))),
                    lambda b: dyn.gemm(xi, wi, out=dyn.window(
                        b, (rows[i] + 3, 0), (M, N)), alpha=-1.0), b)
  return lax.fori_loop(0, L, body, buf)


def jit_window_outside(x, w, buf, rows):
  """A nested jit closing over windows made at the body's top level."""
  def body(i, b):
    xi = dyn.window(x, (rows[i], 0), (M, K))
    wi = dyn.window(w, (i, 0, 0), (K, N))
    inner = jax.jit(lambda b: dyn.gemm(xi, wi, out=b))
    return inner(b[:M]).sum() + b
  return lax.fori_loop(0, L, body, buf)


def window_carry(x, w, buf, rows):
  """A window carried through the loop: made outside (no pads) and in the
  body (padded), one structure either way."""
  def body(i, c):
    xi, b = c
    b = dyn.gemm(xi, dyn.window(w, (i, 0, 0), (K, N)),
                 out=dyn.window(b, (i * M, 0), (M, N)))
    return dyn.window(x, (rows[i], 0), (M, K)), b
  return lax.fori_loop(0, L, body, (dyn.window(x, (0, 0), (M, K)), buf))[1]


def jit_in_fori(x, w, buf, rows):
  inner = jax.jit(_call)
  return lax.fori_loop(0, L, lambda i, b: inner(x, w, b, rows, i), buf)


def _text(f, platform="cuda", **kw):
  return jax.jit(lambda *a: f(*a, **kw)).trace(*_args()).lower(
      lowering_platforms=(platform,)).as_text()


def _custom_calls(text: str) -> dict:
  """Each custom call's result name -> (target, operands, its line)."""
  defs = {}
  for line in text.splitlines():
    m = re.match(r"\s*(%[\w#:]+) = stablehlo\.custom_call (@\w+)\((.*?)\)",
                 line)
    if m:
      defs[m.group(1).split(":")[0]] = (m.group(2), m.group(3), line)
  return defs


def _live_pads(text: str) -> int:
  """The pads whose result something other than a dead pad uses, or that
  lead to a pad with a side effect (a gradient's anchor).  A window made
  at a loop body's top level pads its start for a call in a `cond`
  branch; where the call sits beside it instead, those pads go unused
  (XLA drops them; JAX keeps them in a while loop's body)."""
  # a pad's result -> its operand
  calls = _custom_calls(text)
  pads = {name: operands for name, (target, operands, _)
          in calls.items() if target + "(" == PAD}
  live = set()
  for name in pads:
    uses = len(re.findall(re.escape(name) + r"(?![\w#:])", text)) - 1
    if (uses > sum(op == name for op in pads.values())
        or "has_side_effect = true" in calls[name][2]):
      while name in pads:  # used by something else: the chain up to it
        live.add(name)
        name = pads[name]
  return len(live)


def _chains(text: str) -> list[int]:
  """Per jax_dynoff call, the pads that pass its result on: pad j takes
  pad j - 1's result (the call's first result for j = 0) and aliases it."""
  defs = _custom_calls(text)
  chains = []
  for name, (target, _, _) in defs.items():
    if target + "(" != CALL:
      continue
    n, cur = 0, name + "#0"
    while True:
      nxt = [(k, v) for k, v in defs.items()
             if v[0] + "(" == PAD and v[1] == cur]
      if not nxt:
        break
      (k, (_, _, line)), = nxt
      assert "output_operand_alias<output_tuple_indices = []" in line, line
      n, cur = n + 1, k
    chains.append(n)
  return chains


@pytest.mark.parametrize("f", [fori, fori_traced_bound, scan, while_loop,
                               lax_map, vmap_in_fori],
                         ids=lambda f: f.__name__)
def test_a_call_at_a_loop_bodys_top_level_is_padded(f):
  text = _text(f)
  assert _live_pads(text) == graph_pads.LOOP_GRAPH_PADS, text
  assert _chains(text) == [graph_pads.LOOP_GRAPH_PADS], text


@pytest.mark.parametrize("f", [top_level, cond_in_fori, jit_in_fori],
                         ids=lambda f: f.__name__)
def test_a_call_elsewhere_is_not_padded(f):
  """Outside loops the pads would cost thunks for nothing; in a cond branch
  XLA does not count them; a nested jit's trace does not say it sits in a
  loop (a call without pads: slower at the defaults, never wrong)."""
  text = _text(f)
  assert text.count(CALL) == 1 and _live_pads(text) == 0, text


@pytest.mark.parametrize("f", [cond_window_outside, jit_window_outside],
                         ids=lambda f: f.__name__)
def test_a_window_made_at_the_top_level_pads_for_a_call_below_it(f):
  """XLA counts a conditional (or an inlined jit's calls) at the body's top
  level, so there a window's first traced start starts a chain of pads
  that alias nothing (fresh results, no copy, no clamp's fusion), and
  every call below takes the chain's end as its last operand: one chain,
  the first window's, however many calls and windows."""
  text = _text(f)
  assert _live_pads(text) == graph_pads.LOOP_GRAPH_PADS, text
  defs = _custom_calls(text)
  pads = [name for name, (target, _, _) in defs.items() if target + "(" == PAD]
  assert all("output_operand_alias" not in defs[p][2] for p in pads), text
  end = pads[graph_pads.LOOP_GRAPH_PADS - 1]  # the first window's chain
  # The end goes to each call as its last operand (a call in a branch)
  # or into a function holding the calls (the nested jit; on older jax
  # the whole loop body is such a function); no start is a pad's result.
  users = [line for line in text.splitlines()
           if CALL in line or re.search(r"\bcall @", line)]
  assert any(re.search(re.escape(end) + r"[,)]", u) for u in users), text
  for name, (target, operands, _) in defs.items():
    if target + "(" == CALL:
      ops = [o.strip() for o in operands.split(",")]
      assert not set(ops[:-1]) & set(pads), text
  assert "stablehlo.clamp" not in text, text
  # The chain reads the loop counter itself, not the start computed from
  # it (`rows[i]` read by a custom call would be a dynamic-slice copy).
  first = defs[pads[0]][1].strip()
  assert re.fullmatch(r"%iterArg\w*|%arg\d+", first), defs[pads[0]][2]


def test_a_graph_token_is_the_last_operand_and_read_by_nothing():
  """In a `cond` branch the call's starts are its windows' own values
  (read directly: the loop counter, a table look-up) and its token comes
  last, after every operand its slots name."""
  text = _text(cond_window_outside)
  calls = [v for v in _custom_calls(text).values() if v[0] + "(" == CALL]
  assert len(calls) == 2, text
  for _, operands, line in calls:
    ops = [o.strip() for o in operands.split(",")]
    slots = re.search(r"slots = \{add = .*?arg = dense<(\[[^\]]*\]|\d+)>",
                      line)
    assert slots, line
    args = [int(v) for v in re.findall(r"-?\d+", slots.group(1))]
    assert max(args) < len(ops) - 1, line  # the token is read by no slot


def test_a_call_that_turns_pads_off_takes_the_start_as_it_is():
  def body_off(x, w, buf, rows):
    opts = dyn.KernelOptions(loop_graph_pads=0)

    def body(i, b):
      wi = dyn.window(w, (i, 0, 0), (K, N))
      return lax.cond(rows[i] > 0, lambda b: dyn.gemm(
          x[:M], wi, out=dyn.window(b, (rows[i], 0), (M, N)), opts=opts),
                      lambda b: b, b)
    return lax.fori_loop(0, L, body, buf)
  assert _live_pads(_text(body_off)) == 0


def test_explain_names_a_calls_pads():
  args = _args()
  inside, = dyn.explain(fori, *args)
  outside, = dyn.explain(top_level, *args)
  assert inside.endswith(f"; then {graph_pads.LOOP_GRAPH_PADS} graph pads "
                         "(a loop body's top level)"), inside
  assert "graph pads" not in outside, outside
  off, = dyn.explain(
      lambda *a: fori(*a, opts=dyn.KernelOptions(loop_graph_pads=0)), *args)
  assert "graph pads" not in off, off
  token = "takes a window's graph token"
  assert all(line.endswith(token + " (its pads sit at the loop body's top "
                           "level)") for line in dyn.explain(
                               cond_window_outside, *args)), args
  assert not any(token in line for line in dyn.explain(cond_in_fori, *args)
                 + [inside, outside, off])


def test_the_cpu_lowering_is_never_padded():
  assert PAD not in _text(fori, platform="cpu")


@pytest.mark.parametrize("pads", [0, 1, 5])
def test_loop_graph_pads_sets_the_count(pads):
  text = _text(fori, opts=dyn.KernelOptions(loop_graph_pads=pads))
  assert _live_pads(text) == pads and _chains(text) == [pads], text


@pytest.mark.parametrize("bad", [-1, True, 1.0, "3"])
def test_loop_graph_pads_rejects_what_is_not_a_count(bad):
  with pytest.raises(ValueError, match="loop_graph_pads"):
    dyn.KernelOptions(loop_graph_pads=bad)


def _assert_as_the_reference(run, name=""):
  """run() with jax_dynoff's gemm, then with jax_dynoff.reference.gemm in
  its place: every output alike."""
  got = run()
  real = dyn.gemm
  try:
    dyn.gemm = dyn.reference.gemm
    want = run()
  finally:
    dyn.gemm = real
  for a, b in zip(jax.tree.leaves(got), jax.tree.leaves(want)):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=2e-2,
                               atol=2e-2, err_msg=name)


def test_padded_loops_compute_what_the_reference_does():
  """On this machine's backend (the CPU: no pads; a GPU: padded), each loop
  against the same loop over jax_dynoff.reference.gemm."""
  args = [jnp.asarray(a) for a in _args()]
  k = jax.random.split(jax.random.key(0), 2)
  args[0] = jax.random.normal(k[0], args[0].shape)
  args[1] = jax.random.normal(k[1], args[1].shape)
  for f in (fori, scan, while_loop, cond_in_fori, cond_window_outside,
            jit_window_outside, window_carry):
    _assert_as_the_reference(lambda: jax.jit(f)(*args), f.__name__)


# Under a gradient: the forward loop keeps the call's window starts.


def _loss(x, w, g, rows):
  def body(i, acc):
    y = dyn.gemm(dyn.window(x, (rows[i], 0), (M, K)), w[0])
    return acc + jnp.sum(y * g[i])
  return lax.fori_loop(0, L, body, jnp.float32(0))


def _loss_args():
  x, w, _, rows = _args()
  k = jax.random.split(jax.random.key(1), 3)
  return (jax.random.normal(k[0], x.shape), jax.random.normal(k[1], w.shape),
          jax.random.normal(k[2], (L, M, N)), jnp.asarray(rows))


def _loops(jaxpr, found):
  """(primitive names in the body, recursively) of each loop in jaxpr."""
  for eqn in jaxpr.eqns:
    subs = [v for v in eqn.params.values()
            if isinstance(v, (Jaxpr, ClosedJaxpr))]
    for sub in subs:
      sub = getattr(sub, "jaxpr", sub)
      if eqn.primitive.name in ("scan", "while"):
        found.append(_names(sub))
      _loops(sub, found)
  return found


def _names(jaxpr):
  out = set()
  for eqn in jaxpr.eqns:
    out.add(eqn.primitive.name)
    for v in eqn.params.values():
      if isinstance(v, (Jaxpr, ClosedJaxpr)):
        out |= _names(getattr(v, "jaxpr", v))
  return out


def test_a_gradients_forward_loop_keeps_the_anchored_pads():
  """jax.grad drops the unused loss value, so the forward loop holds no
  call, only the start (a residual): the pads are anchored there, in the
  loop that computes it, and the lowering has them, no call, the last pad
  marked as having a side effect (XLA keeps it unread), the first reading
  the loop counter (a block argument), and no pad result among the
  values the loop stores."""
  grad = jax.grad(_loss, argnums=(0, 1))
  args = _loss_args()
  loops = _loops(jax.make_jaxpr(grad)(*args).jaxpr, [])
  forward = [n for n in loops if graph_pads.anchor_p.name in n]
  assert len(forward) == 1 and "dot_general" not in forward[0], loops
  assert not jax.make_jaxpr(grad)(*args).effects  # JAX's fast path stays
  text = jax.jit(grad).trace(*args).lower(
      lowering_platforms=("cuda",)).as_text()
  assert _live_pads(text) == graph_pads.LOOP_GRAPH_PADS, text
  assert CALL not in text, text  # the value's call, dropped
  calls = _custom_calls(text)
  pads = [(name, ops, line) for name, (target, ops, line) in calls.items()
          if target + "(" == PAD]
  assert sum("has_side_effect = true" in line for *_, line in pads) == 1
  firsts = [ops for name, ops, _ in pads if ops not in calls]
  assert firsts and all(re.fullmatch(r"%iterArg\w*|%arg\d+", ops)
                        for ops in firsts), pads
  # In the forward loop's region (its names are its own), pads read pads
  # alone: up to the next loop or function, whichever comes first.
  start = text.index(pads[0][2])
  end = re.compile(r"stablehlo\.while\(|func\.func ").search(text, start)
  loop = text[start:end.start() if end else len(text)]
  for name, *_ in pads:
    uses = re.findall(re.escape(name) + r"(?![\w#:])", loop)
    assert len(uses) - 1 == sum(o == name for _, o, _ in pads), name
  assert PAD not in jax.jit(grad).trace(*args).lower(
      lowering_platforms=("cpu",)).as_text()


def test_a_gradient_outside_loops_or_unpadded_has_no_pads():
  def once(x, w, g, rows):
    return jnp.sum(dyn.gemm(dyn.window(x, (rows[1], 0), (M, K)), w[0]) * g[0])

  def off(x, w, g, rows):
    def body(i, acc):
      y = dyn.gemm(dyn.window(x, (rows[i], 0), (M, K)), w[0],
                   opts=dyn.KernelOptions(loop_graph_pads=0))
      return acc + jnp.sum(y * g[i])
    return lax.fori_loop(0, L, body, jnp.float32(0))

  for f in (once, off):
    text = jax.jit(jax.grad(f, argnums=(0, 1))).trace(*_loss_args()).lower(
        lowering_platforms=("cuda",)).as_text()
    assert _live_pads(text) == 0, (f.__name__, text)


def test_padded_starts_leave_gradients_as_the_reference_has_them():
  """value_and_grad (the call kept: its pads and the start's), grad, and a
  vmap of the grad (the pad vectorised), against the same loss over
  jax_dynoff.reference.gemm."""
  args = _loss_args()

  def run():
    vg = jax.jit(jax.value_and_grad(_loss, argnums=(0, 1)))(*args)
    g = jax.jit(jax.grad(_loss, argnums=(0, 1)))(*args)
    vm = jax.jit(jax.vmap(jax.grad(_loss), in_axes=(None, None, 0, None)))(
        args[0], args[1], jnp.stack([args[2], -args[2]]), args[3])
    return vg, g, vm

  _assert_as_the_reference(run)


def _cond_loss(x, w, g, rows):
  """A loss over a loop whose windows are made at the body's top level and
  used in a `cond`'s branches: the calls carry the window's graph token."""
  def body(i, acc):
    xi = dyn.window(x, (rows[i], 0), (M, K))
    wi = dyn.window(w, (i, 0, 0), (K, N))
    y = lax.cond(i % 2 == 0, lambda: dyn.gemm(xi, wi),
                 lambda: dyn.gemm(xi, wi, alpha=-0.5))
    return acc + jnp.sum(y * g[i])
  return lax.fori_loop(0, L, body, jnp.float32(0))


def test_graph_tokens_leave_transforms_as_the_reference_has_them():
  """value_and_grad, grad and a vmap of the loss whose calls carry a
  graph token, against the same loss over jax_dynoff.reference.gemm; and
  each lowers for CUDA (token chains, the token among the call's operands)."""
  args = _loss_args()
  fns = {
      "value_and_grad": jax.value_and_grad(_cond_loss, argnums=(0, 1)),
      "grad": jax.grad(_cond_loss, argnums=(0, 1)),
      "vmap": jax.vmap(_cond_loss, in_axes=(None, None, 0, None)),
  }
  vargs = {"vmap": (args[0], args[1], jnp.stack([args[2], -args[2]]),
                    args[3])}
  for name, f in fns.items():
    a = vargs.get(name, args)
    text = jax.jit(f).trace(*a).lower(lowering_platforms=("cuda",)).as_text()
    assert CALL in text, name
    _assert_as_the_reference(lambda: jax.jit(f)(*a), name)
  text = jax.jit(_cond_loss).trace(*args).lower(
      lowering_platforms=("cuda",)).as_text()
  assert _live_pads(text) == graph_pads.LOOP_GRAPH_PADS, text
