"""Which dims of a gemm call may be split across devices, and how.

Pure rules over the static `GemmSpec`; `partition.py` applies them when XLA
partitions a call, and `primitive.py` when JAX types one (explicit mesh axes,
`shard_map`).  Every operand dim is either

- a *factor* that each device can hold a slice of, with the call run on the
  slices as it is: a vmap batch dim; m (A, C, out, result) or n (B, C, out,
  result) where every operand's window covers that whole dim; k (A and B)
  where both windows cover it, which then needs a sum over the devices; or
- *whole*: a leading dim (indexed by a window start), a dim that a window
  covers only in part, or m / n / k where some other operand's window does
  not cover it.  A window start there is a global index, so a device may
  only hold all of it (split, it would read its own shard at a global
  offset, or at an offset into another device's data).

`choose` picks mesh axes for the factors from the shardings XLA or the
types propose: leniently (what cannot be split is gathered: JAX's automatic
axes), or strictly (a sharding that would need communication is a
`ValueError` naming the argument, the dim and the mesh axis: JAX's explicit
axes, where the sharding is part of the type).
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import Optional, Sequence, Union

import jax
from jax.experimental.custom_partitioning import (ArrayMapping,
                                                  CompoundFactor,
                                                  SdyShardingRule)
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P

from jax_dynoff.spec import GemmSpec, WinSpec, num_arrays, num_slots

Axes = tuple  # the mesh axes of one dim, major first; () when not split


@dataclasses.dataclass(frozen=True)
class Dim:
  """One dim of an operand or of the result.

  factor: a factor name, or for the start vector of a nested vmap (one
          value per item, the batch dims flattened) the tuple of batch
          factors it folds; whole dims get a name of their own.
  split:  whether it may be split across devices.
  why:    for a whole dim, why not (for error messages).
  """

  factor: Union[str, tuple]
  split: bool
  why: str = ""


@dataclasses.dataclass(frozen=True)
class Layout:
  """Every dim of every operand (flat primitive order) and of the result."""

  names: tuple[str, ...]               # per operand, for error messages
  operands: tuple[tuple[Dim, ...], ...]
  result: tuple[Dim, ...]
  # The factors that may split, (name, size), in the order `choose` serves
  # them: vmap dims b0, b1, ..., then m, n, k.
  sizes: tuple[tuple[str, int], ...]


def _roles(spec: GemmSpec) -> dict:
  """The (rows, cols) roles of each window's trailing dims."""
  return {"a": ("k", "m") if spec.trans_a else ("m", "k"),
          "b": ("n", "k") if spec.trans_b else ("k", "n"),
          "c": ("m", "n"), "d": ("m", "n")}


def _windows(spec: GemmSpec) -> dict:
  """name -> WinSpec of the windows whose dims are the operands' (C read
  from `out` included: its extents decide m / n as much as out's do)."""
  w = {"a": spec.a, "b": spec.b, "d": spec.d}
  if spec.c is not None:
    w["c"] = spec.c
  return w


def _covers(w: WinSpec, i: int) -> bool:
  # A window as long as its dim starts at 0 whatever its start: starts are
  # clamped to [0, dim - extent].  So a dynamic start there is harmless.
  # Not so a ragged window's trailing dims: its start clamps with its valid
  # extent and its valid part lies anywhere in the dim, so they stay whole.
  trailing = i < 0 or i >= len(w.dims) - 2
  return w.win[i] == w.dims[i] and not (w.ragged and trailing)


DISPLAY = {"a": "a", "b": "b", "c": "c", "d": "out"}


def start_ranks(spec: GemmSpec, avals: Sequence) -> tuple[int, ...]:
  """The rank of each start operand (the operands after the arrays, but
  the graph tokens): 0, or 1 when vmapped (one value per batch item)."""
  first = num_arrays(spec)
  return tuple(a.ndim for a in avals[first:first + num_slots(spec)])


