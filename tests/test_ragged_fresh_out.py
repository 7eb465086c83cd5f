"""ragged_dot's out of zeros on the CUDA grouped path (on this CPU
machine, from lowerings made for CUDA without a GPU): the planner gives
the call a fresh D (`plan.fresh_out_reasons`, PlannedKernel.fresh_out),
the CUDA lowering passes no `out` and no alias, so XLA has no fill to
run; every other lowering (the CPU handler, the composed CUDA calls, a
call whose windows are not full-width row ranges of one shared out, an
out not known to be zeros) keeps `out` aliased.  The rows the grouped
pointer kernel then zeroes are tested on the GPU (test_gpu_ragged.py).
"""

from __future__ import annotations

import dataclasses
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jax_dynoff as dyn
from jax_dynoff import plan as plan_lib
from jax_dynoff import rules
from jax_dynoff.extension import ext
from jax_dynoff.spec import call_attrs
from test_lowering import aliases, custom_calls, lower

BF16, F16, F32 = jnp.bfloat16, jnp.float16, jnp.float32
M, K, N, G = 256, 64, 96, 4


def _args(dt=BF16, n=N, g=G):
  return (jnp.zeros((M, K), dt), jnp.zeros((g, K, n), dt),
          jnp.asarray([64, 0, 100, 30][:g], jnp.int32))


def _tensor(shape, dt) -> str:
  name = {BF16: "bf16", F16: "f16", F32: "f32"}[dt]
  return "tensor<" + "x".join(str(s) for s in shape) + f"x{name}>"


def _plan_fields(line: str) -> dict:
  found = re.search(r"plan = \{([^}]*)\}", line)
  assert found, line
  return dict(re.findall(r'(\w+) = ("[^"]*"|-?\d+|true|false)',
                         found.group(1)))


def _fresh(line, ins, outs, out_type):
  """Whether the call gets D fresh: no alias, no operand of out's type,
  result 0 of it, and its plan says so."""
  fields = _plan_fields(line)
  fresh = fields.get("fresh_out") == "true"
  if fresh:
    assert aliases(line) == [], line
    assert out_type not in ins, ins
    assert outs[0] == out_type, outs
    assert "out_zeros = true" in line, line
  else:
    assert fields.get("fresh_out") == "false", line
  return fresh


@pytest.mark.parametrize("dt, out", [(BF16, None), (F16, None), (BF16, F32),
                                     (F16, F32)])
def test_forward_takes_no_out_on_the_grouped_path(dt, out):
  lhs, rhs, gs = _args(dt)
  f = lambda a, b, g: dyn.ragged_dot(a, b, g, preferred_element_type=out)
  (spec,) = plan_lib.traced_specs(f, lhs, rhs, gs)
  assert spec.out_zeros and spec.has_out
  p = plan_lib.plan(spec)
  assert p.path == "sm90_grouped" and p.kernel.fresh_out
  assert plan_lib.fresh_out_reasons(spec) == []
  assert "D a fresh buffer" in plan_lib.explain(spec)
  text = lower(f, lhs, rhs, gs, platform="cuda")
  (line, ins, outs), = custom_calls(text)
  assert _fresh(line, ins, outs, _tensor((M, N), out or dt))
  # The workspace result has the planned size (the layout did not change).
  assert outs[1] == f"tensor<{p.workspace_bytes}xui8>", outs
  # No zeros of out's shape reach the call: the only operands are lhs,
  # rhs and the integer starts.
  assert ins[:2] == [_tensor((M, K), dt), _tensor((G, K, N), dt)], ins
  assert all("i32" in t or "i64" in t for t in ins[2:]), ins


def test_cpu_lowering_keeps_out_aliased():
  """The CPU handler takes `out` (its plan is generic's): aliased, as
  before; lowered for both platforms, only the CUDA branch drops it."""
  lhs, rhs, gs = _args()
  out_type = _tensor((M, N), BF16)
  (line, ins, outs), = custom_calls(lower(dyn.ragged_dot, lhs, rhs, gs))
  (_, operand), = aliases(line)
  assert ins[operand] == out_type, ins
  assert _plan_fields(line).get("fresh_out") == "false", line
  both = jax.jit(dyn.ragged_dot).trace(lhs, rhs, gs).lower(
      lowering_platforms=("cpu", "cuda")).as_text()
  calls = custom_calls(both)
  assert len(calls) == 2, both
  assert sorted(_fresh(l, i, o, out_type) for l, i, o in calls) == [
      False, True]


