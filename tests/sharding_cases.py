"""gemm over 8 virtual CPU devices: every sharding case of docs/sharding.md.

Run by tests/test_sharding.py in a subprocess (the device count is fixed
when JAX starts, and the rest of the suite runs on one device):

    python tests/sharding_cases.py OUT.json

Each case runs one jitted call on a (2, 4) mesh ("x", "y"), under automatic
axes and again under explicit ones, and records, against the same call of
`jax_dynoff.reference.gemm` on unsharded copies: the largest error relative
to the largest reference element, the result's PartitionSpec, and the
collectives of the compiled program; or the ValueError it raised.  The test
asserts; this script only measures.
"""

from __future__ import annotations

import os
import re
import sys

# Before JAX starts: 8 host devices, on the CPU even where a GPU is present.
os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") +
                           " --xla_force_host_platform_device_count=8")
os.environ["JAX_PLATFORMS"] = "cpu"

import json  # noqa: E402

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.sharding import AxisType, NamedSharding  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

import jax_dynoff as dyn  # noqa: E402

MESHES = {mode: jax.make_mesh((2, 4), ("x", "y"), axis_types=(t, t))
          for mode, t in (("auto", AxisType.Auto),
                          ("explicit", AxisType.Explicit))}
M, K, N, L = 16, 32, 24, 6
RESULTS = []
_rng = np.random.default_rng(0)


def arr(*shape, dtype=np.float32):
  return _rng.standard_normal(shape).astype(dtype)


def idx(i):
  return np.int32(i)


def collectives(hlo: str) -> dict:
  """Collective ops of a compiled program: name -> list of result shapes."""
  out = {}
  for name in ("all-gather", "all-reduce", "all-to-all",
               "collective-permute", "reduce-scatter"):
    out[name] = re.findall(  # an array or a tuple result
        rf"= (\S+|\([^)]*\)) {name}(?:-start)?\(", hlo)
  return out


def _spec(s, ndim):
  return [None if e is None else e if isinstance(e, str) else list(e)
          for e in tuple(s.spec) + (None,) * (ndim - len(s.spec))]


def _rel_err(got, want) -> float:
  got = np.asarray(got, np.float32)
  want = np.asarray(want, np.float32)
  return float(np.abs(got - want).max() / max(1e-30, np.abs(want).max()))


def case(name, kind, build, args, specs, modes=("auto", "explicit")):
  """One call `build(gemm)(*args)`, operands placed by `specs` (None: a
  plain host value, e.g. a start)."""
  want = jax.jit(build(dyn.reference.gemm))(*args)
  for mode in modes:
    mesh = MESHES[mode]
    rec = {"name": name, "kind": kind, "mode": mode}
    placed = [a if s is None else jax.device_put(a, NamedSharding(mesh, s))
              for a, s in zip(args, specs)]
    try:
      with jax.set_mesh(mesh):
        compiled = jax.jit(build(dyn.gemm)).lower(*placed).compile()
        got = compiled(*placed)
      rec.update(err=_rel_err(got, want), spec=_spec(got.sharding, got.ndim),
                 collectives=collectives(compiled.as_text()))
    except ValueError as e:
      rec["error"] = str(e)
    RESULTS.append(rec)


def plain(g):
  return lambda a, b: g(a, b)


