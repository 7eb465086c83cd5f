"""The benchmark driver runs end to end (tiny sizes on CPU) and records
what it measured: JSON rows for every scenario and a plot."""

import json

import jax
import numpy as np
import pytest

import jax_dynoff as dyn
import bench  # benchmarks/bench.py (conftest puts benchmarks/ on the path)

pytest.importorskip("matplotlib")

MOE_ROWS = {"moe_fwd", "moe_fwd_vs_dense", "moe_bwd"}


@pytest.fixture
def ragged_dot(monkeypatch):
  """dyn.ragged_dot, or the reference's where the package does not export
  one yet (the moe scenario calls dyn.ragged_dot)."""
  if not hasattr(dyn, "ragged_dot"):
    monkeypatch.setattr(dyn, "ragged_dot", dyn.reference.ragged_dot,
                        raising=False)
  return dyn.ragged_dot


def test_bench_writes_every_scenario(tmp_path, capsys, ragged_dot):
  bench.main([str(tmp_path), "--quick"])
  data = json.loads((tmp_path / "bench.json").read_text())
  assert (tmp_path / "bench.png").stat().st_size > 10_000
  rows = data["rows"]
  scenarios = {r["scenario"] for r in rows}
  assert {"plain", "slices", "stacked", "cond", "kv", "loop_graph",
          "loop_graph_unroll8", "loop_bodygraph", "loop_nograph"} <= scenarios
  assert MOE_ROWS <= scenarios
  for r in rows:
    for key in ("ours_ms", "xla_ms", "flops", "bytes", "ratio", "floor_ms"):
      assert np.isfinite(r[key]) and r[key] > 0, (key, r)
    assert r["ratio"] == pytest.approx(r["xla_ms"] / r["ours_ms"])
  assert [r for r in rows if r["scenario"] == "slices"][0]["ideal_ms"] > 0
  assert data["command"].startswith("python benchmarks/bench.py")
  # How it was timed: the rounds of --quick, each side's window half a
  # second on a GPU, on CPU one call (no sustained load).
  window = 0.5 if jax.default_backend() == "gpu" else 0.0
  assert (data["window_s"], data["repeats"]) == (window, 2)
  out = capsys.readouterr().out
  assert "ratio" in out and "stacked" in out


def test_bench_moe(tmp_path, ragged_dot):
  """--scenarios moe alone: its three rows for the one case --quick runs
  (on CPU a tiny one, on a GPU the first of MOE_CASES), the case's shape in
  the label, the backward counted at twice the forward's FLOPs, and the
  dense comparison sharing the forward's time of ours."""
  bench.main([str(tmp_path), "--quick", "--scenarios", "moe"])
  rows = json.loads((tmp_path / "bench.json").read_text())["rows"]
  by = {r["scenario"]: r for r in rows}
  assert set(by) == MOE_ROWS and len(rows) == 3
  if jax.default_backend() == "gpu":
    E, T, d, f, empty = bench.MOE_CASES[0]
    assert (E, T, d, f, empty) == (8, 8192, 4096, 4096, 0)
    label = "E8_T8192_4096x4096"
  else:
    E, T, d, f, empty = 4, 64, 32, 48, 1
    label = "E4_T64_32x48_empty1"
  assert bench.moe_case_name(E, T, d, f, empty) == label
  assert {r["case"] for r in rows} == {label}
  fwd, dense, bwd = (by[k] for k in ("moe_fwd", "moe_fwd_vs_dense", "moe_bwd"))
  assert fwd["flops"] == dense["flops"] == 2.0 * T * d * f
  assert bwd["flops"] == 2 * fwd["flops"]
  assert dense["ours_ms"] == fwd["ours_ms"]
  for r in rows:
    assert np.isfinite(r["ratio"]) and r["ratio"] > 0


def test_moe_probe_sizes():
  """The probes' sizes: each sums to T; uniform, one group and 8 groups as
  named; skewed is moe_sizes'; T must split evenly."""
  p = bench.moe_probe_sizes(64, 16384, empty=1)
  assert set(p) == {"skewed", "uniform", "one group", "8 groups"}
  for s in p.values():
    assert s.shape == (64,) and s.dtype == np.int32 and s.sum() == 16384
  np.testing.assert_array_equal(p["skewed"], bench.moe_sizes(64, 16384, 1))
  assert (p["uniform"] == 256).all()
  assert p["one group"][0] == 16384 and (p["one group"][1:] == 0).all()
  assert (p["8 groups"][:8] == 2048).all() and (p["8 groups"][8:] == 0).all()
  with pytest.raises(ValueError, match="moe_probe_sizes"):
    bench.moe_probe_sizes(64, 1000)


