"""gemm across devices: shard_map, sharded jit (local splits, the k split,
what is gathered or rejected), and one-device programs left as they were.

The multi-device cases run in one subprocess with 8 virtual CPU devices
(tests/sharding_cases.py): the device count is fixed when JAX starts, and
this process keeps its one device for the rest of the suite.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax._src import dispatch
from jax.interpreters import mlir

import jax_dynoff as dyn
from jax_dynoff import lowering, partition, sharding
from jax_dynoff.primitive import gemm_p

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
TOL = {"float32": 1e-5, "bfloat16": 1e-2}


def _run(args, timeout=300):
  """A Python subprocess on 8 CPU devices, importing the jax_dynoff this
  process imported (the source tree or the installed package)."""
  env = dict(os.environ, JAX_PLATFORMS="cpu",
             PYTHONPATH=os.path.dirname(os.path.dirname(dyn.__file__)),
             XLA_FLAGS="--xla_force_host_platform_device_count=8")
  r = subprocess.run([sys.executable, *args], env=env, capture_output=True,
                     text=True, timeout=timeout, cwd=REPO)
  assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-5000:]
  return r


@pytest.fixture(scope="module")
def cases(tmp_path_factory):
  path = str(tmp_path_factory.mktemp("sharding") / "cases.json")
  _run([os.path.join(HERE, "sharding_cases.py"), path])
  with open(path) as f:
    return {(r["name"], r.get("mode")): r for r in json.load(f)}


def _colls(rec, *names):
  return {n: len(rec["collectives"][n]) for n in names}


def _k_sums(rec):
  """The k split's sums of partial products (partition._sum_over): each one
  all-to-all of float32 chunks and one all-gather of the 1-D float32 sums."""
  return len(rec["collectives"]["all-to-all"])


def _operand_gathers(rec):
  """All-gathers other than a k sum's (whose result is 1-D float32)."""
  return [g for g in rec["collectives"]["all-gather"]
          if not re.fullmatch(r"f32\[\d+\]\S*", g)]


NO_COMMS = ("all-gather", "all-reduce", "all-to-all", "collective-permute",
            "reduce-scatter")

# Result PartitionSpecs on the (2, 4) mesh ("x", "y").
LOCAL = {
    "n split": [None, "y"],
    "m split": ["x", None],
    "m and n split": ["x", "y"],
    "transposed operands, m and n split": ["x", "y"],
    "c and an out window at a row start, n split": [None, "y"],
    "in-place accumulate into out, n split": [None, "y"],
    "stacked weights at a layer start, n split": [None, "y"],
    "vmap with batched starts, batch and n split": ["x", None, "y"],
    "nested vmap with batched starts, outer batch split":
        ["y", None, None, None],
    "bfloat16 inputs into float32, m and n split": ["x", "y"],
    "a cond in a loop on windows made at its top level, n split": [None, "y"],
    # dA = G B^T contracts over n: a k split; dA keeps a's sharding.
    "grad, m and n split": ["x", None],
}
REDUCE = {
    "k split": [None, None],
    "k split with m split, c and an out window at a column start":
        ["x", None],
    "k split, in-place accumulate into out": [None, None],
    "k split under vmap, batch split": ["x", None, None],
}
# Under explicit axes: the argument, its dim and the mesh axis named.
GATHER = {
    "a sharded along a dim its window starts in": ("a", 0, "x"),
    "stacked weights sharded along the layer dim": ("b", 0, "x"),
    "out sharded along the rows its window starts in": ("out", 0, "x"),
    "a window covering part of k, k sharded": ("a", 1, "y"),
    "m and n sharded over one mesh axis": ("b", 1, "y"),
    # Its valid part may lie anywhere in the rows: they stay whole.
    "a ragged window covering every row, m sharded": ("a", 0, "x"),
}
MODES = ("auto", "explicit")


def _tol(name):
  return TOL["bfloat16"] if "bfloat16" in name else TOL["float32"]