@functools.lru_cache(maxsize=512)
def layout(spec: GemmSpec, start_ranks: tuple[int, ...]) -> Layout:
  """The layout of a call; start_ranks: the rank (0, or 1 when batched) of
  each start operand, in operand order."""
  nb = len(spec.batch_shape)
  roles, wins = _roles(spec), _windows(spec)
  covered = {}
  for role in ("m", "n", "k"):
    covered[role] = all(_covers(w, i - 2) for n, w in wins.items()
                        for i, r in enumerate(roles[n]) if r == role)
  sizes = [(f"b{j}", s) for j, s in enumerate(spec.batch_shape)]
  sizes += [(r, getattr(spec, r)) for r in ("m", "n", "k") if covered[r]]

  def array_dims(idx: int, name: str, w: WinSpec) -> tuple[Dim, ...]:
    shown = DISPLAY[name]
    dims = [Dim(f"b{j}", True) for j, flag in enumerate(w.batched) if flag]
    r = len(w.dims)
    for i in range(r):
      own = f"w{idx}_{i}"
      if i < r - 2:
        dims.append(Dim(own, False, f"{shown} is indexed there by its window "
                                    f"start"))
        continue
      role = roles[name][i - r]
      if covered[role]:
        dims.append(Dim(role, True))
      elif w.ragged:
        dims.append(Dim(own, False, f"{shown}'s window is ragged (valid "
                                    f"extents) there"))
      elif not _covers(w, i):
        dims.append(Dim(own, False, f"{shown}'s window covers {w.win[i]} of "
                                    f"its {w.dims[i]} there, at a start"))
      else:
        other = next(DISPLAY[n] for n, ww in wins.items()
                     for j, rr in enumerate(roles[n])
                     if rr == role and not _covers(ww, j - 2))
        dims.append(Dim(own, False, f"the {role} dim is split only where "
                                    f"every window covers it, and {other}'s "
                                    f"does not"))
    return tuple(dims)

  names, operands = [], []
  arrays = [("a", spec.a), ("b", spec.b)]
  if spec.c_mode == "own":
    arrays.append(("c", spec.c))
  if spec.has_out:
    arrays.append(("d", spec.d))
  for idx, (name, w) in enumerate(arrays):
    names.append(DISPLAY[name])
    operands.append(array_dims(idx, name, w))
  out_dims = operands[-1] if spec.has_out else None

  ranks = iter(start_ranks)
  for name, w in spec.operands():
    # The operand's slots: its dynamic starts, then its dynamic valid extents.
    slots = [f"the start of {DISPLAY[name]} in dim {i}"
             for i, s in enumerate(w.starts) if s is None]
    slots += [f"the valid {what} of {DISPLAY[name]}"
              for what, v in zip(("rows", "cols"), w.valid or ()) if v is None]
    for what in slots:
      names.append(what)
      if next(ranks) == 0:
        operands.append(())
      elif nb == 1:
        operands.append((Dim("b0", True),))
      else:  # one value per item, every vmap dim flattened (row-major)
        operands.append((Dim(tuple(f"b{j}" for j in range(nb)), True),))
  for _ in range(spec.graph_tokens):  # scalars that nothing reads
    names.append("a graph token")
    operands.append(())

  if out_dims is not None:
    result = out_dims  # the result is `out`, its window rewritten
  else:
    result = tuple(Dim(f"b{j}", True) for j in range(nb)) + tuple(
        Dim(r, True) if covered[r] else Dim(f"r{r}", False)
        for r in ("m", "n"))
  return Layout(tuple(names), tuple(operands), result, tuple(sizes))


def sdy_rule(lay: Layout) -> SdyShardingRule:
  """The Shardy rule of a call: split factors pass through (k reduces),
  whole dims need replication."""

  def mapping(dims):
    return ArrayMapping(*[CompoundFactor(*d.factor)
                          if isinstance(d.factor, tuple) else d.factor
                          for d in dims])

  every = [d for dims in lay.operands + (lay.result,) for d in dims]
  # Shardy numbers factors by first appearance and wants them in that order.
  whole = tuple(dict.fromkeys(d.factor for d in every if not d.split))
  return SdyShardingRule(
      tuple(mapping(dims) for dims in lay.operands), (mapping(lay.result),),
      reduction_factors=("k",) if "k" in dict(lay.sizes) else (),
      need_replication_factors=whole)


# ---------------------------------------------------------------------------
# Choosing mesh axes


@dataclasses.dataclass(frozen=True)
class Split:
  """Mesh axes per split factor, and the shardings that follow."""

  axes: dict                                  # factor -> Axes (non-empty)
  operands: tuple[tuple[Axes, ...], ...]      # per operand, per dim
  result: tuple[Axes, ...]

  @property
  def k_axes(self) -> Axes:
    return self.axes.get("k", ())


