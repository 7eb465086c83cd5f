"""Which GEMM XLA compiles inside its own loop of a sweep cell: the fusion
kinds of its optimized HLO (a Triton GEMM fusion, a cuBLAS call, a reduce
fusion for m = 1), each Triton fusion's tile configuration
(`block_level_fusion_config`: output tile, warps, stages, TMA) and the dot
instructions themselves, whose shapes show a split of K (a leading batch
dimension the K split became, reduced by the consumer fusion).  The peer
the sweep's ratios are taken against, read rather than guessed.

    python benchmarks/xla_gemm_config.py OUT.json [--pattern table]
        [--cells 8x2048x2048,16x4096x4096,...] [--dtype bfloat16]

Compiles only (one iteration of the outer loop); prints a block per cell.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import re
import sys
import tempfile

import jax.numpy as jnp

import bench  # benchmarks/bench.py, beside this script
import sweep  # benchmarks/sweep.py: the patterns

DEFAULT_CELLS = ("1x512x1024,8x2048x2048,16x4096x4096,32x768x1536,"
                 "64x1024x512")

_CONFIG = re.compile(r'"block_level_fusion_config":(\{.*?\}\]\})')
_KIND = re.compile(r'"kind":"(__[a-z_]+)"')
_DOT = re.compile(r"=\s*(\S+)\s+dot\(")


def _parsed(text: str):
  """A config as JSON, or its text where the pattern cut it short."""
  try:
    return json.loads(text)
  except json.JSONDecodeError:
    return text


def read(hlo: str) -> dict:
  """The GEMM-related facts of one optimized HLO module's text."""
  return dict(kinds=sorted(set(_KIND.findall(hlo))),
              configs=[_parsed(c) for c in sorted(set(_CONFIG.findall(hlo)))],
              dots=sorted(set(_DOT.findall(hlo))))


def xla_config(pattern: str, m: int, n: int, k: int, dtype) -> dict:
  """Compile XLA's own loop of the cell with the dump on; read it back."""
  p = sweep.BUILDERS[pattern](m, n, k, jnp.dtype(dtype), False)
  with tempfile.TemporaryDirectory() as d:
    p.xla.compiler_options = {"xla_dump_to": d, "xla_dump_hlo_as_text": True}
    bench.compile_loop(p.xla, 1)
    hlo = "".join(open(f).read()
                  for f in glob.glob(os.path.join(d, "*after_optimizations.txt")))
  return dict(pattern=pattern, m=m, n=n, k=k, **read(hlo))


def main(argv=None) -> int:
  ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  ap.add_argument("out")
  ap.add_argument("--pattern", default="table", choices=sorted(sweep.BUILDERS))
  ap.add_argument("--cells", default=DEFAULT_CELLS, help="MxNxK,...")
  ap.add_argument("--dtype", default="bfloat16")
  a = ap.parse_args(argv)
  rows = []
  for cell in a.cells.split(","):
    m, n, k = (int(v) for v in cell.split("x"))
    r = xla_config(a.pattern, m, n, k, a.dtype)
    rows.append(r)
    print(f"{a.pattern} {m}x{n}x{k}: kinds {r['kinds']}", flush=True)
    for d in r["dots"]:
      print(f"    dot {d}")
    for c in r["configs"]:
      print(f"    config {json.dumps(c)}")
  with open(a.out, "w") as f:
    json.dump(dict(
        **bench.run_record("benchmarks/xla_gemm_config.py", argv),
        cells=rows), f, indent=1)
  return 0


if __name__ == "__main__":
  sys.exit(main())
