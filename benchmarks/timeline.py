"""GPU kernel timeline of bench cases, from a JAX profiler trace (CUPTI).

Where a bench case's time per call goes on the device: which kernels each
loop iteration runs (ours: XLA's start fusions, the pointer kernel, the
CUTLASS GEMM; XLA: cuBLAS and its copies), how long each takes, and the
idle gaps between them.  The device image has ncu but no nsys; the trace
that `jax.profiler` writes is read back with `jax.profiler.ProfileData`.

    python benchmarks/timeline.py [--iters N] [--warmup S] [--host] [--rounds R]
                                  [plain M N K | loop | cond | stacked L M N |
                                   moe E T D F [uniform|skewed]] ...
    XLA_FLAGS="$(python -c 'import jax_dynoff as d; print(d.cuda_graph_flags(whole_loops=True))')" \\
        python benchmarks/timeline.py plain 2048 2048 2048

--iters N: loop iterations per traced call of `plain` (default 20; the
bench runs ~2e13 FLOPs per call, 145 at 4096^3).  --warmup S: run each
side's loop for S seconds before its trace (default: one call), so the
trace sees the clocks of a sustained load, where the bench times: an
H200's clocks drop by ~10% within seconds of dense GEMMs.  --host: also
where the call's wall time goes outside the device's span (`call_report`).
--rounds R: before and after the traces, time each side's compiled loop in
short turns (wall time of one blocking call / iterations, the sides taking
turns, R rounds), as the bench did before its sustained windows (before
373d324), in the same process, so short calls' figures and the trace's can be
told apart (`bench_rounds`).

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
import time

import jax
import jax.numpy as jnp
from jax.profiler import ProfileData

import bench  # benchmarks/bench.py, beside this script


_CALL = "timeline_call"  # the annotation around the traced call


def trace(fn, args, warmup_s=0.0):
  """One run of the compiled `fn` (after at least one call and `warmup_s`
  seconds of calls) under the profiler: (device events, host events, the
  call's (start_ns, end_ns)); events are (name, start_ns, dur_ns), device
  ones the kernels / copies of the streams, sorted by start."""
  t0 = time.perf_counter()
  jax.block_until_ready(fn(*args))
  while time.perf_counter() - t0 < warmup_s:
    jax.block_until_ready(fn(*args))
  d = tempfile.mkdtemp(prefix="jdo_trace_")
  jax.profiler.start_trace(d)
  with jax.profiler.TraceAnnotation(_CALL):
    jax.block_until_ready(fn(*args))
  jax.profiler.stop_trace()
  path = glob.glob(f"{d}/**/*.xplane.pb", recursive=True)[0]
  events, host, call = [], [], None
  for plane in ProfileData.from_file(path).planes:
    for line in plane.lines:
      if plane.name.startswith("/device:GPU"):
        # Stream lines carry the activity; "XLA Ops"/"XLA Modules" and the
        # like repeat it as annotations.
        if line.name.startswith("Stream"):
          events += [(e.name, e.start_ns, e.duration_ns) for e in line.events]
      elif plane.name.startswith("/host"):
        for e in line.events:
          if e.name == _CALL:
            call = (e.start_ns, e.start_ns + e.duration_ns)
          else:
            host.append((e.name, e.start_ns, e.duration_ns))
  return sorted(events, key=lambda e: e[1]), host, call


def call_report(events, host, call, top=12):
  """Where a call's wall time goes outside the device's span: how long
  after the call the first device event starts and how long before the call
  returns the last one ends (host dispatch, command-buffer updates, waits),
  and the host's longest events inside the call."""
  if call is None or not events:
    return ["no call annotation or no device events in the trace"]
  first = events[0][1]
  last = max(s + d for _, s, d in events)
  out = [f"call {(call[1] - call[0]) / 1e3:.1f} us; device span "
         f"{(last - first) / 1e3:.1f} us, starting {(first - call[0]) / 1e3:.1f}"
         f" us into the call, ending {(call[1] - last) / 1e3:.1f} us before "
         "it returns"]
  by = collections.defaultdict(list)
  for name, s, d in host:
    if call[0] <= s <= call[1]:
      by[name[:80]].append((d, s))
  for name, ds in sorted(by.items(), key=lambda kv: -sum(d for d, _ in kv[1]))[:top]:
    out.append(f"host {len(ds):6d}x {sum(d for d, _ in ds) / 1e3:9.1f} us, first "
               f"at {(min(s for _, s in ds) - call[0]) / 1e3:9.1f} us: {name}")
  return out


def per_call_host(host, call, calls, top=16):
  """The host events that run once or more per GEMM call (thunks, launches,
  the custom call's handler), each with its count per call and median and
  mean duration: what the host spends per call, by name."""
  if call is None:
    return []
  by = collections.defaultdict(list)
  for name, s, d in host:
    if call[0] <= s <= call[1]:
      by[name[:90]].append(d / 1e3)
  rows = [(name, ds) for name, ds in by.items() if len(ds) >= calls]
  rows.sort(key=lambda kv: -sum(kv[1]))
  return [f"per call {len(ds) / calls:5.2f}x median {statistics.median(ds):7.2f}"
          f" us mean {statistics.mean(ds):7.2f} us: {name}"
          for name, ds in rows[:top]]


def bench_rounds(sides, iters, rounds):
  """Each side's time per iteration (us) in short turns: wall time of one
  blocking call of the compiled loop, the sides taking turns (order
  reversed every other round), one line per side with every round."""
  times = {side: [] for side in sides}
  names = list(sides)
  for r in range(rounds):
    for side in (names if r % 2 == 0 else names[::-1]):
      f, args = sides[side]
      t0 = time.perf_counter()
      jax.block_until_ready(f(*args))
      times[side].append((time.perf_counter() - t0) / iters * 1e6)
  return [f"bench-style {side}: median {statistics.median(ts):8.2f} us/iter; "
          f"rounds {' '.join(f'{t:.2f}' for t in ts)}"
          for side, ts in times.items()]


def summarize(label, events, iters) -> list[str]:
  """The lines of one side's timeline: time per iteration, busy fraction,
  events and median gap, then per kernel name its count per iteration and
  mean duration, then where the idle time sits (idle_report)."""
  if not events:
    return [f"{label}: no GPU events in the trace"]
  t0 = events[0][1]
  t1 = max(s + d for _, s, d in events)
  span = (t1 - t0) / 1e3
  busy = sum(d for _, _, d in events) / 1e3
  gaps = [b[1] - (a[1] + a[2]) for a, b in zip(events, events[1:])]
  out = [f"{label}: {span / iters:8.2f} us/iter from the trace, "
         f"busy {100 * busy / span:5.1f}%, {len(events) / iters:.1f} "
         f"events/iter, median gap {statistics.median(gaps) / 1e3 if gaps else 0:.2f} us"]
  by = collections.defaultdict(list)
  for name, _, d in events:
    by[name].append(d / 1e3)
  for name, ds in sorted(by.items(), key=lambda kv: -sum(kv[1])):
    out.append(f"    {len(ds) / iters:5.2f}x {statistics.mean(ds):8.2f} us  "
               f"{name[:110]}")
  return out + ["    " + line for line in idle_report(events, iters)]


def idle_report(events, iters, min_gap_ns=1000):
  """Where the idle device time sits: the gaps of at least `min_gap_ns`
  between one event's end and the next one's start, summed per iteration
  and attributed to the event that ends each gap (the one the device waited
  for), largest first, with the single largest gap (a one-off at the start
  of the run, e.g. the host dispatching the program, shows there)."""
  waits = collections.defaultdict(list)
  for a, b in zip(events, events[1:]):
    gap = b[1] - (a[1] + a[2])
    if gap >= min_gap_ns:
      waits[b[0]].append(gap / 1e3)
  out = []
  for name, gs in sorted(waits.items(), key=lambda kv: -sum(kv[1])):
    out.append(f"idle before {name[:60]}: {sum(gs) / iters:7.2f} us/iter in "
               f"{len(gs)} gaps, largest {max(gs):.2f} us")
  return out


def plain(m, n, k, iters=20):
  loops = bench.plain_loops(m, n, k, jnp.bfloat16)
  return {side: bench.compile_loop(l, iters) for side, l in loops.items()}, iters


def loop(L=64, m=128, n=1024, iters=4):
  """The bench's `loop` scenario: GEMM calls per iteration of the outer loop = L."""
  loops = bench.small_loop_loops(L, m, n)
  return ({side: bench.compile_loop(loops[side], iters)
           for side in ("ours", "xla")},
          iters * L)


def stacked(L, m, n, iters=2):
  """The stacked-weights scenario: GEMM calls per iteration = L."""
  loops = bench.stacked_loops(L, m, n, jnp.bfloat16)
  return ({side: bench.compile_loop(l, iters) for side, l in loops.items()},
          iters * L)


def cond(L=16, m=512, n=4096, iters=2):
  """The cond scenario: GEMM calls per iteration = L."""
  loops = bench.cond_loops(L, m, n, jnp.bfloat16)
  return ({side: bench.compile_loop(l, iters) for side, l in loops.items()},
          iters * L)


def moe(experts, tokens, d, f, iters=5, kind="uniform"):
  """ragged_dot over `experts` groups of (tokens, d) @ (d, f) (the forward
  loop of benchmarks/moe_peers.py: the call and everything it brings with
  it, the zeroed out included), beside one dense jnp.dot of the same
  FLOPs.  `kind`: moe_peers' group sizes, "uniform" or "skewed"."""
  import moe_peers  # pylint: disable=g-import-not-at-top
  import jax_dynoff as dyn  # pylint: disable=g-import-not-at-top
  kx, kw = jax.random.split(jax.random.key(0))
  x = bench._rand(kx, (tokens, d), jnp.bfloat16)  # pylint: disable=protected-access
  w = bench._rand(kw, (experts, d, f), jnp.bfloat16, d ** -0.5)  # pylint: disable=protected-access
  g = jnp.asarray(moe_peers.group_sizes(kind, experts, tokens))
  loops = {"ours": moe_peers._fwd_loop(  # pylint: disable=protected-access
      lambda x, w, g: dyn.ragged_dot(x, w, g), x, w, g),
           "dense": bench.Loop(bench.moe_dense_body,
                               jnp.zeros((tokens, f), jnp.bfloat16),
                               (x, w[0]))}
  return {side: bench.compile_loop(l, iters) for side, l in loops.items()}, iters


def main(argv):
  cases = []
  iters, warmup_s, show_host, rounds = 20, 0.0, False, 0
  while argv:
    name = argv.pop(0)
    if name == "--host":
      show_host = True
    elif name == "--iters":
      iters = int(argv.pop(0))
    elif name == "--rounds":
      rounds = int(argv.pop(0))
    elif name == "--warmup":
      warmup_s = float(argv.pop(0))
    elif name == "plain":
      dims = [int(argv.pop(0)) for _ in range(3)]
      cases.append((f"plain {'x'.join(map(str, dims))}", plain(*dims, iters)))
    elif name == "loop":
      cases.append(("loop L64 128x1024x1024", loop()))
    elif name == "cond":
      cases.append(("cond L16 512x4096x4096", cond()))
    elif name == "moe":
      e, t, d, f = (int(argv.pop(0)) for _ in range(4))
      kind = "uniform"
      if argv and argv[0] in ("uniform", "skewed"):
        kind = argv.pop(0)
      cases.append((f"moe E{e} {t}x{d}->{f} {kind}",
                    moe(e, t, d, f, kind=kind)))
    elif name == "stacked":
      L, m, n = (int(argv.pop(0)) for _ in range(3))
      cases.append((f"stacked L{L} {m}x{n}x{n}", stacked(L, m, n)))
    else:
      raise SystemExit(f"unknown case {name!r}")
  print(f"jax {jax.__version__}, {jax.devices()[0]}, warm-up {warmup_s} s, "
        "per GEMM call:")
  for label, (sides, n) in cases:
    if rounds:
      for line in bench_rounds(sides, n, rounds):
        print(f"{label} before the traces, {line}")
    for side, (f, args) in sides.items():
      events, host, call = trace(f, args, warmup_s)
      for line in summarize(f"{label} {side} ({n} calls)", events, n):
        print(line)
      if show_host:
        for line in call_report(events, host, call) + per_call_host(
            host, call, n):
          print("    " + line)
    if rounds:
      for line in bench_rounds(sides, n, rounds):
        print(f"{label} after the traces, {line}")


if __name__ == "__main__":
  main(sys.argv[1:] or ["plain", "2048", "2048", "2048", "plain", "128",
                        "4096", "4096", "loop"])
