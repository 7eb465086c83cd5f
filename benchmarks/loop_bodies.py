"""What XLA made of a sweep cell's loops: for each side (ours, XLA's), each
while loop of the compiled program and the top-level instructions of its
body, a command buffer (`command_buffer` call) marked as such.

At XLA's default flags a body becomes one CUDA graph only from
`xla_gpu_graph_min_graph_size` = 5 thunks up (docs/cuda_graphs.md), so
the count of a body's top-level thunks says whether the host launches it
thunk by thunk.  The sweep's profiler column "graph launches an
iteration" measures the result; this shows the cause, instruction by
instruction, on the machine's own backend (on a CPU the fusions differ
from a GPU's, the loop structure does not).

    python benchmarks/loop_bodies.py PATTERN M N K [--quick] [--dump DIR]

PATTERN: one of sweep.BUILDERS (table, stacked, cond, kv, backward,
table_nt).  --dump DIR writes each side's whole optimized HLO there.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from typing import Optional

import jax.numpy as jnp

import bench  # benchmarks/bench.py, beside this script
import sweep  # benchmarks/sweep.py: the patterns

_COMPUTATION = re.compile(r"^(?:ENTRY )?%?([\w.\-]+) .*\{$")
_WHILE_BODY = re.compile(r"\bwhile\(.*\bbody=%?([\w.\-]+)")
_OPCODE = re.compile(r"=\s+(?:\([^=]*\)|\S+)\s+([a-z][\w\-]*)\(")
_CALLEE = re.compile(
    r"\b(?:calls|to_apply|custom_call_target)=\"?%?([\w.\-]+)")
# Instructions that are no thunk: they name or regroup buffers.
_FREE = {"parameter", "get-tuple-element", "tuple", "constant", "bitcast"}


def computations(hlo_text: str) -> dict[str, list[str]]:
  """Computation name -> its instruction lines, from optimized HLO text."""
  comps: dict[str, list[str]] = {}
  current: Optional[str] = None
  for line in hlo_text.splitlines():
    head = _COMPUTATION.match(line)
    if head:
      current = head.group(1)
      comps[current] = []
    elif line.startswith("}"):
      current = None
    elif current is not None and "=" in line:
      comps[current].append(line.strip())
  return comps


def loop_bodies(hlo_text: str) -> list[tuple[str, list[str]]]:
  """(body name, its top-level instructions as "opcode [callee]") for each
  while loop of the program, instructions that launch nothing left out."""
  comps = computations(hlo_text)
  out = []
  for lines in comps.values():
    for line in lines:
      w = _WHILE_BODY.search(line)
      if not w:
        continue
      ops = []
      for inst in comps.get(w.group(1), []):
        op = _OPCODE.search(inst)
        if op is None or op.group(1) in _FREE:
          continue
        callee = _CALLEE.search(inst)
        ops.append(op.group(1) + (f" {callee.group(1)}" if callee else ""))
      out.append((w.group(1), ops))
  return out


def main(argv=None) -> int:
  ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  ap.add_argument("pattern", choices=sorted(sweep.BUILDERS))
  ap.add_argument("m", type=int)
  ap.add_argument("n", type=int)
  ap.add_argument("k", type=int)
  ap.add_argument("--quick", action="store_true",
                  help="the patterns' short loops (the tests' size)")
  ap.add_argument("--dump", help="directory for each side's optimized HLO")
  a = ap.parse_args(argv)
  p = sweep.BUILDERS[a.pattern](a.m, a.n, a.k, jnp.bfloat16, a.quick)
  if a.dump:
    os.makedirs(a.dump, exist_ok=True)
  for side, loop in (("ours", p.ours), ("xla", p.xla)):
    compiled, _ = bench.compile_loop(loop, 1)
    text = compiled.as_text()
    if a.dump:
      with open(f"{a.dump}/{a.pattern}_{a.m}x{a.n}x{a.k}_{side}.hlo.txt",
                "w") as f:
        f.write(text)
    print(f"== {side} {a.pattern} {a.m}x{a.n}x{a.k}")
    for body, ops in loop_bodies(text):
      graphs = sum(op.startswith("call command_buffer") for op in ops)
      print(f"  loop body {body}: {len(ops)} top-level instructions"
            + (f", {graphs} command buffer(s)" if graphs else ""))
      for op in ops:
        print(f"    {op}")
  return 0


if __name__ == "__main__":
  sys.exit(main())
