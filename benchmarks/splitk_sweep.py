"""Split-K against the unsplit tile and XLA, per shape, on the GPU.

For each (m, n): the stacked-weights loop (`x = x @ W[i]`, n = k, L layers,
bench.stacked_loops, as many calls of it per jitted loop as the bench
would run) compiled with the unsplit tile's plan (the default options),
with split-K at S slices (KernelOptions(split_k=True, split_k_slices=S):
the direct split-K kernel where it can run), and XLA's loop; all timed as the bench times (sustained windows, sides
taking turns).  Prints us per GEMM and B's TB/s.  Under XLA's default
flags a loop of skinny layers is bound by the host's launches, so run it
with XLA_FLAGS from jax_dynoff.cuda_graph_flags() too to see the kernels.

    python benchmarks/splitk_sweep.py [--window S] [--rounds R] [M:N ...]
"""
from __future__ import annotations

import argparse
import dataclasses
import statistics

import jax
import jax.numpy as jnp

import jax_dynoff as dyn
import bench
from jax_dynoff import plan

SHAPES = ["16:4096", "128:4096", "256:4096", "16:2048", "16:8192"]
SLICES = (2, 4, 8)
LAYERS = 8


def variants(m, n, iters):
  loops = bench.stacked_loops(LAYERS, m, n, jnp.bfloat16)
  out = {}
  ours = loops["ours"]
  spec = plan.first_spec(lambda x, w: ours.body(0, x, w), ours.carry,
                         *ours.consts)
  out["tile " + plan.plan(spec).path.removeprefix("sm90_")] = \
      bench._runner(ours, iters)
  for s in SLICES:
    opts = dyn.KernelOptions(split_k=True, split_k_slices=s)
    split = dataclasses.replace(spec, opts=opts)
    try:
      kind = "direct" if plan.split_k_direct(split) else "ptr-array"
      if plan.split_k_reasons(split) or n // s < 64:
        continue
      split_loop = bench.stacked_loops(LAYERS, m, n, jnp.bfloat16, opts)
      out[f"split S={s} {kind}"] = bench._runner(split_loop["ours"], iters)
    except ValueError:
      continue
  out["xla"] = bench._runner(loops["xla"], iters)
  return out


def main():
  p = argparse.ArgumentParser()
  p.add_argument("--window", type=float, default=0.2)
  p.add_argument("--rounds", type=int, default=2)
  p.add_argument("shapes", nargs="*", default=SHAPES)
  a = p.parse_args()
  print(f"{jax.devices()[0].device_kind}, jax {jax.__version__}, "
        f"{LAYERS} layers per call, window {a.window} s, {a.rounds} rounds")
  for shape in a.shapes:
    m, n = (int(v) for v in shape.split(":"))
    gpu = jax.default_backend() == "gpu"
    iters = bench._iters(2.0 * m * n * n * LAYERS, gpu)
    runs = variants(m, n, iters)
    times = {k: [] for k in runs}
    names = list(runs)
    for r in range(a.rounds):
      for k in (names if r % 2 == 0 else names[::-1]):
        times[k].append(bench.sustained(runs[k], a.window))
    b_bytes = n * n * 2
    for k in names:
      us = statistics.median(times[k]) / (iters * LAYERS) * 1e6
      print(f"{m:5d}x{n}x{n} {k:40s} {us:9.2f} us/GEMM  "
            f"{b_bytes / us / 1e6:5.2f} TB/s of B", flush=True)


if __name__ == "__main__":
  main()
