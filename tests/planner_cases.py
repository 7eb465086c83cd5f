"""Random GemmSpecs for the planner's equivalence test, and their compact
JSON form.

`tests/data/planner_golden.json` holds 3,000 of them with the decisions
the Python planner made for them before the planner moved to C++
(jax_dynoff/plan.py at 52e3f0c), on 132, 114 and 78 SMs;
test_planner.py checks that the C++ planner reproduces every one.
When a rule changes on purpose, re-decide the file's own specs with
`python -m tests.planner_cases --update` (it prints how many decisions
changed; say so in the commit); `python -m tests.planner_cases` writes new
random specs instead.
"""

from __future__ import annotations

import json
import os
import random

import ml_dtypes
import numpy as np

from jax_dynoff.options import DIRECT_TILES, SM90_TILES, KernelOptions
from jax_dynoff.spec import GemmSpec, WinSpec

GOLDEN = os.path.join(os.path.dirname(__file__), "data",
                      "planner_golden.json")
SM_COUNTS = (132, 114, 78)
DTYPES = {"bf16": np.dtype(ml_dtypes.bfloat16), "f16": np.dtype(np.float16),
          "f32": np.dtype(np.float32)}
_DT_NAMES = {v: k for k, v in DTYPES.items()}
PAIRS = [("bf16", "bf16"), ("f16", "f16"), ("bf16", "f32"), ("f16", "f32"),
         ("f32", "f32")]
# KernelOptions fields in the order a case lists them.
OPT_FIELDS = ("sm90", "tf32", "tile", "direct", "direct_tile", "skinny",
              "split_k", "split_k_slices", "deterministic")


def _extent(r: random.Random, small: bool = False,
            aligned: bool = False) -> int:
  """A GEMM extent; `aligned`: a multiple of 8 (16 bytes of 16-bit
  elements) where it is not small."""
  u = r.random()
  if u < 0.02:
    return 0
  if small or u < 0.3:
    return r.randint(1, 2) * 8 if aligned and not small else r.randint(1, 16)
  if u < 0.45:
    return r.randint(3, 38) * 8 if aligned else r.randint(17, 300)
  if u < 0.9:
    return r.choice((64, 128, 192, 256, 384, 512, 1024, 2048, 4096, 8192,
                     8448, 8576, 14336))
  return r.randint(1, 600) * 8 + (0 if aligned else r.randint(0, 7))


def _window(r: random.Random, rows: int, cols: int, nb: int,
            batched=None, aligned: bool = False) -> WinSpec:
  """A window of rows x cols in an array of rank 2..4; `aligned`: padding
  and static column starts in whole 16-byte units, mostly."""
  lead = [r.randint(1, 4) for _ in range(r.choice((0, 0, 0, 1, 2)))]
  def pad(w):
    if r.random() < 0.5:
      return w
    return w + r.choice((8, 64, 128, 256) if aligned else (1, 3, 8, 64))
  dims = tuple(lead) + (pad(rows), pad(cols))
  win = (1,) * len(lead) + (rows, cols)
  def start(i, d, w):
    last = i == len(dims) - 1
    if r.random() < (0.05 if aligned and last else 0.3):
      return None
    s = r.randint(0, d - w)
    return s - s % 8 if aligned and last else s
  starts = tuple(start(i, d, w) for i, (d, w) in enumerate(zip(dims, win)))
  if batched is None:
    batched = tuple(r.random() < 0.5 for _ in range(nb))
  return WinSpec(dims, win, starts, batched)


def random_spec(r: random.Random) -> GemmSpec:
  aligned = r.random() < 0.65
  if aligned:
    in_dt, out_dt = r.choice(PAIRS[:3] * 3 + PAIRS[3:])
  else:
    in_dt, out_dt = r.choice(PAIRS)
  skinny = r.random() < 0.3
  m = _extent(r, small=skinny, aligned=aligned)
  n, k = _extent(r, aligned=aligned), _extent(r, aligned=aligned)
  ta, tb = r.random() < 0.2, r.random() < 0.2
  u = r.random()
  batch = (() if u < 0.7 else (r.randint(0, 5),) if u < 0.9
           else (r.randint(1, 3), r.randint(1, 3)))
  nb = len(batch)
  a = _window(r, *((k, m) if ta else (m, k)), nb, aligned=aligned)
  b = _window(r, *((n, k) if tb else (k, n)), nb, aligned=aligned)
  d = _window(r, m, n, nb, batched=(True,) * nb, aligned=aligned)
  c_mode = r.choice(("none", "none", "own", "from_d"))
  if c_mode == "own":
    c = _window(r, m, n, nb, aligned=aligned)
  elif c_mode == "from_d":
    c = WinSpec(d.dims, d.win, tuple(
        None if r.random() < 0.3 else r.randint(0, x - w)
        for x, w in zip(d.dims, d.win)), d.batched)
  else:
    c = None
  def maybe(p, choices):
    return r.choice(choices) if r.random() < p else None
  opts = KernelOptions(
      sm90=r.random() > 0.1, tf32=r.random() > 0.1,
      tile=maybe(0.15, SM90_TILES), direct=r.random() > 0.1,
      direct_tile=maybe(0.15, DIRECT_TILES), skinny=r.random() > 0.1,
      split_k=r.random() < 0.35,
      split_k_slices=maybe(0.15, (1, 2, 3, 4, 8, 16, 64)),
      deterministic=r.random() > 0.1)
  return GemmSpec(
      m=m, n=n, k=k, a=a, b=b, c=c, d=d, in_dtype=DTYPES[in_dt],
      out_dtype=DTYPES[out_dt], trans_a=ta, trans_b=tb, c_mode=c_mode,
      has_out=c_mode == "from_d" or r.random() < 0.3,
      alpha=r.choice((1.0, 0.5, -2.0)),
      beta=r.choice((0.0, 0.0, 1.0, 0.5)),
      precision="highest" if r.random() < 0.15 else "default",
      batch_shape=batch, opts=opts)