def test_moe_sizes():
  """Skewed, deterministic, summing to T; `empty` groups get no rows."""
  s = bench.moe_sizes(8, 8192)
  assert s.sum() == 8192 and (s > 0).all()
  np.testing.assert_array_equal(s, bench.moe_sizes(8, 8192))
  assert s.max() > 5 * s.min()
  e = bench.moe_sizes(64, 16384, empty=1)
  assert e.sum() == 16384 and (e == 0).sum() == 1


def test_moe_check_catches_a_wrong_kernel(monkeypatch, ragged_dot):
  """The scenario's guard raises when ours computes something else."""
  x, w, gs, dy = bench.moe_operands(4, 64, 32, 48, np.float32, empty=1)
  bench.check_moe(x, w, gs, dy)
  monkeypatch.setattr(dyn, "ragged_dot",
                      lambda *a, **k: 1.1 * ragged_dot(*a, **k), raising=False)
  with pytest.raises(RuntimeError, match="differs from lax.ragged_dot"):
    bench.check_moe(x, w, gs, dy)


def test_unknown_scenario_is_an_error():
  with pytest.raises(SystemExit):
    bench.main(["--scenarios", "plain,nope"])


def _benchmark_module(name):
  """benchmarks/NAME.py, loaded as a module (benchmarks/ is no package)."""
  import importlib.util
  import pathlib
  path = pathlib.Path(__file__).parent.parent / "benchmarks" / f"{name}.py"
  spec = importlib.util.spec_from_file_location(name, path)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


def _timeline():
  return _benchmark_module("timeline")


def test_loop_floor_times_every_variant_and_reads_its_trace(capsys):
  """benchmarks/loop_floor.py at a tiny shape on any backend: a time per
  inner iteration for each variant under each setting asked for, and the
  trace's events once per inner iteration (the calls' thunks among them)."""
  lf = _benchmark_module("loop_floor")
  lf.main(["--shape", "2,8,32", "--repeats", "1", "--no-trace",
           "--settings", "defaults,body"])
  out = capsys.readouterr().out
  assert out.count("== ") == 2, out
  for name in ("xla_chain", "ours_chain", "ours_loop", "xla_loop",
               "ours_while", "xla_while"):
    times = [float(l.split()[1]) for l in out.splitlines()
             if l.split()[:1] == [name]]
    assert len(times) == 2 and all(t > 0 for t in times), (name, out)
  loops = lf.while_loops(2, 8, 32)
  _, rows = lf.per_iteration_events(loops["ours_while"], 2, 2)
  assert any(ev.startswith("jax_dynoff_gemm") and count >= 1
             for ev, count, _ in rows), rows


@pytest.mark.parametrize("kind", ["uniform", "skewed"])
def test_timeline_moe_case_runs_both_sides(kind):
  """benchmarks/timeline.py's moe case at a tiny shape: ragged_dot's loop
  and the dense one compile and run, each to a (tokens, f) result, and the
  ragged side's equals lax.ragged_dot on the same operands, with uniform
  and skewed group sizes."""
  tl = _timeline()
  sides, iters = tl.moe(4, 64, 32, 16, iters=1, kind=kind)
  assert set(sides) == {"ours", "dense"} and iters == 1
  for side, (f, args) in sides.items():
    y = np.asarray(jax.block_until_ready(f(*args)), np.float32)
    assert y.shape == (64, 16) and np.isfinite(y).all(), side
    if side == "ours":
      x, w, g = args[1]
      want = np.asarray(jax.lax.ragged_dot(x, w, g), np.float32)
      np.testing.assert_allclose(y, want, rtol=2e-2, atol=2e-2)


def test_timeline_idle_report():
  """benchmarks/timeline.py attributes idle device time to the event that
  ends each gap (synthetic events: name, start ns, duration ns)."""
  tl = _timeline()
  events = []
  t = 0
  for _ in range(2):  # two iterations: gemm, then a 5 us wait, then clamp
    events.append(("gemm", t, 100_000))
    t += 100_000 + 5_000
    events.append(("clamp", t, 1_000))
    t += 1_000 + 500        # a 0.5 us gap: below the 1 us threshold
  lines = tl.idle_report(events, iters=2)
  assert len(lines) == 1, lines
  assert lines[0].startswith("idle before clamp:")
  assert "5.00 us/iter in 2 gaps, largest 5.00 us" in lines[0]
  assert tl.idle_report(events[:1], iters=1) == []


