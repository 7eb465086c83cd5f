"""Where the 64-expert moe case loses against a dense GEMM (H200): the
grouped kernel on one shape, (16384 tokens, 2048 -> 2048, 64 experts),
with the groups' rows skewed (the bench's sizes), uniform (64 x 256: no
padded rows), in one group (the other 63 empty) and in 8 groups of 2048,
beside a dense GEMM of the same FLOPs; every grouped tile.
Usage: python benchmarks/moe_groups_probe.py
"""

import jax.numpy as jnp

import jax_dynoff as dyn
import bench  # benchmarks/bench.py, beside this script
from jax_dynoff import plan as plan_lib


def main():
  # Each loop runs back to back for a second per turn (bench.sustained):
  # the clocks settle at what it draws.
  bench.WINDOW_S = 1.0
  E, T, d, f = 64, 16384, 2048, 2048
  x, w, _, _ = bench.moe_operands(E, T, d, f, jnp.bfloat16, 1)
  sizes = bench.moe_probe_sizes(E, T, 1)

  def fwd(opts):
    return bench.moe_fwd_body(
        lambda a, b, g: dyn.ragged_dot(a, b, g, opts=opts))

  dense = bench.moe_dense_body
  y0 = jnp.zeros((T, f), x.dtype)
  loops, names = [bench.Loop(dense, y0, (x, w[0]))], ["dense"]
  for name, s in sizes.items():
    for tile in plan_lib.GROUPED_TILES:
      loops.append(bench.Loop(fwd(dyn.KernelOptions(grouped_tile=tile)), y0,
                              (x, w, jnp.asarray(s))))
      names.append(f"{name}, {tile}")
  times = bench.time_loops(loops, 5, 2)
  fl = 2.0 * T * d * f
  for n, t in zip(names, times):
    print(f"{n:20s} {t * 1e3:7.1f} us  {fl / t / 1e9:5.0f} TFLOP/s  "
          f"dense/this {times[0] / t:.2f}", flush=True)


if __name__ == "__main__":
  main()
