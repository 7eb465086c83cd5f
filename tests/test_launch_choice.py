"""The choice function (ffi/launch_choice.h) through the extension: which
kernel the CUDA handler launches for a plan, on an H200-like device or
another, in a build with or without its sm_90a kernels, with every buffer
base aligned or not.  The handler makes exactly these choices at its
instantiate stage (the GPU tests read them back from its kernel log).  No
GPU needed."""

from __future__ import annotations

import dataclasses

import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

import jax_dynoff as dyn
from jax_dynoff import plan as plan_lib
from jax_dynoff.options import KernelOptions
from jax_dynoff.spec import GemmSpec, WinSpec

BF16 = np.dtype(ml_dtypes.bfloat16)
F32 = np.dtype(np.float32)


def _spec(m=512, n=4096, k=4096, dt=BF16, tb=False, precision="default",
          out=None, **opts):
  b = (n, k) if tb else (k, n)
  return GemmSpec(
      m=m, n=n, k=k, a=WinSpec((m, k), (m, k), (0, 0)),
      b=WinSpec(b, b, (0, 0)), c=None, d=WinSpec((m, n), (m, n), (0, 0)),
      in_dtype=dt, out_dtype=dt if out is None else out, trans_a=False,
      trans_b=tb, c_mode="none",
      has_out=False, alpha=1.0, beta=0.0, precision=precision,
      opts=KernelOptions(**opts))


# Run facts: every base aligned on an H200 with the sm_90a kernels; only
# A's, B's and the workspace's; none; another GPU; a build without sm_90a.
ALIGNED = {}
AB_ONLY = dict(bases_aligned=False)
UNALIGNED = dict(bases_aligned=False, ab_ws_aligned=False)
OTHER_GPU = dict(sm90_device=False)
NO_SM90A = dict(sm90_built=False)


def _choice(spec, facts):
  c = plan_lib.launch_choice(spec, **facts)
  assert c["error"] == "", c
  return c["kind"], c["kernel"], c["split"]


# (spec, facts, (kind, kernel, split)).
CASES = [
    # A medium tile: its direct twin; the generic kernel wherever an SM90
    # kernel cannot run.
    (_spec(), ALIGNED, ("direct", "kSm90DirectMediumBf16NN", 1)),
    (_spec(direct=False), ALIGNED, ("ptr_array", "kSm90MediumBf16Bf16NN", 1)),
    (_spec(), AB_ONLY, ("ptr_array", "kGenericBf16Bf16", 1)),
    (_spec(), OTHER_GPU, ("ptr_array", "kGenericBf16Bf16", 1)),
    (_spec(), NO_SM90A, ("ptr_array", "kGenericBf16Bf16", 1)),
    (_spec(sm90=False), ALIGNED, ("ptr_array", "kGenericBf16Bf16", 1)),
    (_spec(k=0), ALIGNED, ("ptr_array", "kGenericBf16Bf16", 1)),
    # Skinny: its kernel at the planned split; else the tiny tile's planned
    # direct twin (here cluster-K, 2 CTAs along K); unaligned: generic.
    (_spec(m=16), ALIGNED, ("skinny", "kSm90Skinny16Bf16NN", 4)),
    (_spec(m=16, tb=True), ALIGNED, ("skinny", "kSm90Skinny16Bf16NT", 4)),
    (_spec(m=16, skinny=False), ALIGNED,
     ("direct", "kSm90DirectClusterKBf16NN", 2)),
    (_spec(m=16, skinny=False, direct=False), ALIGNED,
     ("ptr_array", "kSm90TinyBf16Bf16NN", 1)),
    (_spec(m=16), AB_ONLY, ("ptr_array", "kGenericBf16Bf16", 1)),
    # Short K: the narrow skinny tile, unsplit (no cluster), B transposed
    # or not; forced either way.
    (_spec(m=8, k=512), ALIGNED, ("skinny", "kSm90SkinnyNarrowBf16NN", 1)),
    (_spec(m=8, k=512, tb=True), ALIGNED,
     ("skinny", "kSm90SkinnyNarrowBf16NT", 1)),
    (_spec(m=8, k=512, dt=np.dtype(np.float16), out=F32), ALIGNED,
     ("skinny", "kSm90SkinnyNarrowF16F32NN", 1)),
    (_spec(m=8, k=512, skinny_tile="wide"), ALIGNED,
     ("skinny", "kSm90Skinny16Bf16NN", 4)),
    (_spec(m=16, skinny_tile="narrow"), ALIGNED,
     ("skinny", "kSm90SkinnyNarrowBf16NN", 1)),
    (_spec(m=8, k=512), NO_SM90A, ("ptr_array", "kGenericBf16Bf16", 1)),
    # A float32 result of bfloat16: its own lines in each family.
    (_spec(m=16, out=F32), ALIGNED, ("skinny", "kSm90Skinny16Bf16F32NN", 4)),
    (_spec(m=16, tb=True, out=F32), ALIGNED,
     ("skinny", "kSm90Skinny16Bf16F32NT", 4)),
    (_spec(m=16, out=F32, skinny=False), ALIGNED,
     ("direct", "kSm90DirectTinyBf16F32NN", 1)),
    (_spec(out=F32), ALIGNED, ("direct", "kSm90DirectMediumBf16F32NN", 1)),
    (_spec(out=F32, direct=False), ALIGNED,
     ("ptr_array", "kSm90MediumBf16F32NN", 1)),
    (_spec(out=F32), AB_ONLY, ("ptr_array", "kGenericBf16F32", 1)),
    # Split-K: the direct kernel; else the ptr-array slices, which need
    # only A, B and the workspace aligned; else generic, unsplit.
    (_spec(m=16, split_k=True), ALIGNED,
     ("direct", "kSm90DirectSplitKBf16NN", 4)),
    (_spec(m=16, split_k=True), AB_ONLY, ("ptr_array", "kSm90SplitKBf16NN", 4)),
    (_spec(m=16, split_k=True, direct=False), ALIGNED,
     ("ptr_array", "kSm90SplitKBf16NN", 4)),
    (_spec(m=16, split_k=True), UNALIGNED,
     ("ptr_array", "kGenericBf16Bf16", 1)),
    # float32: the direct TF32 kernel; CUTLASS 2.x TF32 where no SM90
    # kernel runs; the exact kernel with tf32=False or, off SM90, at
    # HIGHEST; staged ptr-array kernels where the plan staged.
    (_spec(dt=F32), ALIGNED, ("direct", "kSm90DirectMediumF32NN", 1)),
    (_spec(dt=F32), AB_ONLY, ("ptr_array", "kTf32NN", 1)),
    (_spec(dt=F32), OTHER_GPU, ("ptr_array", "kTf32NN", 1)),
    (_spec(dt=F32, tf32=False), ALIGNED, ("ptr_array", "kGenericF32F32", 1)),
    (_spec(dt=F32, direct=False), ALIGNED,
     ("ptr_array", "kSm90Tf32MediumNT", 1)),
    (_spec(dt=F32, tb=True, direct=False), ALIGNED,
     ("ptr_array", "kSm90Tf32MediumNT", 1)),
    (_spec(dt=F32, precision="highest"), ALIGNED,
     ("ptr_array", "kSm90Tf32HighestNT", 1)),
    (_spec(dt=F32, precision="highest"), OTHER_GPU,
     ("ptr_array", "kGenericF32F32", 1)),
]


