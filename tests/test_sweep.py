"""benchmarks/sweep.py, the small-GEMM acceptance sweep: its grid sample
covers every m, n and k, and a tiny run (CPU: one timed call per side)
writes a checked cell for every pattern, setting and grid point, a summary
and one heat map per pattern and setting."""

import importlib.util
import json
import math
import pathlib
import sys

import numpy as np
import jax
import pytest

pytest.importorskip("matplotlib")

_PATH = pathlib.Path(__file__).resolve().parent.parent / "benchmarks" / "sweep.py"


@pytest.fixture(scope="module")
def sweep():
  spec = importlib.util.spec_from_file_location("sweep", _PATH)
  mod = importlib.util.module_from_spec(spec)
  sys.modules["sweep"] = mod  # dataclasses look their module up there
  spec.loader.exec_module(mod)
  return mod


def _benchmark(name):
  """benchmarks/NAME.py beside sweep.py, loaded as a module (the callers'
  fixtures load the sweep module first, which it imports)."""
  spec = importlib.util.spec_from_file_location(name,
                                                _PATH.parent / f"{name}.py")
  mod = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(mod)
  return mod


@pytest.fixture(scope="module")
def skinny_tiles(sweep):
  """benchmarks/skinny_tiles.py, which imports the sweep module above."""
  return _benchmark("skinny_tiles")


@pytest.fixture(scope="module")
def loop_bodies(sweep):
  """benchmarks/loop_bodies.py, which imports the sweep module above."""
  return _benchmark("loop_bodies")


@pytest.mark.parametrize("named", [True, False])
def test_sample_covers_every_value_and_balances_m(sweep, named):
  ms, nk = sweep.M_VALUES, sweep.NK_VALUES
  include = sweep.NAMED_CELLS if named else ()
  for cells in (9, 18, 27):
    grid = sweep.sample_grid(cells, ms, nk, nk, include)
    assert len(grid) == len(set(grid)) == cells
    assert {c[0] for c in grid} == set(ms)
    assert {c[1] for c in grid} == set(nk)
    assert {c[2] for c in grid} == set(nk)
    assert set(include) <= set(grid)
    per_m = [sum(c[0] == m for c in grid) for m in ms]
    assert max(per_m) - min(per_m) <= 1, per_m
    assert sum(c[1] != c[2] for c in grid) >= cells // 2  # non-square pairs
  assert (sweep.sample_grid(18, ms, nk, nk, include) ==
          sweep.sample_grid(18, ms, nk, nk, include))
  assert len(sweep.sample_grid(10 ** 6, ms, nk, nk, include)) == len(ms) * 36
  # One short of the product: still distinct cells, none missing but one.
  assert len(set(sweep.sample_grid(len(ms) * 36 - 1, ms, nk, nk,
                                   include))) == len(ms) * 36 - 1


def test_rel_err_is_the_worst_output(sweep):
  """An error in a small output (backward's dW beside a large dX) is not
  hidden by one norm over both."""
  big = np.ones((64, 64), np.float32) * 1e3
  small = np.ones((4, 4), np.float32)
  assert sweep._rel_err((big, small), (big, small)) == 0.0
  assert sweep._rel_err((big, 2 * small), (big, small)) == pytest.approx(1.0)


