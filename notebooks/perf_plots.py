"""Plots and tables of committed benchmark results, for notebook 03 and docs/.

The results are the JSON files `python benchmarks/bench.py OUT_DIR` writes
(`bench.json`, `bench_graphs.json`, `bench_body_graphs.json`,
`bench_cpu.json`), committed under benchmarks/results/<date>-<gpu>-<commit>/.

    python notebooks/perf_plots.py     # re-renders docs/img/*.png

draws the figures docs/performance.md shows from the committed runs.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Optional

import numpy as np

# Scenario families, in the bench's order: (key, title, what the other side
# of the comparison is).  A row belongs to the family its scenario starts
# with ("loop_graph", "loop_nograph", ... are all "loop").
FAMILIES = [
    ("plain", "One GEMM, A and D at offsets from a device table",
     "jnp.dot on the same shapes (cuBLAS), no offsets"),
    ("slices", "A loop of GEMMs into row slices of one buffer",
     "XLA's loop: dynamic_slice, jnp.dot, dynamic_update_slice"),
    ("stacked", "Stacked weights: x = x @ W[i] over L layers",
     "XLA's loop: W[i] sliced (dynamic_index_in_dim), jnp.dot"),
    ("cond", "lax.cond between two GEMMs at device offsets, in a loop",
     "XLA's loop: W[i] sliced, jnp.dot, dynamic_update_slice in each branch"),
    ("kv", "KV-cache writes: x @ W[layer] into cache[layer, pos:pos+t]",
     "XLA's loop: W[layer] sliced, jnp.dot, dynamic_update_slice"),
    ("loop", "64 small GEMMs at table offsets in one fori_loop",
     "XLA's loop: W[i] sliced, jnp.dot, dynamic_update_slice"),
]
OURS = "jax_dynoff.gemm"

# The loop scenario's variants of our side.
_LOOP_VARIANTS = {"loop_graph": "as written", "loop_graph_unroll8": "unroll=8",
                  "loop_bodygraph": "body graphs", "loop_nograph": "no graphs"}

_DTYPE = {"bfloat16": "bf16", "float16": "f16", "float32": "f32"}


def family(row: dict) -> str:
  for key, _, _ in FAMILIES:
    if row["scenario"] == key or row["scenario"].startswith(key + "_"):
      return key
  return row["scenario"]


def label(row: dict) -> str:
  """A short readable name for a row's case (the raw case when unknown)."""
  case, dt = row["case"], _DTYPE.get(row["dtype"], row["dtype"])
  s = row["scenario"]
  if s.startswith("loop"):
    m = re.fullmatch(r"L(\d+)_(\d+x\d+x\d+)", case)
    what = _LOOP_VARIANTS.get(s, s)
    return f"{what} ({m[1]} x {m[2]})" if m else f"{what} {case}"
  m = re.fullmatch(r"(\d+)x(\d+)x(\d+)", case)
  if m:
    a, b, c = m.groups()
    size = f"{a}\u00b3" if a == b == c else case
    return f"{size} {dt}"
  m = re.fullmatch(r"L(\d+)_m(\d+)_(\d+)x(\d+)", case)
  if m:
    what = "layers" if s in ("stacked", "cond") else "GEMMs"
    return f"{m[1]} {what}, m={m[2]}, {m[3]}x{m[4]}"
  m = re.fullmatch(r"layers(\d+)_steps(\d+)_t(\d+)_(\d+)", case)
  if m:
    return f"{m[1]} layers x {m[2]} steps, {m[3]} rows, d={m[4]}"
  return f"{case} {dt}"


def load_run(folder: Path) -> dict:
  """Every bench*.json of one results folder: {file stem: results dict}."""
  return {p.stem: json.loads(p.read_text())
          for p in sorted(Path(folder).glob("bench*.json"))}


def find_runs(start: Path) -> list[Path]:
  """The results folders holding a bench.json, newest first, looked for in
  benchmarks/results/ of `start` or its parents (the repository root)."""
  for folder in [start, *start.parents]:
    root = folder / "benchmarks" / "results"
    runs = [p.parent for p in root.glob("*/bench.json")]
    if runs:
      # Folder names begin with the date; the date recorded inside the file
      # comes first, the folder name breaks ties.
      def key(d):
        return (json.loads((d / "bench.json").read_text()).get("date", ""),
                d.name)
      return sorted(runs, key=key, reverse=True)
    if (folder / "benchmarks").is_dir():
      return []      # the repository root: it has no results yet
  return []


def describe(results: dict, name: str = "") -> str:
  """One line: where, when, how a results file was measured."""
  flags = results.get("xla_flags") or "default XLA flags"
  window = results.get("window_s")
  how = (f"{window:g}-s windows x {results.get('repeats')} rounds"
         if window else f"{results.get('repeats', '?')} rounds")
  where = f"{name}: " if name else ""
  return (f"{where}{results.get('device', '?')}, jax {results.get('jax', '?')}, "
          f"{results.get('date', '?')}, {flags}, {how}")