def test_gradient_calls_take_no_out():
  """jax.grad: the forward and d lhs (NT, its own out of zeros) get D
  fresh; d rhs (a K-ragged call without out) has none to drop."""
  lhs, rhs, gs = _args()
  ct = jnp.zeros((M, N), BF16)
  loss = lambda a, b: jnp.sum((dyn.ragged_dot(a, b, gs) * ct).astype(F32))
  g = jax.value_and_grad(loss, argnums=(0, 1))
  specs = plan_lib.traced_specs(g, lhs, rhs)
  assert sorted(s.out_zeros for s in specs) == [False, True, True], specs
  calls = custom_calls(lower(g, lhs, rhs, platform="cuda"))
  assert len(calls) == 3
  fresh = {o[0]: _fresh(l, i, o, o[0]) for l, i, o in calls}
  assert fresh == {_tensor((M, N), BF16): True, _tensor((M, K), BF16): True,
                   _tensor((G, K, N), BF16): False}, calls
  assert all(aliases(l) == [] for l, _, _ in calls)


def test_swiglu_forward_and_group_offset_take_no_out():
  lhs, rhs, gs = _args(n=2 * N)
  go = jnp.asarray([1], jnp.int32)
  for f in (lambda a, b, g: dyn.ragged_dot(a, b, g, activation="swiglu"),
            lambda a, b, g: dyn.ragged_dot(a, b[:2], g, group_offset=go),
            lambda a, b, g: dyn.ragged_dot(a, b[:2], g, group_offset=go,
                                           activation="swiglu")):
    (spec,) = plan_lib.traced_specs(f, lhs, rhs, gs)
    assert plan_lib.plan(spec).kernel.fresh_out, plan_lib.explain(spec)
    (line, ins, outs), = custom_calls(lower(f, lhs, rhs, gs, platform="cuda"))
    assert _fresh(line, ins, outs, outs[0])
    assert outs[0] == _tensor((M, spec.out_cols), BF16), outs


def test_composed_call_keeps_its_zeros():
  """float32 plans the composed call (XLA window ops around plain
  calls): the zeros stay, written into by the composed items, and the
  reasons say why D is not fresh."""
  lhs, rhs, gs = _args(F32)
  (spec,) = plan_lib.traced_specs(dyn.ragged_dot, lhs, rhs, gs)
  assert plan_lib.plan(spec).path == "generic"
  assert not plan_lib.plan(spec).kernel.fresh_out
  assert "not one grouped launch" in plan_lib.fresh_out_reasons(spec)
  text = lower(dyn.ragged_dot, lhs, rhs, gs, platform="cuda")
  assert re.search(r"stablehlo.broadcast_in_dim .*-> " +
                   re.escape(_tensor((M, N), F32)), text), text
  assert all("valid_slots" not in l for l, _, _ in custom_calls(text))


def test_vmapped_ragged_dot_keeps_out():
  """Under vmap each item of the outer dim has its own out (D carries a
  batch dim): not one shared 2-D out, so the out stays (still zeros)."""
  lhs, rhs, gs = _args()
  f = jax.vmap(dyn.ragged_dot, in_axes=(0, None, None))
  x = jnp.stack([lhs, lhs])
  (spec,) = plan_lib.traced_specs(f, x, rhs, gs)
  assert spec.out_zeros  # the batch rule keeps out's values
  assert plan_lib.plan(spec).path == "sm90_grouped"
  assert not plan_lib.plan(spec).kernel.fresh_out
  assert plan_lib.fresh_out_reasons(spec) == [
      "D is not one 2-D array the items share"]
  (line, ins, outs), = custom_calls(lower(f, x, rhs, gs, platform="cuda"))
  (_, operand), = aliases(line)
  assert ins[operand] == outs[0], (ins, outs)


def _grouped_gemm(valid_cols=N):
  """A grouped dyn.gemm into a ragged out of zeros the caller made: the
  library does not know them to be zeros."""
  def f(x, w, v):
    out = jnp.zeros((M, N), BF16)
    return dyn.gemm(dyn.window(x, (v, 0), (64, K), valid=(v, K)), w,
                    out=dyn.window(out, (v, 0), (64, N),
                                   valid=(v, valid_cols)))
  return f, (jnp.zeros((M, K), BF16), jnp.zeros((K, N), BF16), jnp.int32(5))