def test_tiny_sweep_writes_cells_summary_and_maps(sweep, tmp_path):
  args = [str(tmp_path), "--quick", "--m", "8,16", "--n", "64", "--k", "128",
          "--dtypes", "bfloat16", "--settings", "default,body",
          "--repeats", "1"]
  assert sweep.main(args) == 0
  data = json.loads((tmp_path / "sweep.json").read_text())
  cells = data["cells"]
  keys = {(c["pattern"], c["setting"], c["m"]) for c in cells}
  assert keys == {(p, s, m) for p in sweep.PATTERNS
                  for s in ("default", "body") for m in (8, 16)}
  for c in cells:
    assert c["ok"] and c["max_rel_err"] < 1e-2, c
    assert math.isfinite(c["ratio"]) and c["ratio"] > 0
    assert c["ratio"] == pytest.approx(c["xla_us_per_call"] /
                                       c["ours_us_per_call"])
    assert c["flops"] > 0 and c["bytes"] > 0 and c["floor_us"] > 0
    assert c["calls_per_iter"] >= c["L"] >= 2
    if jax.default_backend() == "gpu":
      assert c["ours_kernels_per_iter"] > 0 and c["xla_kernels_per_iter"] > 0
      assert c["ours_graphs_per_iter"] >= 0 and c["xla_graphs_per_iter"] >= 0
    else:  # no device events on a CPU: unknown, not a failure
      assert c["ours_kernels_per_iter"] is None
      assert c["ours_graphs_per_iter"] is None
      assert c["xla_graphs_per_iter"] is None
  assert {c["pattern"] for c in cells if "tbps" in c} == {
      "stacked", "cond", "kv"}
  summary = data["summary"]
  assert {(s["pattern"], s["setting"], s["dtype"]) for s in summary} == {
      (p, s, "bfloat16") for p in sweep.PATTERNS for s in ("default", "body")}
  for s in summary:
    assert s["cells"] == 2 and s["min_ratio"] <= s["geomean_ratio"] + 1e-12
    assert s["mismatches"] == 0
    # Graph launches per iteration: medians where traced (a GPU), absent
    # where nothing was (a CPU).
    assert ("ours_graphs_per_iter_median" in s) == (
        jax.default_backend() == "gpu")
  assert data["command"].startswith("python benchmarks/sweep.py")
  for p in sweep.PATTERNS:
    for s in ("default", "body"):
      assert (tmp_path / f"sweep_{p}_{s}.png").stat().st_size > 5_000
  # The maps again from the JSON alone, also from one with the field names
  # an earlier version wrote.
  old = {v: k for k, v in sweep._OLD_NAMES.items()}
  data["cells"] = [{old.get(k, k): v for k, v in c.items()} for c in cells]
  (tmp_path / "old.json").write_text(json.dumps(data))
  for name in ("sweep.json", "old.json"):
    again = tmp_path / f"again_{name}"
    assert sweep.main([str(again), "--from-json", str(tmp_path / name)]) == 0
    assert len(list(again.glob("sweep_*.png"))) == len(sweep.PATTERNS) * 2


def test_a_mismatch_fails_the_run(sweep, tmp_path, monkeypatch):
  """A cell where ours differs from XLA's loop is recorded, printed and
  makes the run exit non-zero."""
  monkeypatch.setattr(sweep, "_rel_err", lambda got, want: 1.0)
  # --quick alone: QUICK_GRID's one cell.
  args = [str(tmp_path), "--quick", "--patterns", "table", "--dtypes",
          "bfloat16", "--settings", "default", "--repeats", "1"]
  assert sweep.main(args) == 1
  cell, = json.loads((tmp_path / "sweep.json").read_text())["cells"]
  assert not cell["ok"]
  assert (cell["m"], cell["n"], cell["k"]) == tuple(
      sweep.QUICK_GRID[d][0] for d in "mnk")


def test_loop_graph_pads_reach_ours_calls_and_the_cells(sweep, tmp_path,
                                                        monkeypatch):
  """--loop-graph-pads gives ours' calls that KernelOptions.loop_graph_pads
  (seen by the builder) and is recorded per cell; a pattern that takes no
  options is refused, and without the flag a cell records None."""
  seen = []
  table = sweep.BUILDERS["table"]

  def spy(*args, **kw):
    seen.append(kw.get("opts"))
    return table(*args, **kw)

  monkeypatch.setitem(sweep.BUILDERS, "table", spy)
  base = [str(tmp_path), "--quick", "--patterns", "table", "--dtypes",
          "bfloat16", "--settings", "body", "--repeats", "1"]
  assert sweep.main(base + ["--loop-graph-pads", "0"]) == 0
  cell, = json.loads((tmp_path / "sweep.json").read_text())["cells"]
  assert cell["loop_graph_pads"] == 0 and cell["ok"]
  assert seen == [sweep.dyn.KernelOptions(loop_graph_pads=0)]
  assert sweep.main(base) == 0
  cell, = json.loads((tmp_path / "sweep.json").read_text())["cells"]
  assert cell["loop_graph_pads"] is None and seen[-1] is None
  with pytest.raises(SystemExit):
    sweep.main([str(tmp_path), "--quick", "--patterns", "cond",
                "--loop-graph-pads", "0"])