def main(path: str) -> None:
  A, B = arr(M, K), arr(K, N)
  C, O = arr(M, N), arr(40, N)

  # --- local: one call per device, no communication ----------------------
  case("n split", "local", plain, [A, B], [P(), P(None, "y")])
  case("m split", "local", plain, [A, B], [P("x"), P()])
  case("m and n split", "local", plain, [A, B], [P("x"), P(None, "y")])
  case("transposed operands, m and n split", "local",
       lambda g: lambda at, bt: g(at, bt, transpose_a=True, transpose_b=True),
       [A.T.copy(), B.T.copy()], [P(None, "x"), P("y")])
  case("c and an out window at a row start, n split", "local",
       lambda g: lambda a, b, c, o, i: g(
           a, b, c, out=dyn.window(o, (i, 0), (M, N)), alpha=0.5, beta=-1.5),
       [A, B, C, O, idx(7)], [P(), P(None, "y"), P(None, "y"), P(None, "y"),
                              None])
  case("in-place accumulate into out, n split", "local",
       lambda g: lambda a, b, o, i: g(
           a, b, dyn.window(o, (i + 3, 0), (M, N)),
           out=dyn.window(o, (i, 0), (M, N)), beta=0.5),
       [A, B, O, idx(5)], [P(), P(None, "y"), P(None, "y"), None])
  W = arr(L, K, N)
  case("stacked weights at a layer start, n split", "local",
       lambda g: lambda a, w, i: g(a, dyn.window(w, (i, 0, 0), (K, N))),
       [A, W, idx(3)], [P(), P(None, None, "y"), None])
  case("vmap with batched starts, batch and n split", "local",
       lambda g: lambda a, b, s: jax.vmap(
           lambda ai, si: g(dyn.window(ai, (si, 0), (M - 4, K)), b))(a, s),
       [arr(8, M, K), B, np.arange(8, dtype=np.int32)],
       [P("x"), P(None, "y"), P("x")])
  case("nested vmap with batched starts, outer batch split", "local",
       lambda g: jax.vmap(jax.vmap(
           lambda ai, si: g(dyn.window(ai, (si, 0), (M - 5, K)), B))),
       [arr(4, 2, M, K), (np.arange(8, dtype=np.int32) % 5).reshape(4, 2)],
       [P("y"), P("y")], modes=("auto",))
  def cond_loop(g):
    def f(a, w, o):
      def body(i, o):  # the window made here: its calls carry a graph token
        wi = dyn.window(w, (i, 0, 0), (K, N))
        return jax.lax.cond(
            i % 2 == 0, lambda o: g(a, wi, out=dyn.window(o, (i, 0), (M, N))),
            lambda o: g(a, wi, out=dyn.window(o, (i + 8, 0), (M, N)),
                        alpha=-0.5), o)
      return jax.lax.fori_loop(0, L, body, o)
    return f
  case("a cond in a loop on windows made at its top level, n split", "local",
       cond_loop, [A, W, O], [P(), P(None, None, "y"), P(None, "y")])
  case("bfloat16 inputs into float32, m and n split", "local",
       lambda g: lambda a, b: g(a, b, preferred_element_type=jnp.float32),
       [A.astype(jnp.bfloat16), B.astype(jnp.bfloat16)],
       [P("x"), P(None, "y")])

  # --- k split: partial products and one sum over the k axes ---------------
  case("k split", "reduce", plain, [A, B], [P(None, "y"), P("y")])
  case("k split with m split, c and an out window at a column start",
       "reduce",
       lambda g: lambda a, b, c, o, j: g(
           a, b, c, out=dyn.window(o, (0, j), (M, N)), alpha=0.5, beta=-1.5),
       [A, B, C, arr(M, N + 8), idx(5)],
       [P("x", "y"), P("y"), P("x"), P("x"), None])
  case("k split, in-place accumulate into out", "reduce",
       lambda g: lambda a, b, o, i: g(
           a, b, dyn.window(o, (i + 3, 0), (M, N)),
           out=dyn.window(o, (i, 0), (M, N)), beta=0.5),
       [A, B, O, idx(5)], [P(None, "y"), P("y"), P(), None])
  case("k split under vmap, batch split", "reduce",
       lambda g: lambda a, b, c: jax.vmap(
           lambda ai, ci: g(ai, b, ci, beta=2.0))(a, c),
       [arr(4, M, K), B, arr(4, M, N)], [P("x", None, "y"), P("y"), P("x")])

  # --- neither: gathered (automatic axes) or ValueError (explicit) ---------
  case("a sharded along a dim its window starts in", "gather",
       lambda g: lambda a, b, i: g(dyn.window(a, (i, 0), (M, K)), b),
       [arr(64, K), B, idx(21)], [P("x"), P(None, "y"), None])
  case("stacked weights sharded along the layer dim", "gather",
       lambda g: lambda a, w, i: g(a, dyn.window(w, (i, 0, 0), (K, N))),
       [A, W, idx(3)], [P(), P("x", None, "y"), None])
  case("out sharded along the rows its window starts in", "gather",
       lambda g: lambda a, b, o, i: g(a, b, out=dyn.window(o, (i, 0), (M, N))),
       [A, B, O, idx(7)], [P(), P(None, "y"), P("x", "y"), None])
  case("a window covering part of k, k sharded", "gather",
       lambda g: lambda a, b, j: g(dyn.window(a, (0, j), (M, K - 8)), b[:K - 8]),
       [A, B, idx(4)], [P(None, "y"), P(), None])
  case("m and n sharded over one mesh axis", "gather", plain, [A, B],
       [P("y"), P(None, "y")])
  case("a ragged window covering every row, m sharded", "gather",
       lambda g: lambda a, b, v: g(dyn.window(a, (0, 0), (M, K),
                                              valid=(v, K)), b),
       [A, B, idx(11)], [P("x"), P(None, "y"), None])

  case("grad, m and n split", "local",
       lambda g: jax.grad(lambda a, b: (g(a, b) ** 2).sum(), argnums=0),
       [A, B], [P("x"), P(None, "y")])

  shard_map_cases(A, B, W)
  docs_examples()
  with open(path, "w") as f:
    json.dump(RESULTS, f, indent=1)