def test_gemm_into_a_ragged_out_keeps_it():
  f, args = _grouped_gemm()
  (spec,) = plan_lib.traced_specs(f, *args)
  assert plan_lib.plan(spec).path == "sm90_grouped"
  assert plan_lib.fresh_out_reasons(spec) == ["out is not known to be zeros"]
  (line, ins, outs), = custom_calls(lower(f, *args, platform="cuda"))
  assert not _fresh(line, ins, outs, outs[0])
  (_, operand), = aliases(line)
  assert ins[operand] == outs[0]
  # Known zeros (as ragged_dot says) make it fresh; windows narrower than
  # out's rows do not.
  assert plan_lib.fresh_out_reasons(
      dataclasses.replace(spec, out_zeros=True)) == []
  f40, args = _grouped_gemm(valid_cols=80)
  (narrow,) = plan_lib.traced_specs(f40, *args)
  narrow = dataclasses.replace(narrow, out_zeros=True)
  assert plan_lib.plan(narrow).path == "sm90_grouped"
  assert plan_lib.fresh_out_reasons(narrow) == [
      "D's windows are not full-width row ranges"]


def test_handler_refuses_a_fresh_out_its_rules_reject():
  """The CUDA handler's check of the plan (ext.check_planned): a fresh
  out where the call's out is not known zeros, where the windows are not
  full-width rows, or off the grouped path."""
  f, args = _grouped_gemm()
  (spec,) = plan_lib.traced_specs(f, *args)
  p = plan_lib.plan(spec)

  def check(s, p):
    return ext.check_planned(call_attrs(s, plan=p.attrs()))

  assert check(spec, p) == ""
  forced = dataclasses.replace(
      p, kernel=dataclasses.replace(p.kernel, fresh_out=True))
  why = check(spec, forced)
  assert "fresh out: out is not known to be zeros" in why, why
  assert check(dataclasses.replace(spec, out_zeros=True), forced) == ""
  f40, args = _grouped_gemm(valid_cols=80)
  (narrow,) = plan_lib.traced_specs(f40, *args)
  why = check(dataclasses.replace(narrow, out_zeros=True), forced)
  assert "not full-width row ranges" in why, why
  # Off the grouped path.
  x = jnp.zeros((M, K), BF16)
  (plain,) = plan_lib.traced_specs(lambda a, b: dyn.gemm(a, b), x,
                                   jnp.zeros((K, N), BF16))
  pp = plan_lib.plan(plain)
  assert not pp.kernel.fresh_out
  assert "not one grouped launch" in plan_lib.fresh_out_reasons(plain)
  bad = dataclasses.replace(
      pp, kernel=dataclasses.replace(pp.kernel, fresh_out=True))
  assert "a fresh out outside the grouped path" in check(plain, bad)


def test_rules_that_change_out_clear_out_zeros():
  """The jvp's accumulate call reads another call's result as its out:
  not zeros."""
  lhs, rhs, gs = _args()
  (spec,) = plan_lib.traced_specs(dyn.ragged_dot, lhs, rhs, gs)
  assert spec.out_zeros
  assert not rules._accumulate_spec(spec).out_zeros
  no_out = dataclasses.replace(spec, has_out=False)
  assert not rules._accumulate_spec(no_out).out_zeros


def test_results_unchanged_on_the_cpu():
  """The flag changes nothing the CPU handler computes: rows past the
  groups and rows of other shards' groups are exactly zero."""
  r = np.random.default_rng(0)
  lhs = jnp.asarray(r.uniform(-1, 1, (M, K)), BF16)
  rhs = jnp.asarray(r.uniform(-1, 1, (G, K, N)), BF16)
  gs = jnp.asarray([64, 0, 100, 30], jnp.int32)  # 194 of 256 rows
  got = np.asarray(jax.jit(dyn.ragged_dot)(lhs, rhs, gs), np.float32)
  want = np.asarray(jax.lax.ragged_dot(lhs.astype(F32), rhs.astype(F32), gs,
                                       precision="highest"))
  np.testing.assert_allclose(got, want, rtol=2e-2, atol=2e-2)
  np.testing.assert_array_equal(got[194:], 0)
  go = jnp.asarray([2], jnp.int32)
  got = np.asarray(jax.jit(lambda a, b, g: dyn.ragged_dot(
      a, b[2:], g, group_offset=go))(lhs, rhs, gs), np.float32)
  np.testing.assert_array_equal(got[:64], 0)
  np.testing.assert_array_equal(got[194:], 0)
  np.testing.assert_allclose(got[64:194], want[64:194], rtol=2e-2, atol=2e-2)