@pytest.mark.parametrize("name", LOCAL)
def test_local_split_runs_one_call_per_device(cases, name):
  for mode in MODES:
    rec = cases.get((name, mode))
    if rec is None:
      continue
    assert "error" not in rec, (mode, rec["error"])
    assert rec["err"] <= _tol(name), (mode, rec["err"])
    assert rec["spec"] == LOCAL[name], (mode, rec["spec"])
    comms = {c: len(rec["collectives"][c]) for c in NO_COMMS}
    if name.startswith("grad"):
      # The transpose's k split: a gemm's sum (all-to-all, 1-D gathers),
      # or, where dA is XLA's dot (KernelOptions.xla_cotangent_dot), its
      # one all-reduce.
      comms["all-to-all"] = 0
      comms["all-gather"] = len(_operand_gathers(rec))
      comms["all-reduce"] = max(0, comms["all-reduce"] - 1)
    assert not any(comms.values()), (mode, rec)


@pytest.mark.parametrize("name", REDUCE)
def test_k_split_sums_partial_products_once(cases, name):
  for mode in MODES:
    rec = cases[(name, mode)]
    assert "error" not in rec, (mode, rec["error"])
    assert rec["err"] <= _tol(name), (mode, rec["err"])
    assert rec["spec"] == REDUCE[name], (mode, rec["spec"])
    # One sum of float32 partial products (an all-to-all and the all-gather
    # of its sums), no operand gathered.
    assert _k_sums(rec) == 1 and not _operand_gathers(rec), (
        mode, rec["collectives"])
    assert _colls(rec, "all-reduce", "all-gather") == {
        "all-reduce": 0, "all-gather": 1}, (mode, rec["collectives"])
    assert rec["collectives"]["all-to-all"][0].lstrip("(").startswith("f32["), rec


@pytest.mark.parametrize("name", GATHER)
def test_unsplittable_sharding_is_gathered_or_rejected(cases, name):
  auto = cases[(name, "auto")]
  assert "error" not in auto, auto["error"]
  assert auto["err"] <= _tol(name), auto["err"]
  assert auto["collectives"]["all-gather"], auto["collectives"]
  arg, dim, axis = GATHER[name]
  msg = cases[(name, "explicit")]["error"]
  assert msg.startswith(f"gemm: {arg} "), msg
  assert f"dim {dim}" in msg and f"mesh axis '{axis}'" in msg, msg


def test_shard_map_windows_read_local_shards(cases):
  # Against numpy's product: the same sums, in the order of whichever BLAS
  # each side links (equal bits on one machine, 2e-7 apart on another).
  assert cases[("shard_map: windows into local shards", None)]["err"] <= \
      TOL["float32"]


def test_docs_examples_run(cases):
  assert cases[("docs: shard_map example", None)]["err"] <= TOL["float32"]
  assert cases[("docs: shard_map k split", None)]["err"] <= 1e-5


def test_shard_map_result_varies_with_its_operands(cases):
  rec = cases[("shard_map: varying result declared replicated", None)]
  assert "error" in rec and "out_specs" in rec["error"], rec


def test_grads_across_devices(cases):
  assert cases[("shard_map: grad of a k split", None)]["err"] <= 1e-5
  assert cases[("sharded jit: grad", None)]["err"] <= 1e-5


def test_eager_call_on_sharded_arrays_keeps_their_sharding(cases):
  rec = cases[("sharded arrays: eager call", None)]
  assert rec["err"] <= 1e-5 and rec["spec"] == ["x", "y"], rec


def test_partial_shard_map_gathers_its_automatic_axes(cases):
  rec = cases[("shard_map over some axes: automatic ones gathered", None)]
  assert rec["err"] <= 1e-5 and rec["collectives"]["all-gather"], rec


def test_layer_loop_gathers_activations_never_weights(cases):
  rec = cases[("layer loop over stacked weights, n split", None)]
  assert rec["err"] <= 1e-5, rec
  # Only x (16, 32), gathered between layers by the loop itself.
  gathers = rec["collectives"]["all-gather"]
  assert gathers and all(g.startswith("f32[16,32]") for g in gathers), gathers
  assert not rec["collectives"]["all-reduce"], rec["collectives"]