def test_timeline_call_report():
  """benchmarks/timeline.py places the device's span inside the call's wall
  time and lists the host events inside the call, longest first."""
  tl = _timeline()
  device = [("gemm", 150_000, 100_000), ("clamp", 260_000, 1_000)]
  host = [("launch", 20_000, 3_000), ("launch", 30_000, 3_000),
          ("compile", 40_000, 50_000), ("before the call", 1_000, 90_000)]
  lines = tl.call_report(device, host, (10_000, 300_000))
  assert lines[0] == ("call 290.0 us; device span 111.0 us, starting 140.0 us "
                      "into the call, ending 39.0 us before it returns")
  assert lines[1].startswith("host      1x      50.0 us, first at      30.0 us")
  assert lines[1].endswith(": compile")
  assert lines[2].startswith("host      2x       6.0 us, first at      10.0 us")
  assert len(lines) == 3
  assert tl.call_report([], host, None) == [
      "no call annotation or no device events in the trace"]


def test_time_loops_alternates_the_order(monkeypatch):
  """The sides take turns, one window each, the order reversing every other
  round (no side always follows the same one), and the median over rounds
  comes back in the order the loops were given, in ms per iteration.  With
  WINDOW_S = 0 (CPU) a window is two calls, the second one counting."""
  calls = []
  seconds = {"ours": [9, 1e-3, 9, 3e-3, 9, 2e-3, 9, 9e-3],
             "xla": [9, 4e-3, 9, 4e-3, 9, 5e-3, 9, 6e-3]}

  def fake_runner(loop, iters):
    def once():
      calls.append(loop)
      return seconds[loop][sum(c == loop for c in calls) - 1]
    return once

  monkeypatch.setattr(bench, "_runner", fake_runner)
  monkeypatch.setattr(bench, "WINDOW_S", 0.0)
  t_ours, t_xla = bench.time_loops(["ours", "xla"], 10, 4)
  turns = ["ours", "xla", "xla", "ours", "ours", "xla", "xla", "ours"]
  assert calls == [side for side in turns for _ in range(2)]
  assert t_ours == pytest.approx(0.25)   # median 2.5 ms / 10 iterations
  assert t_xla == pytest.approx(0.45)


def test_sustained_window(monkeypatch):
  """`sustained` calls back to back until the window has passed and takes
  the median of the second half: the first calls, at the clocks another
  loop left, do not count."""
  now = [0.0]
  monkeypatch.setattr(bench.time, "perf_counter", lambda: now[0])
  durations = iter([5.0, 4.0, 0.3, 0.2, 0.2, 0.25, 0.2, 0.2, 0.2, 0.2])
  calls = []

  def once():
    d = next(durations)
    now[0] += d
    calls.append(d)
    return d

  # 10.05 s window: calls end at 5, 9, 9.3, 9.5, 9.7, 9.95, 10.15 (seven);
  # the second half is 0.2, 0.2, 0.25, 0.2.
  assert bench.sustained(once, 10.05) == pytest.approx(0.2)
  assert len(calls) == 7


def test_timeline_bench_rounds():
  """benchmarks/timeline.py --rounds times compiled loops in short turns
  (one call each, the order reversed every other round), one line per
  side."""
  import jax.numpy as jnp
  tl = _timeline()
  order = []

  def side(name):
    def f(x):
      order.append(name)
      return jnp.asarray(x)
    return f, (1.0,)

  lines = tl.bench_rounds({"ours": side("ours"), "xla": side("xla")},
                          iters=4, rounds=3)
  assert order == ["ours", "xla", "xla", "ours", "ours", "xla"]
  assert [l.split(":")[0] for l in lines] == ["bench-style ours",
                                              "bench-style xla"]
  assert all(len(l.split("rounds ")[1].split()) == 3 for l in lines)