def test_cell_timeline_builds_the_sweeps_cell_for_both_sides(sweep, capsys):
  """benchmarks/cell_timeline.py: one cell per pattern, both settings, run
  and traced per side (CPU: no device events, said so); a shape that is not
  MxNxK is refused naming the expected form."""
  import cell_timeline
  for pattern in sweep.PATTERNS:
    for setting in sweep.SETTINGS:
      assert cell_timeline.main(
          [pattern, setting, "8x64x64", "--quick", "--iters", "1"]) == 0
      out = capsys.readouterr().out
      assert f"{pattern} {setting} bfloat16 8x64x64:" in out
      for side in ("ours", "xla"):
        assert any(l.startswith(f"{side}") for l in out.splitlines()), out
  for bad in ("8x64", "8x64x0", "axbxc"):
    with pytest.raises(SystemExit):
      cell_timeline.main(["table", "default", bad])
    assert "expected MxNxK" in capsys.readouterr().err
  with pytest.raises(SystemExit):
    cell_timeline.main(["table", "default", "8x64x64", "--iters", "0"])
  assert "--iters must be at least 1" in capsys.readouterr().err


def test_summary_gives_each_sides_median_graph_launches(sweep):
  """A group's summary carries the median graph launches per iteration of
  each side where its cells have them (0 for ours and 1 for XLA's: XLA's
  body is a graph, ours launched thunk by thunk), and none from cells an
  older sweep wrote without them."""
  def cell(ratio, ours_graphs, xla_graphs):
    c = dict(pattern="cond", setting="default", dtype="bfloat16", m=8,
             n=512, k=512, ratio=ratio, ok=True, ours_kernels_per_iter=4.0,
             xla_kernels_per_iter=6.0)
    if ours_graphs is not None:
      c.update(ours_graphs_per_iter=ours_graphs, xla_graphs_per_iter=xla_graphs)
    return c
  row, = sweep.summarize([cell(0.9, 0.0, 1.0), cell(1.1, 0.0, 1.0),
                          cell(1.2, 1.0, 1.0)])
  assert row["ours_graphs_per_iter_median"] == 0.0
  assert row["xla_graphs_per_iter_median"] == 1.0
  old, = sweep.summarize([cell(0.9, None, None)])
  assert "ours_graphs_per_iter_median" not in old
  sweep.print_summary([row, old])  # either form prints


def test_graph_launches_are_the_command_buffer_thunks_events():
  """The events the sweep counts as graph launches (and bench.host_profile
  times as XLA's body): a command buffer's execution, not its parts."""
  import bench
  assert bench.is_graph_launch("command_buffer_9")
  assert bench.is_graph_launch("command_buffer_123")
  for name in ("command_buffer::execute", "command_buffer::update",
               "cuGraphLaunch (CudaGraph:10)", "jax_dynoff_gemm",
               "loop_add_fusion", "while.1"):
    assert not bench.is_graph_launch(name), name


def test_skinny_tiles_times_both_tiles_and_the_rule(skinny_tiles, tmp_path):
  """benchmarks/skinny_tiles.py on a tiny grid (CPU: one call a side):
  each cell runs both forced tiles, the skinny path off and XLA's loop,
  checked; it records the planner's tile of every GEMM of the body
  (stacked: K = k, then K = n), and sums up per K."""
  out = tmp_path / "tiles.json"
  from jax_dynoff import plan as plan_lib
  # n = 64: the narrow tile up to the longer of its two K bounds.
  kmax = plan_lib.SKINNY_NARROW_LONG_MAX_K
  args = [str(out), "--quick", "--m", "8", "--n", "64", "--k",
          f"128,{kmax + 64}", "--patterns", "table,stacked,kv", "--settings",
          "default", "--repeats", "1"]
  assert skinny_tiles.main(args) == 0
  data = json.loads(out.read_text())
  cells = data["cells"]
  assert {(c["pattern"], c["k"]) for c in cells} == {
      (p, k) for p in ("table", "stacked", "kv") for k in (128, kmax + 64)}
  for c in cells:
    assert c["ok"], c
    assert c["faster"] == ("narrow" if c["narrow_us"] < c["wide_us"]
                           else "wide")
    times = {t: c[f"{t}_us"] for t in skinny_tiles.CHOICES}
    assert set(times) == {"wide", "narrow", "off"}
    assert c["fastest"] == min(times, key=times.get)
    assert c["off_over_tile"] == pytest.approx(
        c["off_us"] / c[c["faster"] + "_us"])
    want = "narrow" if c["k"] <= kmax else "wide"
    if c["pattern"] == "stacked":  # h = x @ W1 (K = k), x = h @ W2 (K = n)
      assert c["planned"] == [want, "narrow"], c
    else:
      assert c["planned"] == [want], c
  assert {(r["pattern"], r["k"], r["n"]) for r in data["summary"]} == {
      (c["pattern"], c["k"], c["n"]) for c in cells}
  for r in data["summary"]:
    assert 0 <= r["off_wins"] <= r["cells"] and r["off_over_tile_geomean"] > 0
  with pytest.raises(SystemExit):
    skinny_tiles.main([str(out), "--m", "32"])


