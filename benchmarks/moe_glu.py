"""The up projection's gated activation, fused or not: jax_dynoff.ragged_dot
with activation="swiglu" (silu(gate) * up in the grouped kernel's
epilogue, over interleaved gate and up columns) beside the same product
followed by XLA's activation, on the expert layers of moe_peers.py, forward
and forward + backward (the vjp wrt lhs and rhs), device-timed in one
process (bench.time_loops: the sides take turns), each side's accuracy
against a float32 reference of the same bfloat16 operands.

Sides (each returns the (rows, n / 2) activation):
  fused:      ragged_dot(x, w_interleaved, sizes, activation="swiglu")
  interleave: h = ragged_dot(x, w_interleaved, sizes); silu(h[:, 0::2]) * h[:, 1::2]
  halves:     h = ragged_dot(x, w_halves, sizes); silu(h[:, :n/2]) * h[:, n/2:]
The unfused sides round h to bfloat16 before the activation, as a model
that calls ragged_dot and then the activation does.  Usage:
  python benchmarks/moe_glu.py [OUT_DIR] [--quick] [--cases NAME,...]
writes OUT_DIR/moe_glu.json and prints one line per case and setting.
"""

from __future__ import annotations

import functools
import sys

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

import jax_dynoff as dyn
import bench      # benchmarks/bench.py, beside this script
import moe_peers  # the layers and the group sizes

# The up projections (N = gate and up columns together) and decode layers
# of moe_peers.CASES.
CASES = tuple(c for c in moe_peers.CASES
              if c[0].endswith("_up") or c[0].startswith("decode"))
QUICK = ("mixtral_up", "qwen3_30b_up", "decode_e64")


def _swiglu(h, interleaved):
  h = h.astype(jnp.float32)
  if interleaved:
    gate, up = h[:, 0::2], h[:, 1::2]
  else:
    half = h.shape[1] // 2
    gate, up = h[:, :half], h[:, half:]
  return jax.nn.silu(gate) * up


def sides():
  """name -> (fn(x, w, sizes) -> (rows, n / 2) bfloat16, whether w is
  interleaved)."""
  def fused(x, w, g):
    return dyn.ragged_dot(x, w, g, activation="swiglu")

  def unfused(interleaved):
    def f(x, w, g):
      return _swiglu(dyn.ragged_dot(x, w, g), interleaved).astype(x.dtype)
    return f
  return {"fused": (fused, True), "interleave": (unfused(True), True),
          "halves": (unfused(False), False)}


def _outputs(fn, x, w, g, dy):
  y, vjp = jax.vjp(lambda a, b: fn(a, b, g), x, w)
  return (y, *vjp(dy))


def accuracy(fn, interleaved, x, w, sizes, dy) -> list[float]:
  """Max |error| over max |reference| of the output, d lhs and d rhs on
  moe_peers.sample_groups, against float32 products at HIGHEST of the
  same bfloat16 operands and the activation in float32."""
  g = jnp.asarray(sizes)
  y, dx, dw = jax.jit(functools.partial(_outputs, fn))(x, w, g, dy)
  ends = np.cumsum(sizes)
  hi = lax.Precision.HIGHEST
  f32 = lambda a: jnp.asarray(a, jnp.float32)
  err, scale = np.zeros(3), np.zeros(3)
  for grp in moe_peers.sample_groups(sizes):
    r1 = int(ends[grp])
    r0 = r1 - int(sizes[grp])
    xs, ws, ds = f32(x[r0:r1]), f32(w[grp]), f32(dy[r0:r1])

    def ref(a, b):
      return _swiglu(jnp.dot(a, b, precision=hi), interleaved)
    ry, vjp = jax.vjp(ref, xs, ws)
    rdx, rdw = vjp(ds)
    for i, (a, b) in enumerate(zip((y[r0:r1], dx[r0:r1], dw[grp]),
                                   (ry, rdx, rdw))):
      err[i] = max(err[i], float(jnp.max(jnp.abs(f32(a) - b), initial=0.0)))
      scale[i] = max(scale[i], float(jnp.max(jnp.abs(b), initial=0.0)))
  return [float(e / max(sc, 1e-30)) for e, sc in zip(err, scale)]