@pytest.mark.parametrize("kind", ["local", "reduce"])
def test_gspmd_partitioner_uses_the_same_rule(cases, kind):
  rec = cases[(f"GSPMD partitioner: {kind}", "gspmd")]
  assert rec["err"] <= 1e-5, rec
  want = {"local": ([None, "y"], 0), "reduce": ([None, None], 1)}[kind]
  assert (rec["spec"], _k_sums(rec)) == want, rec
  assert not _operand_gathers(rec), rec


def test_benchmark_smoke_run(tmp_path):
  r = _run([os.path.join(REPO, "benchmarks", "multi_gpu.py"), str(tmp_path),
            "--smoke"])
  with open(tmp_path / "multi_gpu.json") as f:
    res = json.load(f)
  (row,) = res["rows"]
  assert row["devices"] == 8 and not row["w_gathered"], row
  assert row["ours_tp_rel_err"] <= 0.02, row
  assert "us per layer" in r.stdout, r.stdout


# ---------------------------------------------------------------------------
# One device: the program is what it was


def _programs():
  """Fresh functions each time (a cached trace would hide a difference)."""
  w = jnp.ones((4, 40, 24), jnp.float32)
  b = jnp.ones((24, 16), jnp.float32)
  o = jnp.zeros((50, 16), jnp.float32)

  def windows(w, b, o, i):
    return dyn.gemm(dyn.window(w, (i, i + 1, 0), (8, 24)), b,
                    dyn.window(o, (i, 0), (8, 16)),
                    out=dyn.window(o, (i + 3, 0), (8, 16)), beta=0.5)

  def loop(w, b, o):
    return jax.lax.fori_loop(0, 3, lambda i, o: dyn.gemm(
        dyn.window(w, (i, 0, 0), (8, 24)), b,
        out=dyn.window(o, (i * 8, 0), (8, 16))), o)

  def batched(w, b, s):
    return jax.vmap(lambda wi, si: dyn.gemm(
        dyn.window(wi, (si, 0), (8, 24)), b))(w, s)

  # dA and dB (the forward is dead code), as gemm calls: by default both
  # would be XLA's dots (KernelOptions.xla_cotangent_dot).
  no_dot = dyn.KernelOptions(xla_cotangent_dot=False)
  grad = jax.grad(lambda w, b: dyn.gemm(w[0], b, opts=no_dot).sum(),
                  argnums=(0, 1))
  return [(windows, (w, b, o, jnp.int32(2)), 1), (loop, (w, b, o), 1),
          (batched, (w, b, jnp.arange(4, dtype=jnp.int32)), 1),
          (grad, (w, b), 2)]


@contextlib.contextmanager
def _without_partitioning():
  """gemm_p lowered by lowering.py's rule alone, as before partition.py."""
  mlir.register_lowering(gemm_p, lowering.lower, cacheable=False)
  dispatch.prim_requires_devices_during_lowering.discard(gemm_p)
  try:
    yield
  finally:
    mlir.register_lowering(gemm_p, partition._lower, cacheable=False)
    dispatch.prim_requires_devices_during_lowering.add(gemm_p)


def _texts():
  out = []
  for fn, args, calls in _programs():
    jaxpr = str(jax.make_jaxpr(fn)(*args))
    lowered = jax.jit(fn).lower(*args)
    # The compiled text's metadata names the calling source lines.
    exe = re.sub(r"line=\d+ end_line=\d+ column=\d+ end_column=\d+", "",
                 lowered.compile().as_text())
    out.append((jaxpr, lowered.as_text(), exe, calls))
  return out


def test_one_device_program_is_unchanged():
  with _without_partitioning():
    before = _texts()
  after = _texts()
  for (j0, hlo0, exe0, _), (j1, hlo1, exe1, calls) in zip(before, after):
    assert hlo1 == hlo0
    assert exe1 == exe0
    # One custom call per gemm, nothing wrapped around it.
    assert "CustomSPMDPartitioning" not in hlo1
    assert hlo1.count("stablehlo.custom_call @jax_dynoff_gemm") == calls
    assert "pvary" not in j1 and "custom_partitioning" not in j1


def test_one_device_result_type_has_no_mesh():
  y = jax.eval_shape(dyn.gemm, jnp.ones((4, 8)), jnp.ones((8, 3)))
  assert jax.typeof(y).sharding.mesh.empty