def _show(axes: Axes) -> str:
  if len(axes) == 1:
    return f"mesh axis {axes[0]!r}"
  return "mesh axes (" + ", ".join(map(repr, axes)) + ")"


def _fix(msg: str) -> str:
  return (f"gemm: {msg}.  Reshard that argument (jax.sharding.reshard) so "
          f"that dim is whole on every device, or call gemm inside "
          f"jax.shard_map with starts into the local shards")


def choose(lay: Layout, operand_axes: Sequence[Sequence[Axes]],
           result_axes: Optional[Sequence[Axes]], axis_sizes: dict,
           strict: bool) -> Split:
  """Mesh axes for each factor, from the proposed shardings of the operands
  (and, leniently, of the result).

  Lenient: the first proposal that is free and divides the factor wins;
  anything else is left whole (XLA gathers it).  Strict: proposals must
  agree and every sharded dim must be a split factor, else ValueError.
  """
  per_factor: dict = {f: [] for f, _ in lay.sizes}
  nested_starts = any(isinstance(d.factor, tuple)
                      for dims in lay.operands for d in dims)
  for name, dims, axes in zip(lay.names, lay.operands, operand_axes):
    for i, (d, ax) in enumerate(zip(dims, axes)):
      if not ax:
        continue
      if not d.split:
        if strict:
          raise ValueError(_fix(f"{name} is sharded along dim {i} over "
                                f"{_show(ax)}, but {d.why}: a device "
                                f"holding a part of that dim would read it "
                                f"at a global offset"))
        continue
      # A flattened start vector splits as its outer vmap dim does.
      f = d.factor[0] if isinstance(d.factor, tuple) else d.factor
      per_factor[f].append((name, i, tuple(ax)))
  if result_axes is not None:
    for i, (d, ax) in enumerate(zip(lay.result, result_axes)):
      if ax and d.split:
        per_factor[d.factor].append(("the result", i, tuple(ax)))

  chosen, owner = {}, {}
  for f, size in lay.sizes:
    cands = per_factor[f]
    if nested_starts and f != "b0":
      # Starts batched over nested vmaps come flattened: only the outer
      # vmap dim splits them into contiguous per-device blocks.
      if strict and cands and f.startswith("b"):
        name, i, ax = cands[0]
        raise ValueError(_fix(
            f"{name} is sharded along dim {i} over {_show(ax)}, an inner "
            f"vmap dim, while the window starts are batched: they come "
            f"flattened over every vmap dim, so only the outer one splits"))
      if f.startswith("b"):
        continue
    pick = ()
    for name, i, ax in cands:
      n = math.prod(axis_sizes[a] for a in ax)
      clash = next((a for a in ax if a in owner), None)
      if strict:
        if pick and ax != pick:
          first = cands[0]
          raise ValueError(_fix(
              f"{first[0]} dim {first[1]} and {name} dim {i} are the same "
              f"{_factor_text(f)} but are sharded differently "
              f"({_show(first[2])} and {_show(ax)})"))
        if clash is not None:
          raise ValueError(_fix(
              f"{name} is sharded along dim {i} over {_show(ax)}, which "
              f"already splits the {_factor_text(owner[clash])}; one mesh "
              f"axis cannot split two dims of the call"))
        if size % n:
          raise ValueError(_fix(
              f"{name} is sharded along dim {i} over {_show(ax)} "
              f"({n} devices), which does not divide the "
              f"{_factor_text(f)} ({size})"))
        pick = ax
      elif clash is None and size % n == 0:
        pick = ax
        break
    if pick:
      chosen[f] = pick
      owner.update({a: f for a in pick})

  def axes_of(d: Dim) -> Axes:
    if not d.split:
      return ()
    if isinstance(d.factor, tuple):
      return chosen.get(d.factor[0], ())
    return chosen.get(d.factor, ())

  return Split(chosen,
               tuple(tuple(axes_of(d) for d in dims) for dims in lay.operands),
               tuple(axes_of(d) for d in lay.result))


def _factor_text(f: str) -> str:
  if f.startswith("b"):
    return f"vmap dim {f[1:]}"
  return f"{f} dim"


