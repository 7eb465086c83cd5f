"""GPU kernel timeline of bench cases, from a JAX profiler trace (CUPTI).

Where a bench case's time per call goes on the device: which kernels each
loop iteration runs (ours: XLA's start fusions, the pointer kernel, the
CUTLASS GEMM; XLA: cuBLAS and its copies), how long each takes, and the
idle gaps between them.  The device image has ncu but no nsys; the trace
that `jax.profiler` writes is read back with `jax.profiler.ProfileData`.

    python benchmarks/timeline.py [plain M N K | loop | slices L M] ...
    XLA_FLAGS="$(python -c 'import jax_dynoff as d; print(d.cuda_graph_flags())')" \\
        python benchmarks/timeline.py plain 2048 2048 2048

Prints, per case and side (ours / xla): the time per iteration from the
trace (first to last kernel / iterations), the busy fraction, and per
kernel name its count per iteration and mean duration.
"""

from __future__ import annotations

import collections
import glob
import statistics
import sys
import tempfile

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.profiler import ProfileData

import jax_dynoff as dyn
from jax_dynoff import bench


def gpu_events(fn, args):
  """[(name, start_ns, dur_ns)] of the device's kernels / copies for one run
  of the compiled `fn` (warmed up first)."""
  jax.block_until_ready(fn(*args))
  d = tempfile.mkdtemp(prefix="jdo_trace_")
  jax.profiler.start_trace(d)
  jax.block_until_ready(fn(*args))
  jax.profiler.stop_trace()
  path = glob.glob(f"{d}/**/*.xplane.pb", recursive=True)[0]
  events = []
  for plane in ProfileData.from_file(path).planes:
    if not plane.name.startswith("/device:GPU"):
      continue
    for line in plane.lines:
      # Stream lines carry the activity; "XLA Ops"/"XLA Modules" and the
      # like repeat it as annotations.
      if not line.name.startswith("Stream"):
        continue
      events += [(e.name, e.start_ns, e.duration_ns) for e in line.events]
  return sorted(events, key=lambda e: e[1])


def summarize(label, events, iters):
  if not events:
    print(f"{label}: no GPU events in the trace")
    return
  t0 = events[0][1]
  t1 = max(s + d for _, s, d in events)
  span = (t1 - t0) / 1e3
  busy = sum(d for _, _, d in events) / 1e3
  gaps = [b[1] - (a[1] + a[2]) for a, b in zip(events, events[1:])]
  print(f"{label}: {span / iters:8.2f} us/iter from the trace, "
        f"busy {100 * busy / span:5.1f}%, {len(events) / iters:.1f} "
        f"events/iter, median gap {statistics.median(gaps) / 1e3 if gaps else 0:.2f} us")
  by = collections.defaultdict(list)
  for name, _, d in events:
    by[name].append(d / 1e3)
  for name, ds in sorted(by.items(), key=lambda kv: -sum(kv[1])):
    print(f"    {len(ds) / iters:5.2f}x {statistics.mean(ds):8.2f} us  "
          f"{name[:110]}")


def compiled_loop(body, carry, consts, iters):
  def loop(c, consts):
    return lax.fori_loop(0, iters, lambda i, c: body(i, c, *consts), c)
  f = jax.jit(loop).lower(carry, consts).compile()
  return f, (carry, consts)


def plain(m, n, k, iters=20):
  dtype = jnp.bfloat16
  ka, kb, kd = jax.random.split(jax.random.key(0), 3)
  pad = 128
  a_big = bench._rand(ka, (m + pad, k), dtype)
  b = bench._rand(kb, (k, n), dtype)
  d_big = bench._rand(kd, (m + pad, n), dtype)
  offs = jnp.asarray([64, 128], jnp.int32)

  def ours(i, carry, a_big, b):  # the same body as bench.plain
    d, offs = carry
    off = offs[i % 2]
    d = dyn.gemm(dyn.window(a_big, (off, 0), (m, k)), b,
                 out=dyn.window(d, (offs[1 - i % 2], 0), (m, n)))
    return d, offs

  def xla(i, d, a, b):
    aa, bb, _ = lax.optimization_barrier((a, b, i))
    return jnp.dot(aa, bb, preferred_element_type=dtype)

  return {"ours": compiled_loop(ours, (d_big, offs), (a_big, b), iters),
          "xla": compiled_loop(xla, jnp.zeros((m, n), dtype),
                               (a_big[:m], b), iters)}, iters


def loop(L=64, m=128, n=1024, iters=4):
  """Issue 4's loop: L GEMMs m x n x n into row slices at device offsets."""
  dtype = jnp.bfloat16
  kx, kw, kb = jax.random.split(jax.random.key(1), 3)
  x = bench._rand(kx, (m, n), dtype)
  w = bench._rand(kw, (L, n, n), dtype, 1.0 / np.sqrt(n))
  buf = bench._rand(kb, (L * m, n), dtype)
  rows = jnp.asarray(np.random.default_rng(0).permutation(L) * m, jnp.int32)

  def ours(j, carry, x, w):
    buf, rows = carry
    def body(i, buf):
      return dyn.gemm(x, dyn.window(w, (i, 0, 0), (n, n)),
                      out=dyn.window(buf, (rows[i], 0), (m, n)))
    return lax.fori_loop(0, L, body, buf), rows

  def xla(j, carry, x, w):
    buf, rows = carry
    def body(i, buf):
      wi = lax.dynamic_index_in_dim(w, i, keepdims=False)
      y = jnp.dot(x, wi, preferred_element_type=jnp.float32).astype(dtype)
      return lax.dynamic_update_slice(buf, y, (rows[i], 0))
    return lax.fori_loop(0, L, body, buf), rows

  return {"ours": compiled_loop(ours, (buf, rows), (x, w), iters),
          "xla": compiled_loop(xla, (buf, rows), (x, w), iters)}, iters * L


def main(argv):
  cases = []
  while argv:
    name = argv.pop(0)
    if name == "plain":
      dims = [int(argv.pop(0)) for _ in range(3)]
      cases.append((f"plain {'x'.join(map(str, dims))}", plain(*dims)))
    elif name == "loop":
      cases.append(("loop L64 128x1024x1024", loop()))
    else:
      raise SystemExit(f"unknown case {name!r}")
  print(f"jax {jax.__version__}, {jax.devices()[0]}, per GEMM call:")
  for label, (sides, iters) in cases:
    for side, (f, args) in sides.items():
      summarize(f"{label} {side}", gpu_events(f, args), iters)


if __name__ == "__main__":
  main(sys.argv[1:] or ["plain", "2048", "2048", "2048", "plain", "128",
                        "4096", "4096", "loop"])