def table(rows: list[dict]) -> str:
  """A fixed-width text table of rows, its columns as wide as their cells."""
  head = ["scenario", "case", "ours ms", "other ms", "ratio", "TFLOP/s",
          "% roofline", "other side"]
  body = []
  for r in rows:
    tfl = r["flops"] / (r["ours_ms"] * 1e-3) / 1e12
    other = "jnp.dot, no offsets" if family(r) == "plain" else "XLA's loop"
    body.append([family(r), label(r), f"{r['ours_ms']:.4f}",
                 f"{r['xla_ms']:.4f}", f"{r['xla_ms'] / r['ours_ms']:.2f}",
                 f"{tfl:.1f}", f"{r.get('roofline_pct', float('nan')):.0f}",
                 other])
  widths = [max(len(h), *(len(b[i]) for b in body)) if body else len(h)
            for i, h in enumerate(head)]
  right = {2, 3, 4, 5, 6}

  def fmt(cells):
    return "  ".join(c.rjust(w) if i in right else c.ljust(w)
                     for i, (c, w) in enumerate(zip(cells, widths))).rstrip()
  lines = [fmt(head), "  ".join("-" * w for w in widths)]
  return "\n".join(lines + [fmt(b) for b in body])


def _ratio_color(r: float) -> str:
  """Green: jax_dynoff >= 5% faster; red: >= 5% slower; black: level."""
  return "tab:green" if r >= 1.05 else "tab:red" if r <= 0.95 else "black"


def scenarios_figure(rows: list[dict], title: str, width: float = 9.0):
  """One panel per scenario family: ms per iteration of our side and of
  the other side (named in the panel's legend), the ratio written next to
  each pair (other time / ours: > 1, green, means jax_dynoff is faster)."""
  import matplotlib.pyplot as plt
  fams = [(k, t, o) for k, t, o in FAMILIES
          if any(family(r) == k for r in rows)]
  extra = sorted({family(r) for r in rows} - {k for k, _, _ in FAMILIES})
  fams += [(k, k, "XLA") for k in extra]
  heights = [max(1.8, 0.5 * sum(family(r) == k for r in rows) + 1.5)
             for k, _, _ in fams]
  fig, axes = plt.subplots(len(fams), 1, figsize=(width, sum(heights) + 0.8),
                           gridspec_kw={"height_ratios": heights},
                           squeeze=False, layout="constrained")
  for ax, (key, ftitle, other) in zip(axes[:, 0], fams):
    rs = [r for r in rows if family(r) == key]
    y = np.arange(len(rs))
    ours = [r["ours_ms"] for r in rs]
    xla = [r["xla_ms"] for r in rs]
    ax.barh(y - 0.2, ours, 0.4, color="tab:blue", label=OURS)
    ax.barh(y + 0.2, xla, 0.4, color="tab:gray", label=other)
    ax.set_yticks(y, [label(r) for r in rs], fontsize=9)
    ax.invert_yaxis()
    spread = max(ours + xla) / max(min(ours + xla), 1e-12)
    log = spread > 30
    if log:
      ax.set_xscale("log")
    top = max(ours + xla)
    ax.set_xlim(right=top * (8 if log else 1.32))
    for yi, r in zip(y, rs):
      ratio = r["xla_ms"] / r["ours_ms"]
      x = max(r["ours_ms"], r["xla_ms"])
      ax.text(x * (1.15 if log else 1.0) + (0 if log else 0.02 * top), yi,
              f"{ratio:.2f}x", va="center", fontsize=9,
              color=_ratio_color(ratio), fontweight="bold")
    ax.set_xlabel("ms per timed iteration" + (" (log scale)" if log else ""),
                  fontsize=9)
    # The legend between the title and the panel, where it covers no bar.
    ax.set_title(ftitle, fontsize=10, loc="left", fontweight="bold", pad=20)
    ax.legend(fontsize=8, loc="lower left", bbox_to_anchor=(0.0, 1.0),
              ncol=2, frameon=False, borderaxespad=0.2, handlelength=1.5)
    ax.tick_params(axis="x", labelsize=8)
    ax.grid(axis="x", alpha=0.3)
  fig.suptitle(title + "\nnumbers: the other side's time / jax_dynoff's "
               "(> 1: jax_dynoff faster)", fontsize=10)
  return fig


