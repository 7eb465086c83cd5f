"""The grouped kernel's tiles on MoE forwards (H200): jax_dynoff.ragged_dot
with each tile forced (KernelOptions(grouped_tile=...): plan.GROUPED_TILES;
the planner's choice is named, not timed again), beside lax.ragged_dot
and a dense GEMM of the same FLOPs, device-timed in one process
(bench.time_loops).
Usage: python benchmarks/moe_tile_ab.py            (the bench's moe cases)
       python benchmarks/moe_tile_ab.py --peers qwen3_30b_down,decode_e64
           (moe_peers.py's layer cases by name, uniform or --skewed groups;
           lax.ragged_dot left out above 2^35 masked FLOPs)
"""

import argparse

import jax.numpy as jnp
from jax import lax

import jax_dynoff as dyn
import bench  # benchmarks/bench.py, beside this script
import moe_peers  # benchmarks/moe_peers.py, beside this script
from jax_dynoff import plan as plan_lib

# lax.ragged_dot on a GPU is a masked dense product (E times the FLOPs):
# above this it is left out (DeepSeek-V3's layers would take seconds).
MAX_LAX_FLOPS = 2.0 ** 35


def _cases(peers, skewed):
  """(label, x, w, group sizes) per case."""
  if not peers:
    for E, T, d, f, empty in bench.MOE_CASES:
      x, w, gs, _ = bench.moe_operands(E, T, d, f, jnp.bfloat16, empty)
      yield f"E{E} T{T} {d}x{f}", x, w, gs
    return
  table = {c[0]: c for c in moe_peers.CASES}
  kind = "skewed" if skewed else "uniform"
  for name in peers:
    _, E, T, d, f = table[name]
    x, w, _, _ = bench.moe_operands(E, T, d, f, jnp.bfloat16)
    gs = jnp.asarray(moe_peers.group_sizes(kind, E, T), jnp.int32)
    yield f"{name} ({kind}, E{E} T{T} {d}x{f})", x, w, gs


def main(argv=None):
  p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  p.add_argument("--peers", default="",
                 help="comma-separated moe_peers.py case names")
  p.add_argument("--skewed", action="store_true",
                 help="with --peers: skewed group sizes (default uniform)")
  args = p.parse_args(argv)
  # Each loop runs back to back for a second per turn (bench.sustained):
  # the clocks settle at what it draws.
  bench.WINDOW_S = 1.0
  tiles = list(plan_lib.GROUPED_TILES)
  peers = [c for c in args.peers.split(",") if c]
  for label, x, w, gs in _cases(peers, args.skewed):
    E, d, f = w.shape
    T = x.shape[0]
    fwd = bench.moe_fwd_body
    y0 = jnp.zeros((T, f), x.dtype)

    def ours(tile):
      opts = dyn.KernelOptions(grouped_tile=tile)
      return bench.Loop(
          fwd(lambda a, b, g: dyn.ragged_dot(a, b, g, opts=opts)), y0,
          (x, w, gs))

    with_lax = 2.0 * T * d * f * E <= MAX_LAX_FLOPS
    loops = [ours(t) for t in tiles]
    if with_lax:
      loops.append(bench.Loop(fwd(lax.ragged_dot), y0, (x, w, gs)))
    loops.append(bench.Loop(bench.moe_dense_body, y0, (x, w[0])))
    times = bench.time_loops(loops, 5, 3)
    dn = times[-1]
    lx = times[len(tiles)] if with_lax else None
    planned = dyn.explain(dyn.ragged_dot, x, w, gs)[0]
    fl = 2.0 * T * d * f
    lax_text = f"lax {lx * 1e3:.1f} us, " if with_lax else "lax left out, "
    print(f"{label}: {lax_text}dense {dn * 1e3:.1f} us "
          f"({fl / dn / 1e9:.0f} TFLOP/s); planned: {planned}", flush=True)
    for t, ms in zip(tiles, times):
      lax_ratio = f"  lax/this {lx / ms:.2f}" if with_lax else ""
      print(f"  {t:8s} {ms * 1e3:7.1f} us  "
            f"{fl / ms / 1e9:5.0f} TFLOP/s  dense/this {dn / ms:.2f}"
            f"{lax_ratio}", flush=True)


if __name__ == "__main__":
  main()
