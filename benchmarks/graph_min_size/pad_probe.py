"""What XLA's minimum command-buffer size costs a loop of `gemm` calls at
XLA's default flags, measured by lifting the loop body over it.

jax 0.11.2's XLA makes a run of thunks a command buffer (a CUDA graph) only
from `xla_gpu_graph_min_graph_size` = 5 thunks up, counting the run's top
level (docs/cuda_graphs.md).  A body of one `gemm` call has 2-3 thunks, so
at the default flags it runs thunk by thunk from the host while XLA's own
loop, 5 thunks with its slice copies, runs as one graph.  This probe puts P
no-op FFI calls (noop.cc: command-buffer compatible, no kernel, a side
effect so that XLA keeps them) beside each `gemm` of a sweep pattern, or
beside each `window` for `cond` (whose branches XLA does not count), and
times the sweep's cell at the default flags with P = 0 and with the P
given, each against XLA's own loop (sweep.measure: checked, interleaved,
device-timed, kernels and graph launches per iteration from the profiler).
Then it times one jitted call dispatched from the host with P = 0 and with
P no-ops, since a no-op costs the host a thunk and its side effect takes
the call off JAX's fast dispatch path.

`--pure` pads with pure pass-throughs instead (noop.cc PassThrough: one
operand, its result aliased to it, no side effect): P of them after each
`gemm` on its result, or for `window` on its first traced start, so the
padded body depends on them and XLA keeps them.  Whether such a body
still becomes one graph, and whether the call keeps JAX's fast dispatch,
is what decides if the library could pad its own calls.

Not a product feature: the probe tells what a body graph would be worth at
the default flags, cell by cell, and what padding would cost where the
body is not in a loop.

    python benchmarks/graph_min_size/pad_probe.py OUT_DIR
        [--plan table:gemm:3,stacked:gemm:2,kv:gemm:3,cond:window:2]
        [--cells 1x512x1024,8x2048x2048,...] [--quick]

Writes OUT_DIR/pad_probe.json; needs a C++ compiler (c++ or g++) for the
no-op handler, built into OUT_DIR.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import json
import os
import pathlib
import shutil
import subprocess
import sys
import time

import jax
import jax.numpy as jnp

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
import bench  # noqa: E402  benchmarks/bench.py: run_record
import sweep  # noqa: E402  benchmarks/sweep.py: the patterns and measure
import jax_dynoff as dyn  # noqa: E402

TARGET = "jax_dynoff_probe_noop"
PASS_TARGET = "jax_dynoff_probe_pass_through"
DEFAULT_PLAN = "table:gemm:3,stacked:gemm:2,kv:gemm:3,cond:window:2"
# The nine cells of the bfloat16 sweep in the results this probe stands
# beside (benchmarks/results/2026-12-06-h100-f38a9e2/).
DEFAULT_CELLS = ("1x512x1024,8x2048x2048,16x4096x4096,32x768x1536,"
                 "64x1024x512,96x1536x768,128x512x2048,256x2048x2048,"
                 "512x2048x2048")


def build_noop(out_dir: str) -> str:
  """noop.cc as a shared library in out_dir; its path."""
  cxx = shutil.which("c++") or shutil.which("g++")
  if cxx is None:
    raise RuntimeError("no C++ compiler (c++ or g++) for noop.cc")
  lib = os.path.join(out_dir, "libnoop.so")
  subprocess.run([cxx, "-O2", "-std=c++17", "-shared", "-fPIC", "-w", "-I",
                  jax.ffi.include_dir(), str(HERE / "noop.cc"), "-o", lib],
                 check=True)
  return lib


def register(lib_path: str) -> None:
  lib = ctypes.cdll.LoadLibrary(lib_path)
  for platform in ("CUDA", "cpu"):
    jax.ffi.register_ffi_target(
        TARGET, jax.ffi.pycapsule(lib.JaxDynoffProbeNoop), platform=platform)
    jax.ffi.register_ffi_target(
        PASS_TARGET, jax.ffi.pycapsule(lib.JaxDynoffProbePassThrough),
        platform=platform)


def noop() -> None:
  jax.ffi.ffi_call(TARGET, (), has_side_effect=True)()


def pass_through(x):
  """x again, through one pure no-op call (its result aliases x)."""
  return jax.ffi.ffi_call(PASS_TARGET, jax.ShapeDtypeStruct(x.shape, x.dtype),
                          input_output_aliases={0: 0})(x)


# Pure pass-throughs (--pure) instead of side-effecting no-ops.
PURE = [False]


# How many no-ops go beside each gemm / window call (set per measurement).
PAD = {"gemm": 0, "window": 0}


@contextlib.contextmanager
def padding():
  """Within: dyn.gemm and dyn.window (the patterns call them through the
  module) first add PAD[name] no-op calls (--pure: pass their result, or
  the window's first traced start, through as many); restored after."""
  real = {name: getattr(dyn, name) for name in PAD}

  def wrap(name):
    def padded(*args, **kwargs):
      if not PURE[0]:
        for _ in range(PAD[name]):
          noop()
        return real[name](*args, **kwargs)
      if name == "window" and PAD[name]:  # its first traced start
        x, starts, *rest = args
        starts = list(starts)
        j = next((j for j, v in enumerate(starts)
                  if isinstance(v, jax.core.Tracer)), None)
        if j is not None:
          v = jnp.asarray(starts[j])
          for _ in range(PAD[name]):
            v = pass_through(v)
          starts[j] = v
        return real[name](x, tuple(starts), *rest, **kwargs)
      y = real[name](*args, **kwargs)
      for _ in range(PAD[name]):
        y = pass_through(y)
      return y
    return padded
  try:
    for name in PAD:
      setattr(dyn, name, wrap(name))
    yield
  finally:
    for name, fn in real.items():
      setattr(dyn, name, fn)
    PAD.update(gemm=0, window=0)


def dispatch_us(pad: int, calls: int) -> float:
  """Host time per call of one jitted 8x2048x2048 gemm (P no-ops beside
  it), dispatched back to back, blocking on the last."""
  a = jax.random.normal(jax.random.key(0), (8, 2048), jnp.bfloat16)
  b = jax.random.normal(jax.random.key(1), (2048, 2048), jnp.bfloat16)
  PAD["gemm"] = pad
  f = jax.jit(lambda a, b: dyn.gemm(a, b))
  f(a, b).block_until_ready()
  t0 = time.perf_counter()
  for _ in range(calls):
    y = f(a, b)
  y.block_until_ready()
  PAD["gemm"] = 0
  return 1e6 * (time.perf_counter() - t0) / calls


def main(argv=None) -> int:
  ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  ap.add_argument("out_dir")
  ap.add_argument("--plan", default=DEFAULT_PLAN,
                  help="pattern:gemm|window:P, comma-separated")
  ap.add_argument("--cells", default=DEFAULT_CELLS, help="MxNxK,...")
  ap.add_argument("--repeats", type=int, default=3)
  ap.add_argument("--window", type=float, default=0.1)
  ap.add_argument("--quick", action="store_true")
  ap.add_argument("--setting", default="default", choices=sweep.SETTINGS,
                  help="XLA's flags: its defaults, or body graphs (what a "
                  "pad costs where the body is a graph anyway)")
  ap.add_argument("--pure", action="store_true",
                  help="pure pass-throughs instead of side-effecting no-ops")
  a = ap.parse_args(argv)
  PURE[0] = a.pure
  plan = []
  for item in a.plan.split(","):
    pattern, where, pad = item.split(":")
    if pattern not in sweep.BUILDERS or where not in PAD or int(pad) < 1:
      ap.error(f"bad --plan item {item!r}")
    plan.append((pattern, where, int(pad)))
  cells = [tuple(int(v) for v in c.split("x")) for c in a.cells.split(",")]
  os.makedirs(a.out_dir, exist_ok=True)
  register(build_noop(a.out_dir))
  rows = []
  with padding():
    for pattern, where, pad in plan:
      for m, n, k in cells:
        for p in (0, pad):
          PAD[where] = p
          c = sweep.measure(pattern, a.setting, "bfloat16", m, n, k,
                            a.repeats, a.window, a.quick)
          PAD[where] = 0
          c.update(pad=p, pad_where=where, pure=a.pure)
          rows.append(c)
          kind = "p" if a.pure else ""
          print(f"{pattern:8} pad {p}{kind} {m:4}x{n}x{k}: ours "
                f"{c['ours_us_per_call']:7.2f} xla "
                f"{c['xla_us_per_call']:7.2f} us/call ratio "
                f"{c['ratio']:.2f} graphs/iter "
                f"{sweep._fmt(c['ours_graphs_per_iter'])} / "  # pylint: disable=protected-access
                f"{sweep._fmt(c['xla_graphs_per_iter'])}"  # pylint: disable=protected-access
                + ("" if c["ok"] else " ERROR: does not match XLA's loop"),
                flush=True)
    calls = 0 if a.setting != "default" else 20 if a.quick else 3000
    host = ({p: [dispatch_us(p, calls) for _ in range(2)] for p in (0, 3, 4)}
            if calls else {})
  for p, us in host.items():
    print(f"one jitted call, {p} no-ops: " + ", ".join(f"{u:.1f}" for u in us)
          + " us a call (host dispatch)", flush=True)
  with open(os.path.join(a.out_dir, "pad_probe.json"), "w") as f:
    json.dump(dict(
        **bench.run_record("benchmarks/graph_min_size/pad_probe.py", argv),
        cells=rows, dispatch_us=host), f, indent=1)
  return 0 if all(c["ok"] for c in rows) else 1


if __name__ == "__main__":
  sys.exit(main())