# --- Compact JSON form ---------------------------------------------------

def _win_to_json(w):
  return None if w is None else [list(w.dims), list(w.win), list(w.starts),
                                 [int(x) for x in w.batched]]


def _win_from_json(j):
  return None if j is None else WinSpec(tuple(j[0]), tuple(j[1]),
                                        tuple(j[2]),
                                        tuple(bool(x) for x in j[3]))


def spec_to_json(s: GemmSpec) -> list:
  return [s.m, s.n, s.k, _DT_NAMES[np.dtype(s.in_dtype)],
          _DT_NAMES[np.dtype(s.out_dtype)], int(s.trans_a), int(s.trans_b),
          s.c_mode, int(s.has_out), s.alpha, s.beta, s.precision,
          list(s.batch_shape),
          [getattr(s.opts, f) for f in OPT_FIELDS],
          _win_to_json(s.a), _win_to_json(s.b), _win_to_json(s.c),
          _win_to_json(s.d)]


def spec_from_json(j: list) -> GemmSpec:
  (m, n, k, in_dt, out_dt, ta, tb, c_mode, has_out, alpha, beta, precision,
   batch, opts, a, b, c, d) = j
  return GemmSpec(
      m=m, n=n, k=k, a=_win_from_json(a), b=_win_from_json(b),
      c=_win_from_json(c), d=_win_from_json(d), in_dtype=DTYPES[in_dt],
      out_dtype=DTYPES[out_dt], trans_a=bool(ta), trans_b=bool(tb),
      c_mode=c_mode, has_out=bool(has_out), alpha=alpha, beta=beta,
      precision=precision, batch_shape=tuple(batch),
      opts=KernelOptions(**dict(zip(OPT_FIELDS, opts))))


# Bits of a decision's last entry: which reasons lists are non-empty.
SM90_WHY, DIRECT_WHY, SKINNY_WHY, SPLIT_K_WHY, SPLIT_K_RAISES, \
    SPLIT_K_DIRECT = 1, 2, 4, 8, 16, 32


def decision(plan_mod, spec: GemmSpec) -> list:
  """[path, split_k, direct tile or "", skinny split (0: not the skinny
  path), workspace bytes, reason bits], or ["error"] where planning raises
  (forced slices that do not split K)."""
  try:
    p = plan_mod.plan(spec)
  except ValueError:
    return ["error"]
  bits = 0
  bits |= SM90_WHY * bool(plan_mod.sm90_reasons(spec))
  bits |= DIRECT_WHY * bool(plan_mod.direct_reasons(spec))
  bits |= SKINNY_WHY * bool(plan_mod.skinny_reasons(spec))
  try:
    bits |= SPLIT_K_WHY * bool(plan_mod.split_k_reasons(spec))
  except ValueError:
    bits |= SPLIT_K_RAISES
  bits |= SPLIT_K_DIRECT * bool(plan_mod.split_k_direct(spec))
  skinny = plan_mod.skinny_split(spec) if p.path == "sm90_skinny" else 0
  return [p.path, p.split_k, plan_mod.direct_kernel(spec) or "", skinny,
          p.workspace_bytes, bits]


def decision_on(plan_mod, spec: GemmSpec, sms: int) -> list:
  """`decision` with the planner planning for `sms` SMs of compute
  capability 9.0."""
  device = plan_mod.device
  plan_mod.device = lambda: (sms, 9, 0)
  try:
    return decision(plan_mod, spec)
  finally:
    plan_mod.device = device


def _decisions(plan_mod, s: GemmSpec):
  """A spec's decisions on SM_COUNTS: one where the SM count changes
  nothing."""
  want = {str(sms): decision_on(plan_mod, s, sms) for sms in SM_COUNTS}
  if len({json.dumps(v) for v in want.values()}) == 1:
    want = want[str(SM_COUNTS[0])]
  return want


def main(count: int = 3000, seed: int = 20261202) -> None:
  """Writes `count` new random specs and their decisions."""
  from jax_dynoff import plan as plan_mod  # pylint: disable=g-import-not-at-top
  r = random.Random(seed)
  cases = [[spec_to_json(s), _decisions(plan_mod, s)]
           for s in (random_spec(r) for _ in range(count))]
  with open(GOLDEN, "w") as f:
    json.dump(cases, f, separators=(",", ":"))


def update() -> int:
  """Re-decides the golden file's own specs with today's planner (a rule
  changed on purpose), keeping the specs; returns how many changed."""
  from jax_dynoff import plan as plan_mod  # pylint: disable=g-import-not-at-top
  with open(GOLDEN) as f:
    cases = json.load(f)
  changed = 0
  for case in cases:
    want = _decisions(plan_mod, spec_from_json(case[0]))
    changed += want != case[1]
    case[1] = want
  with open(GOLDEN, "w") as f:
    json.dump(cases, f, separators=(",", ":"))
  return changed


if __name__ == "__main__":
  import sys  # pylint: disable=g-import-not-at-top
  if sys.argv[1:] == ["--update"]:
    print(update(), "decisions changed")
  else:
    main()
