"""Tensor-parallel stacked-weights layer loop: jax_dynoff against XLA, on
several GPUs and on one.

    python benchmarks/multi_gpu.py OUT_DIR [--devices N] [--repeats R]
                                   [--cases L:m:d,...] [--smoke]

Per layer i of L: `y = x @ W[i]`, W of shape (L, d, d) split along its
columns (n) over the mesh axis "tp", x (m, d) replicated.  Each device reads
its columns of layer i in place, through `jax_dynoff.window(w, (i, 0, 0),
(d, d))` at the device offset i (the call partitions without gathering W:
docs/sharding.md); XLA's loop slices the layer out (`dynamic_index_in_dim`)
and multiplies with `jnp.dot`.  Between layers both gather y back to a
replicated x: the collective a stack of column-split layers needs, since
the next layer contracts over all of y.  The same loops on one device give
the scaling.

Timing is `benchmarks/bench.py`'s: many repetitions of the L-layer loop inside
one jitted fori_loop, called back to back in windows, the sides taking
turns; reported per layer.  Before timing, each side's result is checked
against XLA's loop on one device, and the compiled TP program is searched
for a gather of W (there must be none).

Prints a table and writes OUT_DIR/multi_gpu.json.  `--smoke`: tiny sizes,
one short window, for CPU test runs (8 virtual devices:
XLA_FLAGS=--xla_force_host_platform_device_count=8).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P

import jax_dynoff as dyn
import bench  # benchmarks/bench.py, beside this script

# (L layers, m rows of x, d = k = n); weights L * d * d bf16: 4 GiB at the
# first two, 2 GiB at the third.  m = 16 streams weights (memory-bound),
# m = 2048 is compute-bound.
GPU_CASES = [(32, 16, 8192), (32, 128, 8192), (16, 2048, 8192)]
SMOKE_CASES = [(3, 8, 64)]


def layer_loops(L: int, m: int, d: int, mesh, dtype) -> dict:
  """The four loops of one case: ours / XLA's, split over `mesh` (tp) and on
  its first device alone (one)."""
  kx, kw = jax.random.split(jax.random.key(L * 131 + m), 2)
  x0 = jax.random.uniform(kx, (m, d), jnp.float32, -1, 1).astype(dtype)
  # Scaled so that x keeps its size layer after layer (never timed on
  # values that have decayed to zero): var(x @ W) = d * var(x) * s^2 / 3.
  w = (np.sqrt(3.0 / d) * jax.random.uniform(
      kw, (L, d, d), jnp.float32, -1, 1)).astype(dtype)
  replicated = NamedSharding(mesh, P())

  def ours(gather):
    def layers(j, x, w):
      def body(i, x):
        return gather(dyn.gemm(x, dyn.window(w, (i, 0, 0), (d, d))))
      return lax.fori_loop(0, L, body, x)
    return layers

  def xla(gather):
    def layers(j, x, w):
      def body(i, x):
        wi = lax.dynamic_index_in_dim(w, i, keepdims=False)
        return gather(jnp.dot(x, wi, preferred_element_type=dtype))
      return lax.fori_loop(0, L, body, x)
    return layers

  def tp_gather(y):
    return lax.with_sharding_constraint(y, replicated)

  def none(y):
    return y

  x_tp = jax.device_put(x0, replicated)
  w_tp = jax.device_put(w, NamedSharding(mesh, P(None, None, "tp")))
  one = mesh.devices.flat[0]
  x_1, w_1 = jax.device_put(x0, one), jax.device_put(w, one)
  return {"ours_tp": bench.Loop(ours(tp_gather), x_tp, (w_tp,)),
          "xla_tp": bench.Loop(xla(tp_gather), x_tp, (w_tp,)),
          "ours_one": bench.Loop(ours(none), x_1, (w_1,)),
          "xla_one": bench.Loop(xla(none), x_1, (w_1,))}


def _once(loop: bench.Loop):
  """The loop's L layers once, compiled; (result, compiled program)."""
  f = jax.jit(lambda x, consts: loop.body(0, x, *consts))
  compiled = f.lower(loop.carry, loop.consts).compile()
  return compiled(loop.carry, loop.consts), compiled


def check(loops: dict, L: int, m: int, d: int) -> dict:
  """Each loop's result against XLA's on one device (the norm of the
  difference over the norm of XLA's: bf16 rounding after each of L layers
  makes a few 1e-3 per layer), and the collectives of our TP program: it may
  gather x (the model's), never W."""
  want, _ = _once(loops["xla_one"])
  want = np.asarray(want, np.float32)
  out = {"rms_x": float(np.sqrt(np.mean(want ** 2)))}
  hlo = ""
  for name, loop in loops.items():
    got, compiled = _once(loop)
    out[f"{name}_rel_err"] = float(
        np.linalg.norm(np.asarray(got, np.float32) - want) /
        max(np.linalg.norm(want), 1e-30))
    if name == "ours_tp":
      hlo = compiled.as_text()
  gathers = re.findall(r"= (\S+) all-gather(?:-start)?\(", hlo)
  out["ours_tp_all_gathers"] = gathers
  # A gather of W would have W's or one layer's (d, d) shape.
  out["w_gathered"] = any(re.match(rf"\w+\[({L},)?{d},{d}\]", g)
                          for g in gathers)
  return out