def docs_examples() -> None:
  """docs/sharding.md's two shard_map examples, run as written."""
  doc = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir,
                     "docs", "sharding.md")
  with open(doc) as f:
    blocks = re.findall(r"```python\n(.*?)```", f.read(), re.S)
  ns = {}
  exec(blocks[0] + blocks[1], ns)  # pylint: disable=exec-used
  a, b = np.asarray(ns["a"]), np.asarray(ns["b"])
  want = np.concatenate([a[p * 4 + 1:p * 4 + 3] @ b for p in range(8)])
  RESULTS.append({"name": "docs: shard_map example", "kind": "shard_map",
                  "err": _rel_err(ns["y"], want)})
  mesh, (a, b) = ns["mesh"], (arr(16, 64), arr(64, 24))
  got = jax.jit(ns["g"])(
      jax.device_put(a, NamedSharding(mesh, P(None, "x"))),
      jax.device_put(b, NamedSharding(mesh, P("x"))))
  RESULTS.append({"name": "docs: shard_map k split", "kind": "shard_map",
                  "err": _rel_err(got, a @ b)})


def shard_map_cases(A, B, W) -> None:
  mesh = MESHES["auto"]
  # docs/sharding.md's example: each device multiplies a window of its own
  # rows, at an offset into its local shard.
  rows = arr(8 * 4, K)

  def local(a, b, i):
    return dyn.gemm(dyn.window(a, (i, 0), (2, K)), b)
  f = jax.jit(jax.shard_map(local, mesh=mesh, in_specs=(P(("x", "y")), P(), P()),
                            out_specs=P(("x", "y"))))
  got = f(rows, B, idx(1))
  want = np.concatenate([rows[p * 4 + 1:p * 4 + 3] @ B for p in range(8)])
  RESULTS.append({"name": "shard_map: windows into local shards",
                  "kind": "shard_map", "err": _rel_err(got, want)})

  # A result of varying operands varies too: declaring it replicated is an
  # error (as for jnp.dot), not device 0's block returned silently.
  g = jax.jit(jax.shard_map(dyn.gemm, mesh=mesh,
                            in_specs=(P(None, "y"), P("y")), out_specs=P()))
  rec = {"name": "shard_map: varying result declared replicated",
         "kind": "shard_map_error"}
  try:
    g(A, B)
  except ValueError as e:
    rec["error"] = str(e)
  RESULTS.append(rec)

  # grad inside shard_map: the k split written by hand.
  def loss(a, b):
    return (jax.lax.psum(dyn.gemm(a, b), ("x", "y")) ** 2).sum()
  got = jax.jit(jax.grad(jax.shard_map(
      loss, mesh=mesh, in_specs=(P(None, ("x", "y")), P(("x", "y"))),
      out_specs=P()), argnums=(0, 1)))(A, B)
  want = jax.grad(lambda a, b: ((a @ b) ** 2).sum(), argnums=(0, 1))(A, B)
  RESULTS.append({"name": "shard_map: grad of a k split",
                  "kind": "shard_map",
                  "err": max(_rel_err(g, w) for g, w in zip(got, want))})

  # grad and an eager call under a sharded jit.
  with jax.set_mesh(mesh):
    a = jax.device_put(A, NamedSharding(mesh, P("x")))
    b = jax.device_put(B, NamedSharding(mesh, P(None, "y")))
    got = jax.jit(jax.grad(lambda a, b: (dyn.gemm(a, b) ** 2).sum(),
                           argnums=(0, 1)))(a, b)
    eager = dyn.gemm(a, b)
  RESULTS.append({"name": "sharded jit: grad", "kind": "other",
                  "err": max(_rel_err(g, w) for g, w in zip(got, want))})
  RESULTS.append({"name": "sharded arrays: eager call", "kind": "other",
                  "err": _rel_err(eager, A @ B),
                  "spec": _spec(eager.sharding, 2)})

  # shard_map over x only: y stays automatic, and the call replicated over
  # it (B gathered), as before.
  f = jax.jit(jax.shard_map(dyn.gemm, mesh=mesh, in_specs=(P("x"), P()),
                            out_specs=P("x"), axis_names={"x"}))
  with jax.set_mesh(mesh):
    b = jax.device_put(B, NamedSharding(mesh, P(None, "y")))
    compiled = f.lower(A, b).compile()
    got = compiled(A, b)
  RESULTS.append({"name": "shard_map over some axes: automatic ones gathered",
                  "kind": "gather", "err": _rel_err(got, A @ B),
                  "collectives": collectives(compiled.as_text())})

  # The benchmark's layer loop: weights split along n, x gathered between
  # layers (the model's collective); W itself is never gathered.
  w = arr(L, K, K) / np.sqrt(K)

  def layers(g):
    def f(x, w):
      def body(i, x):
        y = g(x, dyn.window(w, (i, 0, 0), (K, K)))
        return jax.lax.with_sharding_constraint(y, NamedSharding(mesh, P()))
      return jax.lax.fori_loop(0, L, body, x)
    return f
  x = A
  want = jax.jit(layers(dyn.reference.gemm))(x, w)
  wd = jax.device_put(w, NamedSharding(mesh, P(None, None, "y")))
  compiled = jax.jit(layers(dyn.gemm)).lower(x, wd).compile()
  RESULTS.append({"name": "layer loop over stacked weights, n split",
                  "kind": "loop", "err": _rel_err(compiled(x, wd), want),
                  "collectives": collectives(compiled.as_text())})

  # GSPMD, the partitioner before Shardy, calls the same partition rule.
  jax.config.update("jax_use_shardy_partitioner", False)
  try:
    for specs, kind in (((P(), P(None, "y")), "local"),
                        ((P(None, "y"), P("y")), "reduce")):
      a = jax.device_put(A, NamedSharding(mesh, specs[0]))
      b = jax.device_put(B, NamedSharding(mesh, specs[1]))
      compiled = jax.jit(dyn.gemm).lower(a, b).compile()
      got = compiled(a, b)
      RESULTS.append({"name": f"GSPMD partitioner: {kind}", "kind": kind,
                      "mode": "gspmd", "err": _rel_err(got, A @ B),
                      "spec": _spec(got.sharding, 2),
                      "collectives": collectives(compiled.as_text())})
  finally:
    jax.config.update("jax_use_shardy_partitioner", True)


if __name__ == "__main__":
  main(sys.argv[1])
