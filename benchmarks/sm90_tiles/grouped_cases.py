"""Writes the grouped sweep's cases (grouped_main.cu), one per line: name E
T d f and the rows per expert, from the bench's moe scenario (MOE_CASES,
moe_sizes: skewed) plus its 64-expert shape with uniform sizes and with
every row in one expert.
Usage: python3 benchmarks/sm90_tiles/grouped_cases.py > cases.txt
"""


import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir))
import bench  # benchmarks/bench.py  # pylint: disable=wrong-import-position


def main():
  cases = [(f"E{E}_T{T}_{d}x{f}_skewed", E, T, d, f,
            bench.moe_sizes(E, T, empty))
           for E, T, d, f, empty in bench.MOE_CASES]
  E, T, d, f, empty = bench.MOE_CASES[1]
  probe = bench.moe_probe_sizes(E, T, empty)
  cases += [(f"E{E}_T{T}_{d}x{f}_{name.replace(' ', '_')}", E, T, d, f,
             probe[name]) for name in ("uniform", "one group")]
  for name, E, T, d, f, sizes in cases:
    assert sizes.sum() == T, name
    print(name, E, T, d, f, *(int(s) for s in sizes))


if __name__ == "__main__":
  main()