def local_spec(spec: GemmSpec, split: Split, axis_sizes: dict) -> GemmSpec:
  """The call one device runs on its slices."""
  div = {f: math.prod(axis_sizes[a] for a in ax)
         for f, ax in split.axes.items()}
  roles = _roles(spec)

  def shrink(name: str, w: Optional[WinSpec]) -> Optional[WinSpec]:
    if w is None:
      return None
    dims, win = list(w.dims), list(w.win)
    for i, role in zip((-2, -1), roles[name]):
      if role in div:  # split, so every window covers it
        dims[i] //= div[role]
        win[i] //= div[role]
    return dataclasses.replace(w, dims=tuple(dims), win=tuple(win))

  return dataclasses.replace(
      spec, m=spec.m // div.get("m", 1), n=spec.n // div.get("n", 1),
      k=spec.k // div.get("k", 1), a=shrink("a", spec.a),
      b=shrink("b", spec.b), c=shrink("c", spec.c), d=shrink("d", spec.d),
      batch_shape=tuple(s // div.get(f"b{j}", 1)
                        for j, s in enumerate(spec.batch_shape)))


def pspec(axes: Sequence[Axes]) -> P:
  return P(*[None if not ax else ax[0] if len(ax) == 1 else tuple(ax)
             for ax in axes])


def axes_of_spec(spec: P, ndim: int) -> tuple[Axes, ...]:
  """A PartitionSpec's entries as one tuple of axes per dim."""
  out = []
  for e in tuple(spec) + (None,) * (ndim - len(spec)):
    out.append(() if e is None else (e,) if isinstance(e, str) else tuple(e))
  return tuple(out)


# ---------------------------------------------------------------------------
# Types (the primitive's abstract evaluation)


def _varying(aval) -> frozenset:
  """The manual mesh axes a value varies over, in shard_map's types (where
  JAX keeps them has moved between releases)."""
  mat = getattr(aval, "manual_axis_type", None)
  if mat is not None:
    return frozenset(mat.varying)
  return frozenset(getattr(aval, "vma", ()))


def vary_alike(args: Sequence) -> list:
  """The operands, each marked varying over every manual axis another one
  varies over (as JAX's own ops do before binding), so that the result's
  type can say it varies and transposes sum where they must.  Outside
  shard_map nothing varies and the operands come back as they are."""
  vary = [_varying(jax.typeof(x)) for x in args]
  union = frozenset().union(*vary)
  if not union:
    return list(args)
  return [x if v == union else
          jax.lax.pcast(x, tuple(sorted(union - v)), to="varying")
          for x, v in zip(args, vary)]


def any_explicit(avals: Sequence) -> bool:
  """Whether a value is typed over explicit mesh axes (sharding in types),
  where a lax.dot_general of sharded contracting dims needs its result's
  sharding spelt out; `gemm` chooses it by itself (`choose`)."""
  meshes = [a.sharding.mesh for a in avals
            if getattr(a, "sharding", None) is not None]
  meshes.append(jax.sharding.get_abstract_mesh())
  return any(not m.empty and any(t == AxisType.Explicit for t in m.axis_types)
             for m in meshes)


def result_type(spec: GemmSpec, avals: Sequence, shape, dtype):
  """The result's ShapedArray.  Without a mesh: a plain one, as ever.  With
  one, its sharding, and (inside shard_map) the manual axes its operands
  vary over, all alike after `vary_alike`.  Over explicit mesh axes, the
  sharding follows the operands' by `choose`, strictly: one that needs
  communication is a ValueError here, at trace time.
  """
  mesh = next((a.sharding.mesh for a in avals
               if not a.sharding.mesh.empty), jax.sharding.get_abstract_mesh())
  if mesh.empty:
    return jax.core.ShapedArray(shape, dtype)
  out = P()
  if any(t == AxisType.Explicit for t in mesh.axis_types):
    for a in avals:
      if a.sharding.spec.unreduced or a.sharding.spec.reduced:
        raise ValueError("gemm: operands with unreduced or reduced "
                         "shardings are not supported")
    lay = layout(spec, start_ranks(spec, avals))
    split = choose(lay, [axes_of_spec(a.sharding.spec, a.ndim) for a in avals],
                   None, dict(mesh.shape), strict=True)
    out = pspec(split.result)
  # `update` keeps the manual axes of the operand that varies the most.
  like = max(avals, key=lambda a: len(_varying(a)))
  return like.update(shape=tuple(shape), dtype=dtype, weak_type=False,
                     sharding=NamedSharding(mesh, out))