def flags_figure(runs: dict[str, list[dict]], title: str, width: float = 9.0):
  """Ratio (XLA's loop time / ours) of the loop scenarios under several
  XLA flag settings, both sides compiled with the same flags each time.
  runs: setting name -> rows, in legend order."""
  import matplotlib.pyplot as plt
  # The cases every setting ran, in the first setting's order.
  first, *rest = runs.values()
  keys = [(r["scenario"], r["case"]) for r in first if family(r) != "plain"]
  keys = [k for k in keys
          if all(any((r["scenario"], r["case"]) == k for r in rows)
                 for rows in rest)]
  names = list(runs)
  fig, ax = plt.subplots(figsize=(width, 0.55 * len(keys) * max(1, len(names)) / 2 + 1.8))
  h = 0.8 / len(names)
  colors = ["tab:gray", "tab:blue", "tab:orange", "tab:purple"]
  y = np.arange(len(keys))
  for j, name in enumerate(names):
    by = {(r["scenario"], r["case"]): r for r in runs[name]}
    vals = [by[k]["xla_ms"] / by[k]["ours_ms"] if k in by else math.nan
            for k in keys]
    ax.barh(y + (j - (len(names) - 1) / 2) * h, vals, h, label=name,
            color=colors[j % len(colors)])
    for yi, v in zip(y, vals):
      if not math.isnan(v):
        ax.text(v + 0.02, yi + (j - (len(names) - 1) / 2) * h, f"{v:.2f}",
                va="center", fontsize=7)
  labels = []
  for s, c in keys:
    r = {"scenario": s, "case": c, "dtype": "bfloat16"}
    labels.append(f"{s.split('_')[0]}: {label(r)}")
  ax.set_yticks(y, labels, fontsize=9)
  ax.invert_yaxis()
  ax.axvline(1.0, color="k", lw=0.8)
  ax.set_xlabel("XLA's loop time / jax_dynoff's (> 1: jax_dynoff faster)",
                fontsize=9)
  ax.set_xlim(0, max(2.4, ax.get_xlim()[1] + 0.2))
  ax.legend(fontsize=8, loc="lower right", framealpha=0.9)
  ax.grid(axis="x", alpha=0.3)
  ax.set_title(title, fontsize=10, loc="left")
  fig.tight_layout()
  return fig


def _intensity(row: dict) -> Optional[float]:
  """FLOPs per byte of the least memory traffic, or None if the case is not
  MxNxK."""
  m = re.fullmatch(r"(\d+)x(\d+)x(\d+)", row["case"])
  if not m:
    return None
  a, b, c = (int(v) for v in m.groups())
  item = {"float32": 4}.get(row["dtype"], 2)
  return row["flops"] / ((a * c + c * b + a * b) * item)


def roofline_figure(rows: list[dict], peaks: dict, peak_tbps: float,
                    title: str, width: float = 9.0):
  """jax_dynoff (dots) and jnp.dot (crosses) on the roofline of their dtype,
  for the rows whose case is MxNxK."""
  import matplotlib.pyplot as plt
  pts = [(_intensity(r), r) for r in rows if _intensity(r) is not None]
  fig, ax = plt.subplots(figsize=(width, 0.62 * width))
  ai = np.logspace(0, 4, 200)
  colors = {}
  dtypes = sorted({r["dtype"] for _, r in pts})
  by_peak: dict[float, list[str]] = {}
  for dt in dtypes:  # one line per peak: bf16 and f16 share theirs
    by_peak.setdefault(peaks.get(dt, max(peaks.values())), []).append(dt)
  for peak, dts in by_peak.items():
    names = " / ".join(_DTYPE.get(d, d) for d in dts)
    (line,) = ax.plot(ai, np.minimum(peak, peak_tbps * ai), lw=1.5,
                      label=f"roofline {names}: {peak:.0f} TFLOP/s, "
                      f"{peak_tbps} TB/s")
    for d in dts:
      colors[d] = line.get_color()
  markers = dict(zip(dtypes, ["o", "s", "^", "D"]))
  named = set()
  for x, r in pts:
    ours = r["flops"] / (r["ours_ms"] * 1e-3) / 1e12
    xla = r["flops"] / (r["xla_ms"] * 1e-3) / 1e12
    ax.scatter(x, ours, marker=markers[r["dtype"]], s=40,
               color=colors[r["dtype"]], zorder=3)
    ax.scatter(x, xla, marker="x", s=40, color=colors[r["dtype"]], zorder=3)
    # One name per point of the plot: the shape (bf16 and f16 coincide).
    shape = label(r).rsplit(" ", 1)[0]
    if (round(x), shape) not in named:
      named.add((round(x), shape))
      ax.annotate(shape, (x, min(ours, xla)), fontsize=8, xytext=(6, -12),
                  textcoords="offset points")
  for d in dtypes:
    ax.scatter([], [], marker=markers[d], color=colors[d],
               label=f"{OURS}, {_DTYPE.get(d, d)}")
  ax.scatter([], [], marker="x", color="gray",
             label="jnp.dot (cuBLAS), no offsets")
  ax.set_xscale("log")
  ax.set_yscale("log")
  ax.set_xlabel("arithmetic intensity (FLOP per byte of A, B and D)",
                fontsize=9)
  ax.set_ylabel("TFLOP/s", fontsize=9)
  ax.set_title(title, fontsize=10, loc="left")
  ax.legend(fontsize=8, loc="lower right", framealpha=0.9)
  ax.grid(True, which="both", alpha=0.3)
  fig.tight_layout()
  return fig