@pytest.mark.parametrize("spec, facts, want", CASES)
def test_launch_choice(spec, facts, want):
  assert _choice(spec, facts) == want


def test_launch_choice_details():
  """The ptr-array split-K kernel runs slices and a reduction; the CUTLASS
  2.x kernels index batch items with grid z; a staged float32 ptr-array
  kernel reads the staged operands; a direct split-K kernel takes the
  determinism option."""
  c = plan_lib.launch_choice(_spec(m=16, split_k=True), **AB_ONLY)
  assert c["slices"] and not c["grid_z_batch"]
  assert plan_lib.launch_choice(_spec(), **OTHER_GPU)["grid_z_batch"]
  c = plan_lib.launch_choice(_spec(dt=F32, direct=False))
  assert c["staged"] and not c["grid_z_batch"]
  assert not plan_lib.launch_choice(_spec(dt=F32))["staged"]
  c = plan_lib.launch_choice(_spec(m=16, split_k=True, deterministic=False))
  assert c["kernel"] == "kSm90DirectSplitKBf16NN" and not c["deterministic"]
  c = plan_lib.launch_choice(_spec(m=16, skinny=False))
  assert c["cluster_k_tile_n"] == 64


def test_grouped_launch_or_its_error():
  """Ragged windows run the grouped kernel or fail with the reason:
  nothing else takes valid extents."""
  x = jnp.ones((64, 32), BF16)
  w = jnp.ones((32, 48), BF16)

  def g(x, w, v):
    return dyn.gemm(dyn.window(x, (v, 0), (16, 32), valid=(v, 32)), w,
                    out=dyn.window(jnp.zeros((64, 48), x.dtype), (v, 0),
                                   (16, 48), valid=(v, 48)))

  s = plan_lib.first_spec(g, x, w, jnp.int32(5))
  assert plan_lib.plan(s).path == "sm90_grouped"
  c = plan_lib.launch_choice(s)
  assert (c["kind"], c["error"]) == ("grouped", "")
  # One item of 16 rows' capacity: at the small-group forward kernel's
  # bound (plan.SMALL_GROUP_FWD_MAX_MEAN_ROWS); with the CUTLASS tile
  # forced, the CUTLASS grouped kernel.
  assert c["kernel"] == "kSm90SmallGroupFwdBf16NN"
  medium = dyn.KernelOptions(grouped_tile="medium")
  c = plan_lib.launch_choice(dataclasses.replace(s, opts=medium))
  assert c["kernel"] == "kSm90GroupedBf16NN" and c["kind"] == "grouped"
  assert "compute capability 9.0" in plan_lib.launch_choice(
      s, sm90_device=False)["error"]
  assert "sm_90a" in plan_lib.launch_choice(s, sm90_built=False)["error"]
  assert "16-byte aligned" in plan_lib.launch_choice(
      s, bases_aligned=False)["error"]