def test_sustained_window_stats():
  """benchmarks/sustained.py: the medians of the nvidia-smi samples inside a
  call window, none outside it."""
  import importlib.util
  import pathlib
  path = pathlib.Path(__file__).parent.parent / "benchmarks" / "sustained.py"
  spec = importlib.util.spec_from_file_location("sustained", path)
  st = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(st)
  samples = [(0.0, 1980.0, 300.0, 40.0), (1.0, 1700.0, 690.0, 60.0),
             (2.0, 1600.0, 700.0, 62.0), (3.0, 1650.0, 698.0, 61.0),
             (9.0, 1980.0, 100.0, 50.0)]
  assert st.window_stats(samples, 1.0, 3.0) == (1650.0, 698.0, 61.0)
  assert st.window_stats(samples, 4.0, 5.0) == (None, None, None)
  # run_for: the bench's window (with no time to run, two calls), the
  # second half's span.
  seen = []

  def f(x):
    seen.append(x)
    return x

  us, (t0, t1) = st.run_for(f, (np.float32(1),), 0.0, 4)
  assert seen == [1.0, 1.0] and us > 0 and t0 <= t1
  # The plain sides: the forced direct tile reaches the gemm call of its
  # side's loop (compiled apart: the tile is part of the call's static
  # spec), which is the bench's own `ours` loop otherwise.
  import dataclasses
  from jax_dynoff import plan
  loops = st.plain_side_loops(64, 128, 64)
  assert sorted(loops) == ["ours", "ours_large", "ours_wide", "xla"]

  def spec_of(loop):
    return plan.first_spec(lambda c, *k: loop.body(0, c, *k), loop.carry,
                           *loop.consts)

  ours = spec_of(loops["ours"])
  assert ours.opts == dyn.KernelOptions()
  for side, tile in (("ours_large", "large"), ("ours_wide", "wide")):
    forced = spec_of(loops[side])
    assert forced.opts == dyn.KernelOptions(direct_tile=tile)
    assert dataclasses.replace(forced, opts=ours.opts) == ours, side
    # The same operands (plain_loops draws them from fixed keys).
    for got, want in zip(jax.tree.leaves((loops[side].carry,
                                          loops[side].consts)),
                         jax.tree.leaves((loops["ours"].carry,
                                          loops["ours"].consts))):
      np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


def test_dtypes_filter_the_cases():
  """--dtypes keeps the cases of those element types: on a GPU's case list
  float32 leaves the plain scenario's float32 rows (default precision and
  HIGHEST) and nothing of the bfloat16-only scenarios; every case names its
  dtype."""
  cases = bench._cases(True, False)
  for cs in cases.values():
    for _, args in cs:
      assert bench._case_dtype(args) in ("bfloat16", "float16", "float32")
  f32 = [(fn, args) for fn, args in cases["plain"]
         if bench._case_dtype(args) == "float32"]
  assert len(f32) == 7 and {fn for fn, _ in f32} == {bench.plain,
                                                   bench.plain_highest}
  assert all(bench._case_dtype(a) == "bfloat16" for _, a in cases["moe"])


def test_dtypes_option(tmp_path):
  bench.main([str(tmp_path), "--scenarios", "plain,loop", "--dtypes",
              "float32"])
  rows = json.loads((tmp_path / "bench.json").read_text())["rows"]
  assert rows and {r["dtype"] for r in rows} == {"float32"}
  assert {r["scenario"] for r in rows} == {"plain"}  # loop: bfloat16 only
  with pytest.raises(SystemExit):
    bench.main([str(tmp_path), "--dtypes", "float64"])


def test_graph_mode():
  """The output stem of each graph setting the bench's options put into
  XLA_FLAGS; both options at once are an error."""
  assert bench.graph_mode("") == ""
  assert bench.graph_mode(dyn.cuda_graph_flags(whole_loops=True)) == "graphs"
  assert bench.graph_mode(dyn.cuda_graph_flags()) == "body_graphs"
  assert bench.graph_mode("--xla_gpu_graph_min_graph_size=10") == ""
  with pytest.raises(SystemExit):
    bench.main(["--graphs", "--body-graphs"])


def test_ncu_case_reads_gemm_configs():
  """benchmarks/ncu_case.py's gemm_configs finds a Triton GEMM fusion's
  config and a cuBLAS call's algorithm in compiled HLO text (synthetic
  lines in XLA's format), and nothing in a program without either."""
  nc = _benchmark_module("ncu_case")
  text = (
      '  %gemm_fusion_dot.1 = bf16[128,1024]{1,0} fusion(%a, %b), '
      'kind=kCustom, backend_config={"fusion_backend_config":{"kind":'
      '"__triton_gemm","triton_gemm_config":{"block_m":"32","block_n":"64",'
      '"block_k":"64","split_k":"4","num_stages":"3","num_warps":"4"}}}\n'
      '  %add = f32[] add(%x, %y)\n'
      '  %cublas-gemm.2 = (f32[4,4]{1,0}, s8[0]{0}) custom-call(%x, %y), '
      'custom_call_target="__cublas$gemm", backend_config={'
      '"gemm_backend_config":{"selected_algorithm":"5","alpha_real":1}}\n')
  assert nc.gemm_configs(text) == [
      '%gemm_fusion_dot.1 triton_gemm_config":{"block_m":"32","block_n":'
      '"64","block_k":"64","split_k":"4","num_stages":"3","num_warps":"4"}',
      '%cublas-gemm.2 selected_algorithm":"5"']
  assert nc.gemm_configs("  %add = f32[] add(%x, %y)\n") == []
