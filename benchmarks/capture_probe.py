"""Which loop bodies XLA captures into command buffers, ours beside XLA's.

For the bench's loop, cond and stacked scenarios, compiles each side's
loop under the XLA flags in force (run it with none: XLA's defaults) and
prints the thunk sequence XLA runs (kCommandBuffer where a body is one
graph), with the number of thunks per while body.  With
TF_CPP_MIN_LOG_LEVEL=0 TF_CPP_VMODULE=command_buffer_conversion_pass=2
XLA logs why a sequence was or was not converted.

    python benchmarks/capture_probe.py [loop] [cond] [stacked]
"""

from __future__ import annotations

import sys

import jax
import jax.numpy as jnp

import jax_dynoff as dyn
import bench  # benchmarks/bench.py, beside this script


def scenarios():
  return {"loop": lambda: bench.small_loop_loops(64, 128, 1024),
          "cond": lambda: bench.cond_loops(16, 512, 4096, jnp.bfloat16),
          "stacked": lambda: bench.stacked_loops(32, 16, 4096, jnp.bfloat16)}


def main(argv):
  names = argv or list(scenarios())
  print(f"jax {jax.__version__}, {jax.devices()[0]}")
  for name in names:
    loops = scenarios()[name]()
    for side in ("ours", "xla"):
      loop = loops[side]

      def run_loop(c, consts, loop=loop):
        return jax.lax.fori_loop(0, 4, lambda i, c: loop.body(i, c, *consts),
                                 c)
      rep = dyn.check_capture(run_loop, loop.carry, loop.consts)
      print(f"=== {name} {side}: captured {rep.captured}, uncaptured "
            f"{rep.uncaptured}, hints {rep.hints}")
      print(rep.thunks)
      sys.stdout.flush()


if __name__ == "__main__":
  main(sys.argv[1:])
