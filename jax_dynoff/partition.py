"""Partitioning a gemm call across devices, when XLA partitions a program.

A call lowered for one device (or inside `shard_map`, where every mesh axis
is manual and the call already sees local shards) lowers exactly as before:
one `jax_dynoff_gemm` custom call, nothing around it.  Only a call in a
program over several devices, with mesh axes XLA partitions, goes through
`jax.experimental.custom_partitioning`: XLA's partitioner calls back with
the operands' shardings, `sharding.choose` picks the split (leniently:
what cannot be split is gathered), and each device runs one local call on
its slices.  A split k dim adds one sum of float32 partial products over
the k mesh axes (`_sum_over`), after which C is added and `out` written on each
device.
"""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp
from jax._src import dispatch  # prim_requires_devices_during_lowering
from jax._src import sharding_impls  # the lowering's axis contexts
from jax.core import ShapedArray
from jax.experimental.custom_partitioning import custom_partitioning
from jax.extend.core import Primitive
from jax.interpreters import mlir
from jax.sharding import NamedSharding

from jax_dynoff import lowering, reference, sharding
from jax_dynoff.primitive import (Operands, bind, gemm_p, per_item, unbatched,
                                  window_of)
from jax_dynoff.spec import GemmSpec, WinSpec


def _spans_devices(ctx) -> bool:
  """Whether XLA will partition this call over several devices.

  Inside shard_map (an SPMDAxisContext: manual axes, here the call sees its
  local shards; over automatic axes left in a partial shard_map it stays
  replicated, as before) and on one device the answer is no.
  """
  ac = ctx.module_context.axis_context
  # Without a device assignment (which JAX passes for gemm_p, registered
  # below) custom_partitioning could not run: the call stays whole then, as
  # it does should these private JAX names move (tests/test_sharding.py
  # would see the gathers).
  context = getattr(sharding_impls, "ShardingContext", ())
  return (isinstance(ac, context) and ac.num_devices > 1
          and getattr(ac, "device_assignment", None) is not None)


def _lower(ctx, *args, spec: GemmSpec):
  """The primitive's lowering: one device's call (lowering.lower), unless
  XLA partitions the program: then the same call wrapped in
  custom_partitioning, lowered locally per device later."""
  if not _spans_devices(ctx):
    return lowering.lower(ctx, *args, spec=spec)
  call = _partitioned(spec, sharding.start_ranks(spec, ctx.avals_in))
  return mlir.lower_fun(call, multiple_results=False)(ctx, *args)


# Not cacheable: a cached rule is lowered once as a function of block
# arguments and then inlined, so it could never tell a plain start (a loop
# counter, passed as it is) from a computed one (packed through a clamp).
mlir.register_lowering(gemm_p, _lower, cacheable=False)
# custom_partitioning needs the device assignment while lowering, which JAX
# only passes along for programs holding a primitive registered here (on one
# device the lowered program is the same either way).
getattr(dispatch, "prim_requires_devices_during_lowering", set()).add(gemm_p)


@functools.lru_cache(maxsize=256)
def _partitioned(spec: GemmSpec, start_ranks: tuple[int, ...]):
  lay = sharding.layout(spec, start_ranks)

  def call(*args):
    return gemm_p.bind(*args, spec=spec)

  cp = custom_partitioning(call)
  cp.def_partition(
      partition=functools.partial(_partition, spec, lay),
      infer_sharding_from_operands=functools.partial(_infer, lay),
      sharding_rule=sharding.sdy_rule(lay))
  return cp


def _axes(s, ndim: int):
  """A proposed sharding as axes per dim; None when it is not a
  NamedSharding (no mesh to name axes by: then nothing is split)."""
  if not isinstance(s, NamedSharding):
    return None
  return sharding.axes_of_spec(s.spec, ndim)


def _split(lay, mesh, arg_shapes, result_shape) -> sharding.Split:
  args = [_axes(s.sharding, len(s.shape)) for s in arg_shapes]
  res = None if result_shape is None else _axes(result_shape.sharding,
                                                len(result_shape.shape))
  if mesh.empty or any(a is None for a in args):
    return sharding.choose(lay, [()] * len(args), None, {}, strict=False)
  return sharding.choose(lay, args, res, dict(mesh.shape), strict=False)


def _named(mesh, axes, like):
  if mesh.empty:  # GSPMD shardings without a mesh: replicate on their devices
    return sharding_impls.GSPMDSharding.get_replicated(
        like.sharding._device_assignment)
  return NamedSharding(mesh, sharding.pspec(axes))


def _partition(spec, lay, mesh, arg_shapes, result_shape):
  split = _split(lay, mesh, arg_shapes, result_shape)
  local = sharding.local_spec(spec, split, dict(mesh.shape))
  arg_shardings = tuple(_named(mesh, ax, s)
                        for ax, s in zip(split.operands, arg_shapes))
  result_sharding = _named(mesh, split.result, arg_shapes[0])
  fn = functools.partial(_local_call, local, split.k_axes)
  return mesh, fn, result_sharding, arg_shardings


