"""MoE expert GEMMs at every scale against the peers: jax_dynoff.ragged_dot
beside tokamax's ragged_dot (its Pallas Mosaic-GPU kernel, default
configuration) and lax.ragged_dot, forward and forward + backward (the vjp
wrt lhs and rhs), on real layer shapes with uniform and skewed group sizes
(some groups empty), device-timed in one process (bench.time_loops: the
sides take turns), each side's accuracy against a float32 reference.

tokamax is optional: without it (or where its kernel refuses a case) its
columns say why.  On a machine without network it travels as wheels,
installed with --no-deps: tokamax, einshape, pydantic with its matching
pydantic-core, annotated-types, typing-inspection, typing-extensions,
qwix, immutabledict, jaxtyping, wadler-lindig, tqdm, tensorboardx,
protobuf, absl-py, and for its top-level import xprof with fire,
termcolor and gviz-api; qwix imports flax and six, which the H200 image
has.  xprof must be a manylinux wheel with `xprof.cli` (2.24.2 has it;
for 2.22.1 pip picks a `none-any` wheel without it, and tokamax's import
fails).  Fetched for a Python 3.12 device on a machine with network:
  pip download --no-deps -d .tkw --python-version 3.12 --only-binary=:all: \
    --platform manylinux2014_x86_64 --platform manylinux_2_27_x86_64 \
    tokamax==0.0.17 xprof==2.24.2 einshape pydantic pydantic-core \
    annotated-types typing-inspection typing-extensions qwix immutabledict \
    jaxtyping wadler-lindig tqdm tensorboardx protobuf absl-py fire \
    termcolor gviz-api
(pydantic-core must be the version that pydantic pins), and installed
into the interpreter that runs this script (a bare `pip` may belong to
another; the bench then reports tokamax as not importable):
  python3 -m pip install --no-index --no-deps .tkw/*.whl
  python3 -c "import tokamax"
So installed,
tokamax 0.0.17 ran on the H200: benchmarks/results/2026-12-05-h200-efa90f3.
Usage:
  python benchmarks/moe_peers.py [OUT_DIR] [--quick] [--cases NAME,...]
writes OUT_DIR/moe_peers.json and prints one line per case and setting.
DeepSeek-V3's layers (15-GB weight stacks, and the same again for their
gradient) ran out of JAX's default three quarters of an 80-GB card (H100,
with the earlier train step below); give them more there
(XLA_PYTHON_CLIENT_MEM_FRACTION=0.92).
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import sys
import time
import traceback

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

import jax_dynoff as dyn
import bench  # benchmarks/bench.py, beside this script

# (name, experts, rows (tokens x top-k), model dim K, expert dim N): the
# expert GEMMs of real layers.  Up projections K -> N, down N -> K.
CASES = (
    ("mixtral_up", 8, 8192, 4096, 14336),
    ("mixtral_down", 8, 8192, 14336, 4096),
    ("qwen3_30b_up", 128, 32768, 2048, 1536),
    ("qwen3_30b_down", 128, 32768, 768, 2048),
    ("deepseek_v3_up", 256, 32768, 7168, 4096),
    ("deepseek_v3_down", 256, 32768, 2048, 7168),
    ("decode_e64", 64, 512, 4096, 4096),
    ("decode_e128", 128, 1024, 2048, 1536),
    ("decode_e256", 256, 256, 7168, 2048),
)
QUICK = ("mixtral_up", "qwen3_30b_down", "decode_e64")


def group_sizes(kind: str, experts: int, rows: int, seed: int = 0):
  """int32 sizes summing to `rows`: "uniform" (rows // experts each, the
  remainder to the first groups) or "skewed" (a Dirichlet(0.3) draw, as a
  router's choices fall, floored; groups that draw under one row are
  empty; the remainder to the largest group)."""
  if kind == "uniform":
    s = np.full(experts, rows // experts, np.int64)
    s[:rows - s.sum()] += 1
    return s.astype(np.int32)
  p = np.random.default_rng(seed).dirichlet(np.full(experts, 0.3))
  s = np.floor(p * rows).astype(np.int64)
  s[np.argmax(s)] += rows - s.sum()
  return s.astype(np.int32)


def _tokamax():
  """tokamax's ragged_dot, or the reason it is not here."""
  try:
    import tokamax  # pylint: disable=g-import-not-at-top
  except Exception as e:  # pylint: disable=broad-except
    return None, f"tokamax not importable: {type(e).__name__}: {e}"
  return functools.partial(tokamax.ragged_dot, implementation="mosaic"), ""


