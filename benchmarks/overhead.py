"""Fixed cost per call vs cost per iteration of the bench's loops.

The bench times one blocking call of a jitted loop of `iters` iterations and
divides by `iters`, so whatever a call costs once (host dispatch, building
or updating command buffers, copies of the carry, the first launch) is
spread over the iterations.  Timing each side at `iters` and at 2 * `iters`
separates the two:  T(n) = fixed + n * per_iter.

    python benchmarks/overhead.py [M N K] ...     (default: the plain sizes)

Prints per case and side the fixed cost (ms per call), the per-iteration
cost (us), and the bench's figure at `iters` (ms per iteration); then the
thunk sequence XLA runs for the `ours` loop (kCommandBuffer: a CUDA graph)
and, from a profiler trace of one call, the host's longest events in it.
"""

from __future__ import annotations

import collections
import glob
import statistics
import sys
import tempfile

import jax
import jax.numpy as jnp
from jax.profiler import ProfileData

from jax_dynoff import bench, graphs


def fit(m, n, k, dtype=jnp.bfloat16, repeats=5):
  loops = bench.plain_loops(m, n, k, dtype)
  iters = bench._iters(2.0 * m * n * k, True)
  runners = {(side, it): bench._runner(loops[side], it)
             for side in ("ours", "xla") for it in (iters, 2 * iters)}
  times = collections.defaultdict(list)
  for _ in range(repeats):  # interleaved: every variant under the same clocks
    for key, run in runners.items():
      times[key].append(run())
  med = {key: statistics.median(t) for key, t in times.items()}
  print(f"plain {m}x{n}x{k} {jnp.dtype(dtype).name}, iters {iters} / "
        f"{2 * iters}:")
  for side in ("ours", "xla"):
    t1, t2 = med[(side, iters)], med[(side, 2 * iters)]
    per_iter = (t2 - t1) / iters
    fixed = t1 - iters * per_iter
    print(f"  {side:4s}: fixed {fixed * 1e3:7.3f} ms per call, "
          f"{per_iter * 1e6:8.2f} us per iteration; bench figure "
          f"{t1 / iters * 1e3:.4f} ms")
  return loops, iters


def host_events(fn, args, top=25):
  """The longest host events (TraceMe / CUDA API) of one traced call."""
  jax.block_until_ready(fn(*args))
  d = tempfile.mkdtemp(prefix="jdo_trace_")
  jax.profiler.start_trace(d)
  jax.block_until_ready(fn(*args))
  jax.profiler.stop_trace()
  path = glob.glob(f"{d}/**/*.xplane.pb", recursive=True)[0]
  host, first_gpu = [], None
  for plane in ProfileData.from_file(path).planes:
    for line in plane.lines:
      for e in line.events:
        if plane.name.startswith("/device:GPU"):
          if line.name.startswith("Stream"):
            first_gpu = e.start_ns if first_gpu is None else min(first_gpu,
                                                                 e.start_ns)
        elif plane.name.startswith("/host"):
          host.append((e.name, e.start_ns, e.duration_ns, line.name))
  if not host:
    print("  no host events in the trace")
    return
  t0 = min(s for _, s, _, _ in host)
  if first_gpu is not None:
    print(f"  first device event {(first_gpu - t0) / 1e3:.1f} us after the "
          "first host event")
  by = collections.defaultdict(list)
  for name, s, dur, _ in host:
    by[name[:90]].append((dur, s))
  rows = sorted(by.items(), key=lambda kv: -sum(d for d, _ in kv[1]))[:top]
  for name, ds in rows:
    print(f"  {len(ds):6d}x total {sum(d for d, _ in ds) / 1e3:9.1f} us, "
          f"first at {(min(s for _, s in ds) - t0) / 1e3:9.1f} us  {name}")


def main(argv):
  dims = [int(x) for x in argv] or [4096, 4096, 4096, 2048, 2048, 2048,
                                    128, 4096, 4096]
  print(f"jax {jax.__version__}, {jax.devices()[0]}")
  for i in range(0, len(dims), 3):
    loops, iters = fit(*dims[i:i + 3])
    for side in ("ours", "xla"):
      f, args = bench.compile_loop(loops[side], iters)
      print(f"  {side} thunks:")
      def run_loop(c, consts, side=side):
        return jax.lax.fori_loop(
            0, iters, lambda j, c: loops[side].body(j, c, *consts), c)
      report = graphs.check_capture(run_loop, loops[side].carry,
                                    loops[side].consts)
      for line in report.text.splitlines()[:40]:
        print("    " + line)
      print(f"  {side} host events of one call:")
      host_events(f, args)


if __name__ == "__main__":
  main(sys.argv[1:])
