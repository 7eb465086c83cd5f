"""Writes the grouped sweep's cases (grouped_main.cu), one per line: name E
T d f and the rows per expert.  By default: the bench's moe scenario
(MOE_CASES, moe_sizes: skewed) plus its 64-expert shape with uniform sizes
and with every row in one expert.  With --peers: the real layers of
benchmarks/moe_peers.py (CASES: Mixtral, Qwen3-30B-A3B, DeepSeek-V3, the
decode layers), uniform and skewed (its group_sizes), or those named
(--peers qwen3_30b_down,qwen3_30b_up).
Usage: python3 benchmarks/sm90_tiles/grouped_cases.py [--peers [NAMES]] > cases.txt
"""


import argparse
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir))
import bench  # benchmarks/bench.py  # pylint: disable=wrong-import-position
import moe_peers  # benchmarks/moe_peers.py  # pylint: disable=wrong-import-position


def bench_cases():
  cases = [(f"E{E}_T{T}_{d}x{f}_skewed", E, T, d, f,
            bench.moe_sizes(E, T, empty))
           for E, T, d, f, empty in bench.MOE_CASES]
  E, T, d, f, empty = bench.MOE_CASES[1]
  probe = bench.moe_probe_sizes(E, T, empty)
  cases += [(f"E{E}_T{T}_{d}x{f}_{name.replace(' ', '_')}", E, T, d, f,
             probe[name]) for name in ("uniform", "one group")]
  return cases


def peer_cases(names=None):
  known = [c[0] for c in moe_peers.CASES]
  for n in names or ():
    if n not in known:
      raise SystemExit(f"grouped_cases: unknown case {n!r}; known: "
                       f"{', '.join(known)}")
  return [(f"{name}_{kind}", E, T, d, f,
           moe_peers.group_sizes(kind, E, T))
          for name, E, T, d, f in moe_peers.CASES
          if not names or name in names
          for kind in ("uniform", "skewed")]


def main(argv=None):
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("--peers", nargs="?", const="", default=None,
                  help="moe_peers.py's layers (all, or these, comma-separated)")
  a = ap.parse_args(argv)
  if a.peers is None:
    cases = bench_cases()
  else:
    cases = peer_cases([n for n in a.peers.split(",") if n])
  for name, E, T, d, f, sizes in cases:
    assert sizes.sum() == T, name
    print(name, E, T, d, f, *(int(s) for s in sizes))


if __name__ == "__main__":
  main()