def _infer(lay, mesh, arg_shapes, result_shape):
  """GSPMD's propagation (when Shardy is off): the result's sharding."""
  del result_shape
  return _named(mesh, _split(lay, mesh, arg_shapes, None).result,
                arg_shapes[0])


def _sum_over(acc, axes):
  """psum(acc, axes), written as a reduce-scatter (all_to_all, then a sum
  in device order) and an all_gather: the same bytes on the wire as a ring
  all-reduce, and no reduction region.  jax 0.11 lowers psum's region inside
  a partitioning callback with a sharding annotation on its add, which XLA
  then rejects ("Unsupported reduction computation")."""
  p = jax.lax.axis_size(axes)
  if p == 1:
    return acc
  flat = acc.reshape(-1)
  chunk = -(-flat.size // p)
  flat = jnp.pad(flat, (0, chunk * p - flat.size)).reshape(p, chunk)
  # Row j of `mine`: device j's partial of this device's chunk.
  mine = jax.lax.all_to_all(flat, axes, 0, 0, tiled=True)
  total = jax.lax.all_gather(mine.sum(axis=0), axes, axis=0, tiled=True)
  return total[:acc.size].reshape(acc.shape)


def _local_call(spec: GemmSpec, k_axes, *args):
  """What one device runs: the call on its slices; with k split, float32
  partial products summed over the k axes, then C and `out` on each."""
  if not k_axes:
    return gemm_p.bind(*args, spec=spec)
  ops = Operands.split(spec, args)
  nb = len(spec.batch_shape)
  fresh = WinSpec((spec.m, spec.n), (spec.m, spec.n), (0, 0), (True,) * nb)
  partial = dataclasses.replace(
      spec, c=None, c_mode="none", has_out=False, d=fresh, beta=0.0,
      out_dtype=jnp.dtype(jnp.float32), out_zeros=False)
  acc = bind(partial, Operands(ops.a, ops.b, None, None,
                               {"a": ops.starts["a"], "b": ops.starts["b"],
                                "d": []}))
  values = {"acc": acc}
  windows = {"acc": None}  # a value without a WinSpec has every vmap dim
  if spec.c_mode == "own":
    values["c"], windows["c"] = ops.c, spec.c
  if spec.has_out:
    values["out"], windows["out"] = ops.out, None
  item = unbatched(spec)

  def finish(arrays, starts):  # reference.gemm's last lines, on one item
    acc = arrays["acc"][0]
    if spec.c is not None:
      src = arrays["c"][0] if spec.c_mode == "own" else arrays["out"][0]
      cval = reference.read_window(window_of(src, item.c, starts["c"]))
      acc = acc + jnp.float32(spec.beta) * cval.astype(jnp.float32)
    if not spec.has_out:
      return acc.astype(spec.out_dtype)
    return reference.write_window(window_of(arrays["out"][0], item.d,
                                          starts["d"]), acc)

  def sum_and_finish(values, starts):
    values = dict(values, acc=_sum_over(values["acc"], k_axes))
    return per_item(finish, spec,
                     {n: (v, windows[n]) for n, v in values.items()}, starts)

  result = jax.eval_shape(functools.partial(gemm_p.bind, spec=spec), *args)
  return _mesh_free(sum_and_finish, result, values, ops.starts)


# The k split's sum and epilogue run inside the partitioning callback, whose
# operands carry the caller's mesh.  Under explicit mesh axes (jax.set_mesh
# with AxisType.Explicit) JAX annotates each op's result with its sharding,
# and in a callback's module those annotations survive partitioning: jax
# 0.11 then fails the compile ("No registered implementation for untyped
# custom call to Sharding", or psum's "Unsupported reduction computation").
# The callback's code is per device already, so it is traced and lowered
# here with mesh-free types, through one primitive of ours.
_mesh_free_p = Primitive("jax_dynoff_mesh_free")
_mesh_free_p.multiple_results = True


@_mesh_free_p.def_abstract_eval
def _mesh_free_abstract(*avals, fn, treedef, result):
  del avals, fn, treedef
  return [ShapedArray(result.shape, result.dtype)]


def _mesh_free_lowering(ctx, *args, fn, treedef, result):
  with jax.sharding.use_abstract_mesh(jax.sharding.AbstractMesh((), ())):
    free = dataclasses.replace(
        ctx,
        avals_in=[ShapedArray(a.shape, a.dtype)
                  for a in ctx.avals_in],
        avals_out=[ShapedArray(result.shape, result.dtype)])
    return mlir.lower_fun(
        lambda *leaves: [fn(*jax.tree_util.tree_unflatten(treedef, leaves))],
        multiple_results=True)(free, *args)


mlir.register_lowering(_mesh_free_p, _mesh_free_lowering, cacheable=False)


def _mesh_free(fn, result, *operands):
  """fn(*operands), lowered with mesh-free types (above); `result`: its
  result's shape and dtype."""
  leaves, treedef = jax.tree_util.tree_flatten(operands)
  out, = _mesh_free_p.bind(*leaves, fn=fn, treedef=treedef, result=result)
  return out
