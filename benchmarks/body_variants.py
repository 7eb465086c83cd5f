"""The table loop's per-call time with body graphs, ours beside variants
that each take one thing away, and XLA's loop, all in one process under
`cuda_graph_flags()` (`bench.time_loops`: the loops take turns, device
time per call):

  ours                 as benchmarks/sweep.py builds it: A's rows at
                       table[i] * m, D's at i * m
  ours_unroll2         the same loop unrolled by 2 (two calls a body graph)
  ours_static_windows  both windows at static starts: the call reads
                       neither the loop counter nor the table, so nothing
                       orders XLA's counter kernel after it
  ours_rows_at_i       A's rows at i * m: the counter, no table look-up
  xla, xla_unroll2     XLA's loop (dynamic_slice + dot +
                       dynamic_update_slice), as written and unrolled by 2

What the differences tell: ours against ours_static_windows is what reading
the loop counter costs a call in a body graph (XLA's counter kernel writes
the counter in place, so it waits for every command that reads it), and
against ours_rows_at_i what the table look-up adds.

  python benchmarks/body_variants.py OUT_DIR [--cells 8x2048x2048,...]
  python benchmarks/body_variants.py OUT_DIR --quick     # tiny, any backend

Writes OUT_DIR/body_variants.json: per cell, microseconds per GEMM call of
each loop.
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import jax_dynoff as dyn  # noqa: E402

os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " " +
                           dyn.cuda_graph_flags()).strip()

import jax.numpy as jnp  # noqa: E402
from jax import lax  # noqa: E402

import bench  # noqa: E402
import sweep  # noqa: E402

CELLS = "8x2048x2048,32x768x1536,16x4096x4096,64x1024x512"


def variants(m, n, k, dtype=jnp.bfloat16, quick=False) -> dict:
  """The loops of one cell, on sweep.table_pattern's operands."""
  p = sweep.table_pattern(m, n, k, dtype, quick=quick)
  L = p.inner

  def ours(unroll=1, rows=lambda i, table: table[i] * m, out_rows=None):
    def f(j, buf, x, w, table):
      def body(i, buf):
        o = (i * m) if out_rows is None else out_rows
        return dyn.gemm(dyn.window(x, (rows(i, table), 0), (m, k)), w,
                        out=dyn.window(buf, (o, 0), (m, n)))
      return lax.fori_loop(0, L, body, buf, unroll=unroll)
    return f

  def xla(unroll=1):
    def f(j, buf, x, w, table):
      def body(i, buf):
        xi = lax.dynamic_slice(x, (table[i] * m, 0), (m, k))
        y = jnp.dot(xi, w, preferred_element_type=dtype)
        return lax.dynamic_update_slice(buf, y, (i * m, 0))
      return lax.fori_loop(0, L, body, buf, unroll=unroll)
    return f

  bodies = {
      "ours": ours(),
      "ours_unroll2": ours(unroll=2),
      "ours_static_windows": ours(rows=lambda i, table: 0, out_rows=0),
      "ours_rows_at_i": ours(rows=lambda i, table: i * m),
      "xla": xla(),
      "xla_unroll2": xla(unroll=2),
  }
  return {name: bench.Loop(f, p.ours.carry, p.ours.consts)
          for name, f in bodies.items()}, L


def main(argv=None):
  ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  ap.add_argument("out_dir")
  ap.add_argument("--cells", default=CELLS, help="m x n x k, comma-separated")
  ap.add_argument("--repeats", type=int, default=3)
  ap.add_argument("--window", type=float, default=0.1,
                  help="seconds per loop per round (bench.sustained)")
  ap.add_argument("--quick", action="store_true",
                  help="one tiny cell, short loops, one round (a CPU test)")
  a = ap.parse_args(argv)
  cells = ["8x64x64"] if a.quick else a.cells.split(",")
  bench.WINDOW_S = 0.0 if a.quick else a.window
  out = dict(bench.run_record("benchmarks/body_variants.py", argv),
             cells={})
  for cell in cells:
    m, n, k = (int(v) for v in cell.split("x"))
    loops, L = variants(m, n, k, quick=a.quick)
    names = list(loops)
    times = bench.time_loops([loops[nm] for nm in names], 2 if a.quick else 20,
                             1 if a.quick else a.repeats)
    row = {nm: ms * 1e3 / L for nm, ms in zip(names, times)}
    out["cells"][cell] = row
    print(f"{cell}: " + "  ".join(f"{nm} {us:.2f}" for nm, us in row.items()),
          flush=True)
  os.makedirs(a.out_dir, exist_ok=True)
  with open(os.path.join(a.out_dir, "body_variants.json"), "w") as f:
    json.dump(out, f, indent=1)
  return out


if __name__ == "__main__":
  main()
