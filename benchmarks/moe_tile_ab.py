"""The grouped kernel's tiles on the moe scenario's forward (H200):
jax_dynoff.ragged_dot with KernelOptions(tile="medium") (128x128
ping-pong) against tile="large" (256x128 cooperative, cluster 1x2: the
default for bfloat16 NN),
beside lax.ragged_dot and a dense GEMM of the same FLOPs, device-timed in
one process (bench.time_loops).  Usage: python benchmarks/moe_tile_ab.py
"""

import jax.numpy as jnp
from jax import lax

import jax_dynoff as dyn
from jax_dynoff import bench


def main():
  large = dyn.KernelOptions(tile="large")
  medium = dyn.KernelOptions(tile="medium")
  for E, T, d, f, empty in bench.MOE_CASES:
    x, w, gs, _ = bench.moe_operands(E, T, d, f, jnp.bfloat16, empty)

    fwd, dense = bench.moe_fwd_body, bench.moe_dense_body
    y0 = jnp.zeros((T, f), x.dtype)
    loops = [bench.Loop(fwd(lambda a, b, g: dyn.ragged_dot(a, b, g, opts=medium)),
                        y0, (x, w, gs)),
             bench.Loop(fwd(lambda a, b, g: dyn.ragged_dot(a, b, g, opts=large)),
                        y0, (x, w, gs)),
             bench.Loop(fwd(lax.ragged_dot), y0, (x, w, gs)),
             bench.Loop(dense, y0, (x, w[0]))]
    med, lg, lx, dn = bench.time_loops(loops, 5, 3)
    fl = 2.0 * T * d * f
    tf = lambda t: fl / t / 1e9
    print(f"E{E} T{T} {d}x{f}: medium {med*1e3:7.1f} us ({tf(med):5.0f} TFLOP/s)"
          f"  large {lg*1e3:7.1f} us ({tf(lg):5.0f})  lax {lx*1e3:7.1f} us"
          f"  dense {dn*1e3:7.1f} us ({tf(dn):5.0f}); dense/medium "
          f"{dn/med:.2f}, dense/large {dn/lg:.2f}", flush=True)


if __name__ == "__main__":
  main()