def _fwd_loop(fn, x, w, g):
  def body(i, y, x, w, g):
    xx, ww, _ = lax.optimization_barrier((x, w, i))
    return fn(xx, ww, g)
  return bench.Loop(body, jnp.zeros((x.shape[0], w.shape[2] // 2), x.dtype),
                    (x, w, g))


def _train_loop(fn, x, w, g, carry):
  """Forward and vjp a step, as moe_peers.py's: the carry (cotangent, dx,
  dw) is shared by the sides, each step's output the next step's
  cotangent (nothing dead, no extra pass over the results)."""
  def body(i, c, x, w, g):
    xx, ww, _ = lax.optimization_barrier((x, w, i))
    y, dx, dw = _outputs(fn, xx, ww, g, c[0])
    return y.astype(c[0].dtype), dx, dw
  return bench.Loop(body, carry, (x, w, g))


def run_case(name, experts, rows, k, n, kind, repeats) -> dict:
  dtype = jnp.bfloat16
  kx, kw, ky = jax.random.split(jax.random.key(experts * 7 + k + 1), 3)
  x = bench._rand(kx, (rows, k), dtype)  # pylint: disable=protected-access
  w_halves = bench._rand(kw, (experts, k, n), dtype, 1 / np.sqrt(k))  # pylint: disable=protected-access
  w_inter = dyn.interleave_gate_up(w_halves)
  dy = bench._rand(ky, (rows, n // 2), dtype)  # pylint: disable=protected-access
  sizes = moe_peers.group_sizes(kind, experts, rows)
  g = jnp.asarray(sizes)
  rec = dict(case=name, experts=experts, rows=rows, k=k, n=n, groups=kind,
             empty=int((sizes == 0).sum()), max_group=int(sizes.max()),
             flops=2.0 * rows * k * n, sides={})
  fns = sides()
  for side, (fn, inter) in fns.items():
    rec["sides"][side] = {"error": accuracy(
        fn, inter, x, w_inter if inter else w_halves, sizes, dy)}
  iters = max(3, min(100, int(3e12 / rec["flops"])))
  names = list(fns)
  for mode, it in (("fwd", iters), ("train", max(2, iters // 3))):
    # (w_inter and w_halves have one shape: one carry serves both.)
    carry = (dy, jnp.zeros_like(x), jnp.zeros_like(w_halves)) \
        if mode == "train" else None
    loops = []
    for s in names:
      fn, inter = fns[s]
      w = w_inter if inter else w_halves
      loops.append(_fwd_loop(fn, x, w, g) if mode == "fwd" else
                   _train_loop(fn, x, w, g, carry))
    try:
      ms = bench.time_loops(loops, it, repeats)
    except Exception as e:  # pylint: disable=broad-except
      rec[f"{mode}_failed"] = f"{type(e).__name__}: {e}"[:300]
      continue
    for s, t in zip(names, ms):
      rec["sides"][s][f"{mode}_ms"] = t
    del loops, carry
  return rec


def _line(r) -> str:
  s = r["sides"]
  parts = [f"{r['case']:<15} {r['groups']:<7} E{r['experts']:<4} "
           f"{r['rows']}x{r['k']}->{r['n']}"]
  for mode in ("fwd", "train"):
    t = s["fused"].get(f"{mode}_ms")
    if t is None:
      parts.append(f"{mode}: failed")
      continue
    others = ", ".join(f"{p} {s[p][f'{mode}_ms'] / t:5.2f}"
                       for p in ("interleave", "halves")
                       if f"{mode}_ms" in s[p])
    parts.append(f"{mode} fused {t:8.3f} ms ({others})")
  parts.append("err " + " ".join(f"{p} {max(v['error']):.1e}"
                                 for p, v in s.items()))
  return " | ".join(parts)


def main(argv=None):
  def make_run():
    return (lambda c, kind, repeats: run_case(*c, kind, repeats),
            "ratio = the side's time / fused", {})
  return moe_peers.drive(argv, __doc__, CASES, QUICK, "moe_glu.json",
                         make_run, _line)


if __name__ == "__main__":
  sys.exit(main())