def run_case(L: int, m: int, d: int, mesh, dtype, iters: int,
             repeats: int) -> dict:
  loops = layer_loops(L, m, d, mesh, dtype)
  row = {"L": L, "m": m, "d": d, "dtype": jnp.dtype(dtype).name,
         "devices": int(mesh.size), "iters": iters}
  row.update(check(loops, L, m, d))
  names = list(loops)
  times = bench.time_loops([loops[n] for n in names], iters, repeats)
  for n, t in zip(names, times):
    row[f"{n}_us_per_layer"] = 1e3 * t / L
  flops = 2.0 * m * d * d
  row["ours_tp_tflops"] = flops / (row["ours_tp_us_per_layer"] * 1e6)
  row["tp_ratio_xla_over_ours"] = (row["xla_tp_us_per_layer"] /
                                   row["ours_tp_us_per_layer"])
  row["one_ratio_xla_over_ours"] = (row["xla_one_us_per_layer"] /
                                    row["ours_one_us_per_layer"])
  row["ours_scaling"] = (row["ours_one_us_per_layer"] /
                         row["ours_tp_us_per_layer"])
  row["xla_scaling"] = (row["xla_one_us_per_layer"] /
                        row["xla_tp_us_per_layer"])
  return row


def print_table(rows) -> None:
  head = (f"{'L':>3} {'m':>5} {'d':>5} {'dev':>3} | {'ours TP':>9} "
          f"{'XLA TP':>9} {'XLA/ours':>8} | {'ours 1':>9} {'XLA 1':>9} "
          f"{'XLA/ours':>8} | {'scale ours':>10} {'scale XLA':>9} | "
          f"{'TF/s':>6} {'err':>8} W gathered")
  print("us per layer (device-timed)")
  print(head)
  print("-" * len(head))
  for r in rows:
    err = max(v for k, v in r.items() if k.endswith("_rel_err"))
    print(f"{r['L']:>3} {r['m']:>5} {r['d']:>5} {r['devices']:>3} | "
          f"{r['ours_tp_us_per_layer']:>9.1f} {r['xla_tp_us_per_layer']:>9.1f} "
          f"{r['tp_ratio_xla_over_ours']:>8.2f} | "
          f"{r['ours_one_us_per_layer']:>9.1f} "
          f"{r['xla_one_us_per_layer']:>9.1f} "
          f"{r['one_ratio_xla_over_ours']:>8.2f} | "
          f"{r['ours_scaling']:>10.2f} {r['xla_scaling']:>9.2f} | "
          f"{r['ours_tp_tflops']:>6.1f} {err:>8.1e} {r['w_gathered']}")


def main(argv=None) -> int:
  p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  p.add_argument("out_dir", help="where multi_gpu.json goes")
  p.add_argument("--devices", type=int, default=None,
                 help="devices in the TP mesh (default: all)")
  p.add_argument("--repeats", type=int, default=None,
                 help="timing windows per loop (default 3; 1 with --smoke)")
  p.add_argument("--cases", default=None,
                 help="L:m:d,... (default: the GPU cases, or tiny ones with "
                      "--smoke)")
  p.add_argument("--smoke", action="store_true",
                 help="tiny sizes, one short window: a run that only checks "
                      "the script works (CPU tests)")
  a = p.parse_args(argv)

  devices = jax.devices()[:a.devices] if a.devices else jax.devices()
  mesh = jax.make_mesh((len(devices),), ("tp",), axis_types=(AxisType.Auto,),
                       devices=devices)
  if a.cases:
    cases = [tuple(int(v) for v in c.split(":")) for c in a.cases.split(",")]
  else:
    cases = SMOKE_CASES if a.smoke else GPU_CASES
  for L, m, d in cases:
    if d % len(devices):
      p.error(f"d = {d} is not divisible by the {len(devices)} devices")
  gpu = jax.default_backend() == "gpu"
  bench.WINDOW_S = 1.0 if gpu and not a.smoke else 0.0
  repeats = a.repeats or (1 if a.smoke else 3)
  dtype = jnp.bfloat16
  print(f"jax {jax.__version__}, {len(devices)} x {devices[0].device_kind}, "
        f"jax_dynoff {'CUDA' if dyn.cuda_available() else 'CPU'} build")

  rows = []
  for L, m, d in cases:
    iters = 2 if a.smoke else bench._iters(2.0 * L * m * d * d, gpu)
    rows.append(run_case(L, m, d, mesh, dtype, iters, repeats))
    print_table(rows[-1:])
    print(f"  our TP program's all-gathers: {rows[-1]['ours_tp_all_gathers']}")
  print()
  print_table(rows)
  os.makedirs(a.out_dir, exist_ok=True)
  path = os.path.join(a.out_dir, "multi_gpu.json")
  with open(path, "w") as f:
    json.dump({"jax": jax.__version__, "backend": jax.default_backend(),
               "devices": [str(dv) for dv in devices],
               "device_kind": devices[0].device_kind, "smoke": a.smoke,
               "rows": rows}, f, indent=1)
  print(f"wrote {path}")
  # A wrong split would be off by O(1); rounding stays far below 0.1.
  bad = [r for r in rows if r["w_gathered"]
         or max(v for k, v in r.items() if k.endswith("_rel_err")) > 0.1]
  for r in bad:
    print(f"FAILED: L={r['L']} m={r['m']} d={r['d']}: W gathered "
          f"{r['w_gathered']}, errors " + ", ".join(
              f"{k} {v:.2g}" for k, v in r.items() if k.endswith("_rel_err")))
  return 1 if bad else 0


if __name__ == "__main__":
  sys.exit(main())