# ---------------------------------------------------------------------------
# The rules themselves (no devices needed)


def _spec_of(fn, *args):
  jaxpr = jax.make_jaxpr(fn)(*args)
  (eqn,) = [e for e in jaxpr.eqns if e.primitive is gemm_p]
  ranks = tuple(v.aval.ndim for v in eqn.invars[len(eqn.invars) -
                sum(w.num_dynamic for _, w in eqn.params["spec"].operands()):])
  return eqn.params["spec"], ranks


def test_layout_of_stacked_weights_splits_columns_not_layers():
  w = jnp.ones((6, 32, 24))
  spec, ranks = _spec_of(
      lambda x, w, i: dyn.gemm(x, dyn.window(w, (i, 0, 0), (32, 24))),
      jnp.ones((16, 32)), w, jnp.int32(0))
  lay = sharding.layout(spec, ranks)
  a, b, start = lay.operands
  assert [d.factor for d in a] == ["m", "k"]
  assert [d.split for d in b] == [False, True, True]
  assert [d.factor for d in b][1:] == ["k", "n"]
  assert start == () and [d.factor for d in lay.result] == ["m", "n"]
  rule = sharding.sdy_rule(lay)
  assert rule.reduction_factors == ("k",)
  assert len(rule.need_replication_factors) == 1


def test_layout_of_a_partial_window_keeps_the_dim_whole_everywhere():
  # a's rows are a window at a start: m stays whole on c and the result too.
  spec, ranks = _spec_of(
      lambda a, b, c, i: dyn.gemm(dyn.window(a, (i, 0), (8, 32)), b, c),
      jnp.ones((40, 32)), jnp.ones((32, 24)), jnp.ones((8, 24)),
      jnp.int32(0))
  lay = sharding.layout(spec, ranks)
  assert "m" not in dict(lay.sizes)
  a, b, c, start = lay.operands
  assert not a[0].split and not c[0].split and not lay.result[0].split
  assert "c's window" not in c[0].why and "a's" in c[0].why


def test_strict_choice_names_argument_dim_and_axis():
  spec, ranks = _spec_of(lambda a, b: dyn.gemm(a, b),
                         jnp.ones((16, 32)), jnp.ones((32, 24)))
  lay = sharding.layout(spec, ranks)
  sizes = {"x": 2, "y": 4}
  split = sharding.choose(lay, [((), ("y",)), (("y",), ())], None, sizes,
                          strict=True)
  assert split.k_axes == ("y",) and split.result == ((), ())
  with pytest.raises(ValueError, match=r"gemm: a dim 1 and b dim 0 are the "
                     r"same k dim .*'x'"):
    sharding.choose(lay, [((), ("y",)), (("x",), ())], None, sizes,
                    strict=True)
  with pytest.raises(ValueError, match=r"gemm: a is sharded along dim 0 over "
                     r"mesh axes \('x', 'y'\) .*does not divide"):
    sharding.choose(lay, [(("x", "y"), ()), ((), ())], None,
                    {"x": 3, "y": 4}, strict=True)
  # Leniently the same proposals gather instead.
  lenient = sharding.choose(lay, [((), ("y",)), (("x",), ())], None, sizes,
                            strict=False)
  assert lenient.axes == {"k": ("y",)}
  assert lenient.operands == (((), ("y",)), (("y",), ()))


def test_local_spec_divides_split_dims():
  spec, ranks = _spec_of(lambda a, b: dyn.gemm(a, b),
                         jnp.ones((16, 32)), jnp.ones((32, 24)))
  lay = sharding.layout(spec, ranks)
  split = sharding.choose(lay, [(("x",), ()), ((), ("y",))], None,
                          {"x": 2, "y": 4}, strict=False)
  local = sharding.local_spec(spec, split, {"x": 2, "y": 4})
  assert (local.m, local.n, local.k) == (8, 6, 32)
  assert local.a.dims == (8, 32) and local.b.dims == (32, 6)
  assert local.d.dims == (8, 6)
  np.testing.assert_array_equal(local.a.win, local.a.dims)