def test_skinny_tiles_times_the_transposed_weight(sweep, skinny_tiles,
                                                  tmp_path):
  """table_nt (the weight stored (n, k), x @ W^T) in skinny_tiles.py: the
  forced tiles run B transposed, match XLA's x @ W.T, and the planner's
  tile follows the NT bound (narrow up to SKINNY_NARROW_NT_MAX_K)."""
  from jax_dynoff import plan as plan_lib
  kmax = plan_lib.SKINNY_NARROW_NT_MAX_K
  out = tmp_path / "tiles_nt.json"
  assert skinny_tiles.main([str(out), "--quick", "--m", "8", "--n", "64", "--k",
                   f"128,{kmax + 64}", "--patterns", "table_nt",
                   "--settings", "default", "--repeats", "1"]) == 0
  cells = json.loads(out.read_text())["cells"]
  assert {(c["pattern"], c["k"]) for c in cells} == {
      ("table_nt", 128), ("table_nt", kmax + 64)}
  for c in cells:
    assert c["ok"], c
    assert c["planned"] == ["narrow" if c["k"] <= kmax else "wide"], c
  # The transposed call is what runs: its spec has B transposed.
  p = sweep.table_nt_pattern(8, 64, 128, jax.numpy.bfloat16, quick=True)
  specs = plan_lib.traced_specs(lambda *a: p.ours.body(0, *a), p.ours.carry,
                                *p.ours.consts)
  assert [s.trans_b for s in specs] == [True]


@pytest.mark.skipif(
    not (__import__("shutil").which("c++") or __import__("shutil").which("g++")),
    reason="no C++ compiler for the probe's no-op handler")
def test_pad_probe_pads_each_call_and_restores_the_module(sweep, tmp_path):
  """benchmarks/graph_min_size/pad_probe.py on a tiny cell (CPU): it builds
  and registers its no-op handler, puts P no-op calls beside each gemm (or
  window) of the body while measuring, checks each cell against XLA's loop
  with and without them, and leaves jax_dynoff's functions as they were."""
  import jax_dynoff as dyn
  path = _PATH.parent / "graph_min_size" / "pad_probe.py"
  spec = importlib.util.spec_from_file_location("pad_probe", path)
  mod = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(mod)
  gemm, window = dyn.gemm, dyn.window
  out = tmp_path / "pad"
  assert mod.main([str(out), "--quick", "--cells", "8x64x128", "--plan",
                   "table:gemm:3,cond:window:2", "--repeats", "1"]) == 0
  assert (dyn.gemm, dyn.window) == (gemm, window)
  data = json.loads((out / "pad_probe.json").read_text())
  assert [(c["pattern"], c["pad"], c["pad_where"]) for c in data["cells"]] == [
      ("table", 0, "gemm"), ("table", 3, "gemm"), ("cond", 0, "window"),
      ("cond", 2, "window")]
  assert all(c["ok"] for c in data["cells"])
  assert set(data["dispatch_us"]) == {"0", "3", "4"}
  # The padding is in the program: P custom calls to the no-op per gemm.
  x, w = np.ones((8, 64), np.float32), np.ones((64, 16), np.float32)
  with mod.padding():
    mod.PAD["gemm"] = 3
    text = jax.jit(lambda x, w: dyn.gemm(x, w)).lower(x, w).as_text()
  assert text.count(mod.TARGET) == 3, text
  assert (dyn.gemm, dyn.window) == (gemm, window)
  with pytest.raises(SystemExit):
    mod.main([str(out), "--plan", "table:nowhere:3"])