def cpu_figure(rows: list[dict], title: str, width: float = 9.0):
  """CPU rows (--cpu-plain): GFLOP/s of jax_dynoff and jnp.dot per size,
  one panel per dtype, with the ratio on top of each pair."""
  import matplotlib.pyplot as plt
  dtypes = [d for d in ("float32", "bfloat16", "float16")
            if any(r["dtype"] == d for r in rows)]
  fig, axes = plt.subplots(1, len(dtypes), figsize=(width, 3.6),
                           sharey=True, squeeze=False, layout="constrained")
  for ax, dt in zip(axes[0], dtypes):
    rs = [r for r in rows if r["dtype"] == dt]
    x = np.arange(len(rs))
    ours = [r["flops"] / (r["ours_ms"] * 1e-3) / 1e9 for r in rs]
    xla = [r["flops"] / (r["xla_ms"] * 1e-3) / 1e9 for r in rs]
    ax.bar(x - 0.2, ours, 0.4, color="tab:blue", label=OURS)
    ax.bar(x + 0.2, xla, 0.4, color="tab:gray", label="jnp.dot")
    for xi, r, o, d in zip(x, rs, ours, xla):
      ratio = r["xla_ms"] / r["ours_ms"]
      ax.text(xi, max(o, d) * 1.03, f"{ratio:.2f}x", ha="center", fontsize=9,
              color=_ratio_color(ratio), fontweight="bold")
    ax.set_xticks(x, [r["case"].split("x")[0] + "^3" for r in rs], fontsize=9)
    ax.set_title(dt, fontsize=10)
    ax.grid(axis="y", alpha=0.3)
  axes[0][0].set_ylabel("GFLOP/s", fontsize=9)
  top = axes[0][0].get_ylim()[1]
  axes[0][0].set_ylim(0, top * 1.12)
  handles, labels = axes[0][0].get_legend_handles_labels()
  fig.legend(handles, labels, fontsize=8, loc="outside lower center", ncol=2,
             frameon=False)
  fig.suptitle(title + "\nnumbers: jnp.dot's time / jax_dynoff's "
               "(> 1: jax_dynoff faster)", fontsize=10)
  return fig


def render_docs(repo: Path) -> list[Path]:
  """Draws docs/img/*.png from the committed runs; returns the files."""
  import matplotlib
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt
  results = repo / "benchmarks" / "results"
  out = repo / "docs" / "img"
  out.mkdir(parents=True, exist_ok=True)
  written = []

  def save(fig, name):
    path = out / name
    fig.savefig(path, dpi=100)
    plt.close(fig)
    written.append(path)

  for folder in sorted(results.iterdir()):
    if not folder.is_dir():
      continue
    run = load_run(folder)
    tag = folder.name.split("-", 3)[-1]          # e.g. h200-aff5b85
    if "bench" in run:
      r = run["bench"]
      save(scenarios_figure(r["rows"], f"{folder.name}: {describe(r)}"),
           f"{tag}-scenarios.png")
      if any(x["dtype"] == "float32" for x in r["rows"]):
        save(roofline_figure(r["rows"], r["peak_tflops"], r["peak_tbps"],
                             f"{folder.name}: plain GEMMs on the H200 roofline"),
             f"{tag}-roofline.png")
      settings = {"XLA defaults": "bench",
                  "body graphs (cuda_graph_flags())": "bench_body_graphs",
                  "whole-loop graphs (whole_loops=True)": "bench_graphs"}
      if "bench_body_graphs" in run and "bench_graphs" in run:
        save(flags_figure({k: run[v]["rows"] for k, v in settings.items()},
                          f"{folder.name}: the loop scenarios under three XLA "
                          "flag settings"),
             f"{tag}-xla-flags.png")
    if "bench_cpu" in run:
      r = run["bench_cpu"]
      save(cpu_figure(r["rows"], f"{folder.name}: CPU handler vs jnp.dot, "
                      f"{r.get('cpu_count', '?')} cores, jax {r.get('jax')}"),
           f"{tag}.png")
  return written


if __name__ == "__main__":
  for p in render_docs(Path(__file__).resolve().parents[1]):
    print(p)