def sides():
  """name -> ragged_dot-like function (lhs, rhs, sizes) -> bfloat16 rows,
  and the reasons a side is missing."""
  out = {"ours": lambda x, w, g: dyn.ragged_dot(x, w, g),
         "lax": lambda x, w, g: lax.ragged_dot(x, w, g)}
  tk, why = _tokamax()
  missing = {}
  if tk is None:
    missing["tokamax"] = why
  else:
    out["tokamax"] = lambda x, w, g: tk(x, w, g)
  return out, missing


def _outputs(dot, x, w, g, dy):
  y, vjp = jax.vjp(lambda a, b: dot(a, b, g), x, w)
  return (y, *vjp(dy))


def sample_groups(sizes) -> list[int]:
  """The groups whose results are checked: the largest, the smallest
  non-empty one, one in between, and an empty one where there is one."""
  sizes = np.asarray(sizes)
  full = np.flatnonzero(sizes > 0)
  by_size = full[np.argsort(sizes[full], kind="stable")]
  pick = [int(by_size[-1]), int(by_size[0]), int(by_size[len(by_size) // 2])]
  empty = np.flatnonzero(sizes == 0)
  if len(empty):
    pick.append(int(empty[0]))
  return sorted(set(pick))


def accuracy(dot, x, w, sizes, dy) -> list[float]:
  """Max |error| over max |reference| of the output, d lhs and d rhs on
  the `sample_groups`, against float32 products at HIGHEST of the same
  bfloat16 operands (per group: a dense reference of every group would
  cost a masked product of E times the FLOPs).  An empty group's d rhs
  must be zero."""
  g = jnp.asarray(sizes)
  y, dx, dw = jax.jit(functools.partial(_outputs, dot))(x, w, g, dy)
  ends = np.cumsum(sizes)
  hi = lax.Precision.HIGHEST
  f32 = lambda a: jnp.asarray(a, jnp.float32)
  err = np.zeros(3)
  scale = np.zeros(3)
  for grp in sample_groups(sizes):
    r1 = int(ends[grp])
    r0 = r1 - int(sizes[grp])
    xs, ws, ds = f32(x[r0:r1]), f32(w[grp]), f32(dy[r0:r1])
    refs = (jnp.dot(xs, ws, precision=hi), jnp.dot(ds, ws.T, precision=hi),
            jnp.dot(xs.T, ds, precision=hi))
    gots = (y[r0:r1], dx[r0:r1], dw[grp])
    for i, (a, b) in enumerate(zip(gots, refs)):
      err[i] = max(err[i], float(jnp.max(jnp.abs(f32(a) - b), initial=0.0)))
      scale[i] = max(scale[i], float(jnp.max(jnp.abs(b), initial=0.0)))
  return [float(e / max(sc, 1e-30)) for e, sc in zip(err, scale)]


# lax.ragged_dot on a GPU is a masked dense product: E times the FLOPs
# (and its backward E times the memory: DeepSeek-V3's up projection asks
# for 64 GiB).  Where that passes this many FLOPs a call, its side is left
# out.
LAX_MAX_FLOPS = 1e14


def _fwd_loop(dot, x, w, g):
  def body(i, y, x, w, g):
    xx, ww, _ = lax.optimization_barrier((x, w, i))
    return dot(xx, ww, g)
  return bench.Loop(body, jnp.zeros((x.shape[0], w.shape[2]), x.dtype),
                    (x, w, g))


def _train_loop(dot, x, w, g, carry):
  """Forward and vjp a step.  The carry is (cotangent, dx, dw), `carry` its
  first value, shared by every side's loop (a DeepSeek-V3 weight gradient
  is 15 GB).  Each step's output is the next step's cotangent, so nothing
  is dead and no extra pass touches the results: the step is the three
  products and nothing else (an earlier form added y[0, 0] to dw, a
  broadcast pass over the whole weight gradient every step, the same on
  every side)."""
  def body(i, c, x, w, g):
    xx, ww, _ = lax.optimization_barrier((x, w, i))
    y, dx, dw = _outputs(dot, xx, ww, g, c[0])
    return y.astype(c[0].dtype), dx, dw
  return bench.Loop(body, carry, (x, w, g))


def run_case(name, experts, rows, k, n, kind, fns, repeats) -> dict:
  dtype = jnp.bfloat16
  kx, kw, ky = jax.random.split(jax.random.key(experts * 7 + k), 3)
  x = bench._rand(kx, (rows, k), dtype)  # pylint: disable=protected-access
  w = bench._rand(kw, (experts, k, n), dtype, 1 / np.sqrt(k))  # pylint: disable=protected-access
  dy = bench._rand(ky, (rows, n), dtype)  # pylint: disable=protected-access
  sizes = group_sizes(kind, experts, rows)
  g = jnp.asarray(sizes)
  rec = dict(case=name, experts=experts, rows=rows, k=k, n=n, groups=kind,
             empty=int((sizes == 0).sum()), max_group=int(sizes.max()),
             flops=2.0 * rows * k * n, sides={})
  ok = {}
  for side, dot in fns.items():
    if side == "lax" and experts * rec["flops"] > LAX_MAX_FLOPS:
      rec["sides"][side] = {"refused": "left out: a masked dense product of "
                            f"{experts * rec['flops']:.2g} FLOPs a call"}
      continue
    try:
      rec["sides"][side] = {"error": accuracy(dot, x, w, sizes, dy)}
      ok[side] = dot
    except Exception as e:  # pylint: disable=broad-except
      rec["sides"][side] = {"refused": f"{type(e).__name__}: {e}"[:300]}
  iters = max(3, min(100, int(3e12 / rec["flops"])))
  names = list(ok)
  for mode, make, it in (("fwd", _fwd_loop, iters),
                         ("train", _train_loop, max(2, iters // 3))):
    carry = (dy, jnp.zeros_like(x), jnp.zeros_like(w)) if mode == "train" \
        else None
    loops = [make(ok[s], x, w, g) if mode == "fwd" else
             make(ok[s], x, w, g, carry) for s in names]
    try:
      ms = bench.time_loops(loops, it, repeats)
    except Exception as e:  # pylint: disable=broad-except
      rec[f"{mode}_failed"] = f"{type(e).__name__}: {e}"[:300]
      continue
    for s, t in zip(names, ms):
      rec["sides"][s][f"{mode}_ms"] = t
    del loops, carry  # the train step's carry is a weight stack's size
  # Dense GEMM of the same FLOPs: what a ragged_dot could at best reach.
  dense = bench.Loop(bench.moe_dense_body, jnp.zeros((rows, n), dtype),
                     (x, w[0]))
  rec["dense_ms"] = bench.time_loops([dense], iters, repeats)[0]
  return rec


def _line(r) -> str:
  s = r["sides"]
  o = s.get("ours", {})
  parts = [f"{r['case']:<17} {r['groups']:<7} E{r['experts']:<4} "
           f"{r['rows']}x{r['k']}->{r['n']}"]
  for mode in ("fwd", "train"):
    t = o.get(f"{mode}_ms")
    if t is None:
      parts.append(f"{mode}: ours failed")
      continue
    cmp = []
    for peer in ("tokamax", "lax"):
      pt = s.get(peer, {}).get(f"{mode}_ms")
      cmp.append(f"{peer} {pt / t:5.2f}" if pt else f"{peer}  n/a")
    parts.append(f"{mode} {t:8.3f} ms ({', '.join(cmp)})")
  if "fwd_ms" in o:
    parts.append(f"dense/ours {r['dense_ms'] / o['fwd_ms']:.2f}")
    # The weights of the experts that have rows: what the forward must read.
    used = r["experts"] - r["empty"]
    tb = used * r["k"] * r["n"] * 2 / (o["fwd_ms"] * 1e-3) / 1e12
    parts.append(f"weights {tb:.2f} TB/s")
  errs = {p: v["error"] for p, v in s.items() if "error" in v}
  parts.append("err " + " ".join(
      f"{p} {max(e):.1e}" for p, e in errs.items()))
  return " | ".join(parts)


def drive(argv, doc, cases, quick, json_name, make_run, line):
  """The MoE scripts' driver (this one's and moe_glu.py's): the arguments
  (OUT_DIR, --quick, --cases, --groups, --repeats), then one row per case
  and group kind, printed by `line(row)` and, with OUT_DIR, written to
  OUT_DIR/json_name after every row (a run cut short keeps its rows).
  `make_run()`, called once the arguments are read, gives run(case, kind,
  repeats) -> row, the header's words after the device, and fields added
  to every row.  Cases run in --cases's order (a run cut short by a time
  limit keeps the ones named first); an unknown name is an error."""
  ap = argparse.ArgumentParser(description=doc.split("\n\n")[0])
  ap.add_argument("out_dir", nargs="?", default=None)
  ap.add_argument("--quick", action="store_true",
                  help=f"cases {', '.join(quick)}; 0.5-s windows")
  ap.add_argument("--cases", default=None, help="comma-separated names")
  ap.add_argument("--groups", default="uniform,skewed")
  ap.add_argument("--repeats", type=int, default=3)
  a = ap.parse_args(argv)
  gpu = jax.default_backend() == "gpu"
  bench.WINDOW_S = (0.5 if a.quick else 1.0) if gpu else 0.0
  names = (a.cases.split(",") if a.cases else quick if a.quick
           else [c[0] for c in cases])
  by_name = {c[0]: c for c in cases}
  unknown = [n for n in names if n not in by_name]
  if unknown:
    ap.error(f"unknown case(s) {', '.join(unknown)}; the cases: "
             f"{', '.join(by_name)}")
  run, header, extra = make_run()
  print(f"device: {jax.devices()[0].device_kind}, jax {jax.__version__}; "
        f"{header}", flush=True)
  rows = []
  for c in (by_name[n] for n in names):
    for kind in a.groups.split(","):
      t0 = time.time()
      try:
        r = run(c, kind, a.repeats)
      except Exception:  # pylint: disable=broad-except
        print(f"{c[0]} {kind}: failed\n{traceback.format_exc()}", flush=True)
        continue
      r.update(extra)
      r["seconds"] = time.time() - t0
      rows.append(r)
      print(line(r), flush=True)
      if a.out_dir:
        os.makedirs(a.out_dir, exist_ok=True)
        with open(os.path.join(a.out_dir, json_name), "w") as f:
          json.dump({"device": jax.devices()[0].device_kind,
                     "jax": jax.__version__, "rows": rows}, f, indent=1)
  return 0


def main(argv=None):
  def make_run():
    fns, missing = sides()
    header = (f"sides: {', '.join(fns)}"
              + "".join(f"; {k}: {v}" for k, v in missing.items()))
    return (lambda c, kind, repeats: run_case(*c, kind, fns, repeats),
            header, {"missing": missing})
  return drive(argv, __doc__, CASES, QUICK, "moe_peers.json", make_run,
               _line)


if __name__ == "__main__":
  sys.exit(main())