def test_xla_gemm_config_reads_the_fusion_and_its_split(sweep, tmp_path):
  """benchmarks/xla_gemm_config.py: from optimized HLO text (here lines as
  jax 0.11.2's XLA writes them on an H100 for the table loop at
  8x2048x2048) it reads the fusion kind, the Triton tile configuration and
  the dot shapes (the leading 8 of f32[8,2048,8]: K split 8 ways); on this
  machine's backend it compiles a real cell and finds its dot."""
  sys.path.insert(0, str(_PATH.parent))
  spec = importlib.util.spec_from_file_location(
      "xla_gemm_config", _PATH.parent / "xla_gemm_config.py")
  mod = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(mod)
  hlo = (
      '%dot.2 = f32[8,2048,8]{1,2,0} dot(%parameter_1, %parameter_0), '
      'lhs_batch_dims={0}, lhs_contracting_dims={1}\n'
      '%gemm_fusion_dot = f32[8,8,2048]{2,1,0} fusion(%a, %b), kind=kCustom, '
      'backend_config={"fusion_backend_config":{"kind":"__triton_nested_gemm'
      '_fusion","block_level_fusion_config":{"group_size":0,"is_tma_allowed"'
      ':false,"num_ctas":1,"num_stages":3,"num_warps":"8","output_tiles":'
      '[{"sizes":["1","8","128"]}]}}}\n')
  r = mod.read(hlo)
  assert r["kinds"] == ["__triton_nested_gemm_fusion"]
  assert r["dots"] == ["f32[8,2048,8]{1,2,0}"]
  (cfg,) = r["configs"]
  assert cfg["num_warps"] == "8" and cfg["num_stages"] == 3
  assert cfg["output_tiles"] == [{"sizes": ["1", "8", "128"]}]
  out = tmp_path / "cfg.json"
  assert mod.main([str(out), "--cells", "8x256x512"]) == 0
  (cell,) = json.loads(out.read_text())["cells"]
  assert (cell["m"], cell["n"], cell["k"]) == (8, 256, 512)
  assert cell["dots"], cell


def test_loop_bodies_lists_each_sides_loop_bodies(loop_bodies, capsys,
                                                  tmp_path):
  """benchmarks/loop_bodies.py on a tiny stacked cell (any backend): each
  side's while body with its top-level instructions; ours holds the
  layer's two gemm calls, and neither side lists the instructions that
  launch nothing.  (How XLA's own body is fused varies by backend and
  version: only its presence is checked.)  --dump makes its folder and
  writes each side's optimized HLO there."""
  dump = tmp_path / "hlo"
  assert loop_bodies.main(["stacked", "8", "64", "128", "--quick",
                           "--dump", str(dump)]) == 0
  for side in ("ours", "xla"):
    assert "while(" in (dump / f"stacked_8x64x128_{side}.hlo.txt").read_text()
  out = capsys.readouterr().out
  ours, xla = out.split("== xla")
  assert "loop body" in ours and "loop body" in xla
  assert ours.count("custom-call jax_dynoff_gemm") == 2, ours
  assert "jax_dynoff" not in xla, xla
  for free in ("get-tuple-element", "parameter", "    tuple"):
    assert free not in out


def test_loop_bodies_reads_a_command_buffer_body(loop_bodies):
  """loop_bodies() on GPU-shaped HLO text: a body whose thunks XLA put in
  a command buffer lists the call to it, with the thunks outside it."""
  hlo = """HloModule m

%command_buffer (p0: s32[]) -> s32[] {
  %p0 = s32[] parameter(0)
  ROOT %f = s32[] fusion(%p0), kind=kLoop, calls=%add
}

%body (t: (s32[], bf16[8,64])) -> (s32[], bf16[8,64]) {
  %t = (s32[], bf16[8,64]{1,0}) parameter(0)
  %i = s32[] get-tuple-element(%t), index=0
  %x = bf16[8,64]{1,0} get-tuple-element(%t), index=1
  %g = bf16[8,64]{1,0} custom-call(%x, %i), custom_call_target="jax_dynoff_gemm"
  %c = s32[] call(%i), to_apply=%command_buffer
  ROOT %r = (s32[], bf16[8,64]{1,0}) tuple(%c, %g)
}

ENTRY %main (a: (s32[], bf16[8,64])) -> (s32[], bf16[8,64]) {
  %a = (s32[], bf16[8,64]{1,0}) parameter(0)
  ROOT %w = (s32[], bf16[8,64]{1,0}) while(%a), condition=%cond, body=%body
}
"""
  assert loop_bodies.loop_bodies(hlo) == [
      ("body", ["custom-call jax_dynoff_gemm", "call command_buffer"])]
