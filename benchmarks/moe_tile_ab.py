"""The grouped kernel's tiles on the moe scenario's forward (H200):
jax_dynoff.ragged_dot with each tile forced (KernelOptions(grouped_tile=
...): plan.GROUPED_TILES; the planner's choice is named, not timed again),
beside lax.ragged_dot and a dense GEMM of the same FLOPs, device-timed in
one process (bench.time_loops).
Usage: python benchmarks/moe_tile_ab.py
"""

import jax.numpy as jnp
from jax import lax

import jax_dynoff as dyn
import bench  # benchmarks/bench.py, beside this script
from jax_dynoff import plan as plan_lib


def main():
  # Each loop runs back to back for a second per turn (bench.sustained):
  # the clocks settle at what it draws.
  bench.WINDOW_S = 1.0
  tiles = list(plan_lib.GROUPED_TILES)
  for E, T, d, f, empty in bench.MOE_CASES:
    x, w, gs, _ = bench.moe_operands(E, T, d, f, jnp.bfloat16, empty)
    fwd = bench.moe_fwd_body
    y0 = jnp.zeros((T, f), x.dtype)

    def ours(tile):
      opts = dyn.KernelOptions(grouped_tile=tile)
      return bench.Loop(
          fwd(lambda a, b, g: dyn.ragged_dot(a, b, g, opts=opts)), y0,
          (x, w, gs))

    loops = [ours(t) for t in tiles]
    loops += [bench.Loop(fwd(lax.ragged_dot), y0, (x, w, gs)),
              bench.Loop(bench.moe_dense_body, y0, (x, w[0]))]
    times = bench.time_loops(loops, 5, 3)
    lx, dn = times[-2:]
    planned = dyn.explain(dyn.ragged_dot, x, w, gs)[0]
    fl = 2.0 * T * d * f
    print(f"E{E} T{T} {d}x{f}: lax {lx * 1e3:.1f} us, dense {dn * 1e3:.1f} us "
          f"({fl / dn / 1e9:.0f} TFLOP/s); planned: {planned}", flush=True)
    for t, ms in zip(tiles, times):
      print(f"  {t:8s} {ms * 1e3:7.1f} us  "
            f"{fl / ms / 1e9:5.0f} TFLOP/s  dense/this {dn / ms:.2f}  "
            f"lax/this {lx / ms:.2f}", flush=True)


if __name__ == "__main__":
  main()
