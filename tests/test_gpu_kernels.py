"""The CUDA kernels: path planning, every kernel against the reference, the
SM90 -> generic fallback rule, pointer arrays, C copies, clamping.

The plan tests (static: no GPU needed) run everywhere; everything that runs
a kernel is skipped when jax has no GPU.  Inputs are random and outputs are
poisoned (NaN) before each call, so an unwritten window never passes.

Run on a GPU machine:  pytest -v tests/test_gpu_kernels.py
Which kernel ran:      JAX_DYNOFF_LOG=1 (the handler prints one line a call)
Kernel overrides (a forced tile, split-K, a kernel switched off) are
`KernelOptions` passed to the gemm calls a test traces (or set on the specs
it plans).  Split-K is opt-in, planned only with `split_k=True`: the direct
split-K kernel where its windows suit it, else the ptr-array slices.
"""

from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

import jax_dynoff as dyn
from checks import bits, ref_highest, run_logged
from jax_dynoff import plan as plan_lib
from strategies import clamp_start
from jax_dynoff.options import KernelOptions
from jax_dynoff.spec import GemmSpec, WinSpec

on_gpu = pytest.mark.skipif(jax.default_backend() != "gpu",
                            reason="needs a CUDA GPU")
gpu = [pytest.mark.gpu, on_gpu]

BF16, F16, F32 = jnp.bfloat16, jnp.float16, jnp.float32


def _is_sm90() -> bool:
  if jax.default_backend() != "gpu":
    return False
  cc = getattr(jax.devices()[0], "compute_capability", "")
  return str(cc) in ("9.0", "90")


# ---------------------------------------------------------------------------
# Static: the plan and its alignment proof (no GPU).

def _spec(m=512, n=4096, k=4096, a=None, b=None, c=None, d=None,
          dt=np.dtype(BF16), out_dt=None, ta=False, tb=False, c_mode="none",
          beta=0.0, batch_shape=(), opts=KernelOptions()):
  out_dt = dt if out_dt is None else out_dt
  a = a or WinSpec((k, m) if ta else (m, k), (k, m) if ta else (m, k), (0, 0))
  b = b or WinSpec((n, k) if tb else (k, n), (n, k) if tb else (k, n), (0, 0))
  # D carries every batch dim (A and B default to one matrix for all items).
  d = d or WinSpec((m, n), (m, n), (0, 0), (True,) * len(batch_shape))
  return GemmSpec(m=m, n=n, k=k, a=a, b=b, c=c, d=d, in_dtype=np.dtype(dt),
                  out_dtype=np.dtype(out_dt), trans_a=ta, trans_b=tb,
                  c_mode=c_mode, has_out=False, alpha=1.0, beta=beta,
                  precision="default", batch_shape=batch_shape, opts=opts)


def _opts(spec, **options):
  """`spec` with KernelOptions(**options) in place of its options."""
  return dataclasses.replace(spec, opts=KernelOptions(**options))


def _split_k(slices=None, **options):
  """Options that plan split-K with `slices` slices (None: the plan's
  choice), and `options` besides."""
  return KernelOptions(split_k=True, split_k_slices=slices, **options)


SPLITK = _split_k()


def _unsplit_sm90(path):
  return path.startswith("sm90") and path != "sm90_split_k"


# The tile the wave model picks at each shape the sweep measured
# (benchmarks/sm90_tiles, H200), and one per remaining tile.
@pytest.mark.parametrize("m,n,k,want", [
    (2048, 2048, 2048, "sm90_large"),   # 128 large tiles: one wave
    (4096, 4096, 4096, "sm90_large"),
    (8192, 8192, 8192, "sm90_large"),
    (512, 4096, 4096, "sm90_medium"),   # 64 large tiles would idle half
    (256, 4096, 4096, "sm90_small_m"),
    (128, 4096, 4096, "sm90_tiny"),     # 128 tiles of 64x64
])
def test_plan_tile_choice(m, n, k, want):
  assert plan_lib.plan(_spec(m=m, n=n, k=k)).path == want
  times = plan_lib.sm90_tile_times(_spec(m=m, n=n, k=k))
  assert min(times, key=times.get) == want.removeprefix("sm90_")


def test_plan_aligned_bf16_takes_sm90():
  for ta, tb in [(False, True), (True, False)]:
    assert _unsplit_sm90(plan_lib.plan(_spec(ta=ta, tb=tb)).path)
  # The model counts batch items as tiles too.
  assert plan_lib.plan(_spec(m=256, n=1024, k=1024,
                             batch_shape=(64,))).path == "sm90_large"


def test_plan_forced_tile():
  for tile in plan_lib.SM90_TILES:
    opts = KernelOptions(tile=tile)
    assert plan_lib.plan(_spec(m=4096, opts=opts)).path == "sm90_" + tile
    # Forcing never makes an uncovered call take SM90.
    assert plan_lib.plan(_spec(ta=True, tb=True, opts=opts)).path == "generic"
  with pytest.raises(ValueError, match="KernelOptions.tile"):
    KernelOptions(tile="huge")


def test_plan_uncovered_combinations_are_generic():
  assert plan_lib.plan(_spec(ta=True, tb=True)).path == "generic"
  assert plan_lib.plan(_spec(ta=True, tb=True, dt=np.dtype(F16),
                             out_dt=np.dtype(F32))).path == "generic"


@pytest.mark.parametrize("dt", [BF16, F16])
@pytest.mark.parametrize("ta,tb", [(False, False), (False, True),
                                   (True, False)])
def test_plan_float32_out_and_float16_transposes_take_sm90(dt, ta, tb):
  """16-bit inputs with a float32 result (preferred_element_type), and
  float16 with one operand transposed, have SM90 ptr-array kernels at every
  tile: the wave model picks among the same four tiles as for bfloat16."""
  for out_dt in {np.dtype(dt), np.dtype(F32)}:
    for m, want in [(4096, "sm90_large"), (512, "sm90_medium"),
                    (256, "sm90_small_m"), (128, "sm90_tiny")]:
      s = _spec(m=m, dt=np.dtype(dt), out_dt=out_dt, ta=ta, tb=tb)
      assert plan_lib.plan(s).path == want, (out_dt, m)
    assert set(plan_lib.SM90_KERNELS[
        (np.dtype(dt).name, out_dt.name, ta, tb)]) == set(plan_lib.SM90_TILES)


def test_plan_float32_tf32_unless_highest():
  """float32: the SM90 TF32 kernels where TMA can read the windows they
  read in place (tests/test_gpu_tf32.py has the rest), else the CUTLASS
  2.x TF32 kernel (any alignment); HIGHEST: 3xTF32 on the SM90 kernels,
  else the exact generic kernel."""
  f32 = np.dtype(F32)
  assert plan_lib.plan(_spec(dt=f32)).path.startswith("sm90_")
  # B (transposed: K-major) read in place at an odd column: the TF32
  # kernels take 4-byte alignment.
  b = WinSpec((4096, 4099), (4096, 4096), (None, 3))
  assert plan_lib.plan(_spec(m=4096, k=4096, dt=f32, b=b, ta=True,
                             tb=True)).path == "tf32"
  s = dataclasses.replace(_spec(dt=f32), precision="highest")
  assert plan_lib.plan(s).path.startswith("sm90_")
  assert "3xTF32" in plan_lib.explain(s)
  d = WinSpec((512, 4099), (512, 4096), (0, 3))
  s = dataclasses.replace(_spec(dt=f32, d=d), precision="highest")
  assert plan_lib.plan(s).path == "generic"
  assert "highest" in plan_lib.explain(s)
  assert plan_lib.plan(_spec(k=0)).path == "generic"


def test_alignment_proof():
  # Dynamic row start of a row-major window: stride = ld = 4096 elements.
  a = WinSpec((8192, 4096), (512, 4096), (None, 0))
  assert plan_lib.plan(_spec(a=a)).path.startswith("sm90")
  # Dynamic column start: stride 1 element = 2 bytes.
  a = WinSpec((512, 8192), (512, 4096), (0, None))
  assert plan_lib.plan(_spec(a=a)).path == "generic"
  assert "a" in plan_lib.alignment_proof(_spec(a=a))
  # ... unless the window spans the dim (the start always clamps to 0).
  a = WinSpec((512, 4096), (512, 4096), (None, None))
  assert plan_lib.plan(_spec(a=a)).path.startswith("sm90")
  # Odd static offset, odd leading dimension, odd width.
  a = WinSpec((512, 4104), (512, 4096), (0, 3))
  assert plan_lib.plan(_spec(a=a)).path == "generic"
  a = WinSpec((512, 4099), (512, 4096), (0, 0))
  assert plan_lib.plan(_spec(a=a)).path == "generic"
  assert plan_lib.plan(_spec(k=4092)).path == "generic"
  # A stacked-weights index: leading dim stride k*n elements.
  b = WinSpec((32, 4096, 4096), (1, 4096, 4096), (None, 0, 0))
  assert plan_lib.plan(_spec(b=b)).path.startswith("sm90")
  # Batch strides (vmap): 3 x 8 elements of 2 bytes = 48 bytes: aligned.
  d = WinSpec((3, 8), (3, 8), (0, 0), (True,))
  s = _spec(m=3, n=8, k=8, d=d, batch_shape=(4,))
  assert "d" not in plan_lib.alignment_proof(s)
  # f32 A batched with 3 x 5 elements of 4 bytes = 60 bytes: not aligned
  # (and its width 5 x 4 bytes is not either).
  a = WinSpec((3, 5), (3, 5), (0, 0), (True,))
  s = _spec(m=3, n=8, k=5, a=a, dt=np.dtype(F32), batch_shape=(4,))
  assert any("batch dim 0" in r for r in plan_lib.alignment_proof(s)["a"])


def test_workspace_layout():
  s = _spec(m=128)
  p = plan_lib.plan(s)
  assert p.workspace_bytes == plan_lib.SM90_KERNEL_WORKSPACE + 256
  # float32, both operands K-major: the SM90 TF32 kernel, nothing staged;
  # B not transposed: the direct TF32 kernel, nothing staged, or (direct=
  # False) the ptr-array kernel with B staged (tests/test_planner.py has
  # the layout).
  s = _spec(dt=np.dtype(F32), tb=True)
  assert plan_lib.plan(s).workspace_bytes == plan_lib.SM90_KERNEL_WORKSPACE + 256
  s = _spec(dt=np.dtype(F32))
  assert plan_lib.plan(s).workspace_bytes == plan_lib.SM90_KERNEL_WORKSPACE + 256
  s = _spec(dt=np.dtype(F32), opts=KernelOptions(direct=False))
  assert plan_lib.plan(s).workspace_bytes == (
      plan_lib.SM90_KERNEL_WORKSPACE + 512 + 4096 * 4096 * 4)
  # C from D's buffer with beta != 0: room for a copy of C per batch item.
  c = WinSpec((1024, 4096), (512, 4096), (None, 0))
  s = _spec(c=c, d=c, c_mode="from_d", beta=1.0)
  lay = plan_lib.workspace_layout(s, plan_lib.plan(s).path)
  assert lay.scratch_item == 512 * 4096 * 2
  assert plan_lib.plan(s).workspace_bytes == lay.total


# ---------------------------------------------------------------------------
# Static: the split-K plan (opt-in: only with KernelOptions(split_k=True)).

def test_split_k_only_when_asked():
  # D inside a taller buffer (16 rows: no multiple of 128): the direct
  # split-K kernel cannot store it; the ptr-array slices' rule applies.
  d = WinSpec((48, 4096), (16, 4096), (None, 0))
  s = _spec(m=16, d=d)
  assert s.opts == KernelOptions() and not s.opts.split_k  # the default
  assert not plan_lib.split_k_direct(s)
  assert _unsplit_sm90(plan_lib.plan(s).path)
  assert _unsplit_sm90(plan_lib.plan(_opts(s, split_k=False)).path)
  s = _opts(s, split_k=True)
  assert plan_lib.plan(s) == plan_lib.Plan(
      "sm90_split_k", 8, plan_lib.workspace_layout(s, "sm90_split_k", 8).total)
  assert "ptr-array slices + reduction: out: m = 16" in plan_lib.explain(s)
  # The whole output (x @ W[i] into a new array): the direct kernel.
  s = _spec(m=16, opts=SPLITK)
  assert plan_lib.split_k_direct(s) and plan_lib.direct_kernel(s) == "split_k"
  assert plan_lib.plan(s) == plan_lib.Plan(
      "sm90_split_k", 4, plan_lib.workspace_layout(s, "sm90_split_k", 4).total)
  assert "split_k 4, direct kernel" in plan_lib.explain(s)
  assert plan_lib.plan(_opts(s)).path == "sm90_skinny"


# The direct kernel's slices: the most whose CTAs (128x128 output tiles x
# slices) fit one wave of 132 SMs, among the equal-slice candidates.
@pytest.mark.parametrize("m,n,k,want", [
    (16, 4096, 4096, 4),      # 32 tiles x 4 = 128 CTAs
    (1, 4096, 4096, 4),
    (128, 4096, 4096, 4),
    (256, 4096, 4096, 2),     # 64 tiles x 2
    (16, 2048, 2048, 8),      # 16 tiles x 8
    (64, 8192, 8192, 2),      # 64 tiles
    (16, 1024, 4096, 16),     # 8 tiles x 16 (slices of 256)
    (16, 8448, 4096, 2),      # 66 tiles x 2 = 132
    (16, 8576, 4096, 2),      # 67 tiles: none fits, the fewest
])
def test_direct_split_k_slices(m, n, k, want):
  s = _spec(m=m, n=n, k=k, opts=SPLITK)
  assert plan_lib.split_k_direct(s)
  p = plan_lib.plan(s)
  assert (p.path, p.split_k) == ("sm90_split_k", want)


@pytest.mark.parametrize("m,n,k,batch,want", [
    # The stacked-layer shape (m = 16, n = k = 4096): 32 tiles of 64x128 -> 8 slices of 512 (256 CTAs).
    (16, 4096, 4096, (), 8),
    (64, 4096, 4096, (), 8),
    (1, 4096, 4096, (), 8),
    # Few tiles: as many slices as allowed (>= 128 deep, partial traffic
    # at most the bytes of B: S <= k * 2 / (8 * m) for 16-bit inputs).
    (1, 256, 4096, (), 32),
    (64, 256, 4096, (), 16),
    (16, 1024, 4096, (), 32),
    (1, 256, 256, (), 2),
    # K that is not a multiple of 64 * S: slices of 520 (a multiple of 16
    # bytes; the last k-tile of each slice is zero-filled by TMA).
    (16, 4096, 4160, (), 8),
    # vmap: the batch multiplies the tiles.
    (16, 1024, 2048, (3,), 16),
    (16, 4096, 4096, (2,), 4),
])
def test_split_k_choice(m, n, k, batch, want):
  # The ptr-array slices' rule: D inside a taller buffer (m rows: no
  # multiple of the direct split-K tile's 128), as in a KV cache.
  s = _spec(m=m, n=n, k=k, batch_shape=batch, d=WinSpec(
      (m + 8, n), (m, n), (0, 0), (True,) * len(batch)), opts=SPLITK)
  assert not plan_lib.split_k_direct(s)
  p = plan_lib.plan(s)
  assert (p.path, p.split_k) == ("sm90_split_k", want), \
      plan_lib.split_k_reasons(s)
  assert want in plan_lib.split_k_candidates(s)
  assert plan_lib.explain(s).startswith(f"sm90_split_k (split_k {want},")


def test_split_k_not_planned():
  def path(**kw):
    return plan_lib.plan(_spec(opts=SPLITK, **kw)).path
  assert _unsplit_sm90(path(m=257))                   # not skinny
  assert _unsplit_sm90(path(m=16, n=4096 * 8))        # 256 tiles fill the GPU
  assert _unsplit_sm90(path(m=16, k=1000))            # no equal 16-byte slices
  assert path(m=16, k=1000 + 8) == "sm90_split_k"     # 1008 = 2 x 504
  assert _unsplit_sm90(path(m=16, tb=True))           # NN only
  assert _unsplit_sm90(path(m=16, ta=True))
  assert _unsplit_sm90(path(m=16, dt=np.dtype(F32)))  # 16-bit inputs only
  assert path(m=16, k=0) == "generic"
  # A not provably aligned: neither SM90 path.
  a = WinSpec((16, 8192), (16, 4096), (0, None))
  assert path(m=16, a=a) == "generic"
  reasons = plan_lib.split_k_reasons(_spec(m=16, a=a, opts=SPLITK))
  assert any(r.startswith("a: ") for r in reasons), reasons


def test_split_k_ignores_c_and_d_alignment():
  # D and C are only touched by the reduction kernel: any alignment, and any
  # output dtype (the reduction casts).
  d = WinSpec((40, 4100), (16, 4096), (None, 3))
  s = _spec(m=16, d=d, opts=SPLITK)
  assert plan_lib.alignment_proof(s).get("d")
  assert plan_lib.plan(s).path == "sm90_split_k"
  # ... though not the direct split-K kernel, which stores D with TMA.
  assert not plan_lib.split_k_direct(s)
  assert any(r.startswith("d: ") for r in plan_lib.direct_reasons(s))
  assert plan_lib.plan(_spec(m=16, out_dt=np.dtype(F32),
                             opts=SPLITK)).path == "sm90_split_k"
  c = WinSpec((40, 4100), (16, 4096), (None, 1))
  s = _spec(m=16, c=c, d=d, c_mode="from_d", beta=0.5, opts=SPLITK)
  assert plan_lib.plan(s).path == "sm90_split_k"


def test_split_k_forced_slices():
  s = _spec(m=16, opts=_split_k(16))
  assert plan_lib.plan(s).split_k == 16
  s = _opts(s, split_k=True, split_k_slices=64)   # 64 slices of 64
  assert plan_lib.plan(s).split_k == 64
  # Forced even when the tiles would fill the GPU.
  assert plan_lib.plan(_spec(m=16, n=4096 * 8, opts=_split_k(64))).split_k == 64
  s = _opts(s, split_k=True, split_k_slices=3)    # 4096 / 3: not equal
  with pytest.raises(ValueError, match="split_k_slices=3: k = 4096 "):
    plan_lib.plan(s)
  for bad in ("x", "8", 0, -2, 2.0, True):
    with pytest.raises(ValueError, match="KernelOptions.split_k_slices"):
      _split_k(bad)


def test_split_k_workspace_layout():
  # m = 16, n = k = 4096, 8 slices: 512 KiB of CUTLASS scratch plus the
  # direct split-K kernel's (32 float32 tiles of 128 x 128, 32 x 2 barriers
  # of 4 bytes rounded to 128), 4 * 8 + 2 pointers (rounded to 256 bytes),
  # 8 float32 partials of 16 x 4096.
  s = _spec(m=16, opts=SPLITK)
  assert plan_lib.direct_split_k_workspace(s) == 32 * 128 * 128 * 4 + 256
  kernel = plan_lib.SM90_KERNEL_WORKSPACE + 32 * 128 * 128 * 4 + 256
  lay = plan_lib.workspace_layout(s, "sm90_split_k", 8)
  assert lay.kernel_bytes == lay.ptrs == kernel
  assert lay.ptr_count == 4 * 8 + 2
  assert lay.scratch == kernel + 512
  assert lay.scratch_item == 0 and lay.partials == lay.scratch
  assert lay.partial_item == 16 * 4096 * 4
  assert lay.total == kernel + 512 + 8 * 16 * 4096 * 4
  assert plan_lib.plan(_opts(s, split_k=True, split_k_slices=8)
                       ).workspace_bytes == lay.total
  # Batched, C copied from D's buffer, partials rounded to 256 bytes:
  # m = 3, n = 20 -> 240 bytes -> 256.
  c = WinSpec((64, 24), (3, 20), (None, 0), (True,))
  s = _spec(m=3, n=20, k=256, c=c, d=c, c_mode="from_d", beta=2.0,
            batch_shape=(5,), opts=SPLITK)
  lay = plan_lib.workspace_layout(s, "sm90_split_k", 2)
  items = 5 * 2
  # One direct split-K tile: 65536 + 128 bytes, rounded to 256.
  kernel = plan_lib.SM90_KERNEL_WORKSPACE + 65536 + 256
  assert lay.ptr_count == 4 * items + 2 * 5
  assert lay.scratch == kernel + 512                         # 400 -> 512
  assert lay.scratch_item == 256                # (2 * 24 + 20) * 2 = 136
  assert lay.partials == lay.scratch + 5 * 256
  assert lay.partial_item == 256
  assert lay.total == lay.partials + items * 256
  # The unsplit layout is unchanged by the new fields (and a split-K plan
  # that falls back to the generic kernel fits in the bigger workspace).
  unsplit = plan_lib.workspace_layout(s, "sm90_small_m")
  assert unsplit.ptr_count == 4 * 5 and unsplit.partial_item == 0
  assert unsplit.total == unsplit.scratch + 5 * 256
  assert unsplit.total <= lay.total
  with pytest.raises(ValueError):
    plan_lib.workspace_layout(s, "sm90_split_k", 0)


def test_split_k_lowering_for_cuda():
  """Lowered for CUDA (on any machine): the call's plan attribute carries
  the split-K path and the slice count, and the workspace result has the
  planned size."""
  import re
  m, n, k = 16, 4096, 4096
  x = np.zeros((m, k), BF16)
  w = np.zeros((3, k, n), BF16)

  def call(opts):
    return lambda x, w, i: dyn.gemm(x, dyn.window(w, (i, 0, 0), (k, n)),
                                    opts=opts)

  def lower_cuda(f):
    return jax.jit(f).trace(*args).lower(
        lowering_platforms=("cuda",)).as_text()

  def plan_of(text):
    # The plan dictionary attribute: path = "...", split_k = 4 : i64, ...
    found = re.search(r"plan = \{([^}]*)\}", text)
    assert found, text
    fields = dict(re.findall(r'(\w+) = ("[^"]*"|-?\d+)', found.group(1)))
    return fields["path"].strip('"'), int(fields["split_k"])

  args = (x, w, np.int32(1))
  (s,) = plan_lib.traced_specs(call(SPLITK), *args)
  assert s.opts == SPLITK
  p = plan_lib.plan(s)
  assert (p.path, p.split_k) == ("sm90_split_k", 4)   # the direct kernel's
  text = lower_cuda(call(SPLITK))
  assert f"tensor<{p.workspace_bytes}xui8>" in text, text
  assert plan_of(text) == ("sm90_split_k", 4), text
  # With split_k=False the same call plans the unsplit kernel.
  unsplit_opts = KernelOptions(split_k=False)
  (s0,) = plan_lib.traced_specs(call(unsplit_opts), *args)
  assert s0 == _opts(s, split_k=False)
  unsplit = plan_lib.plan(s0)
  assert _unsplit_sm90(unsplit.path)
  text = lower_cuda(call(unsplit_opts))
  assert f"tensor<{p.workspace_bytes}xui8>" not in text
  assert plan_of(text) == (unsplit.path, 1), text


# ---------------------------------------------------------------------------
# GPU: every kernel against the reference.

def _rand(key, shape, dtype):
  return jax.random.uniform(key, shape, F32, -1, 1).astype(dtype)


def _check(got, want, in_dt, out_dt, k, precision=None):
  got = np.asarray(got.astype(F32))
  want = np.asarray(want.astype(F32))
  assert np.isfinite(got).all(), "NaN/inf in the output: window not written?"
  scale = max(1.0, float(np.abs(want).max()))
  tol = {np.dtype(BF16): 2 ** -7, np.dtype(F16): 2 ** -10}.get(
      np.dtype(out_dt), 1e-5 if precision == "highest" else 2e-3)
  if np.dtype(in_dt) == np.dtype(F32) and precision != "highest":
    tol = max(tol, 2e-3)  # reference may use tf32
  err = float(np.abs(got - want).max()) / scale
  assert err <= tol * 4, f"max error {err:.3g} (scaled), tolerance {tol * 4:.3g}"


PAIRS = [(BF16, BF16), (BF16, F32), (F16, F16), (F16, F32), (F32, F32)]
TRANS = [(False, False), (False, True), (True, False), (True, True)]


def _operands(key, m, n, k, in_dt, ta, tb, pad):
  """A and B inside bigger arrays, windows at dynamic row starts."""
  ka, kb = jax.random.split(key)
  ar, ac = (k, m) if ta else (m, k)
  br, bc = (n, k) if tb else (k, n)
  a = _rand(ka, (ar + 3 * 8, ac + pad), in_dt)
  b = _rand(kb, (br + 5 * 8, bc + pad), in_dt)
  return a, b, (ar, ac), (br, bc)


@pytest.mark.parametrize("in_dt,out_dt", PAIRS)
@pytest.mark.parametrize("ta,tb", TRANS)
@pytest.mark.parametrize("aligned", [True, False])
@pytest.mark.gpu
@on_gpu
def test_kernels_match_reference(in_dt, out_dt, ta, tb, aligned):
  m, n, k = (320, 256, 192) if aligned else (37, 45, 29)
  pad = 0 if aligned else 3   # odd leading dimensions: generic
  a, b, wa, wb = _operands(jax.random.key(1), m, n, k, in_dt, ta, tb, pad)
  col = 0 if aligned else 1   # static odd column start: generic
  out = jnp.full((m + 16, n + 8), jnp.nan, out_dt)

  def f(mod, a, b, out, ia, ib, io):
    return mod.gemm(dyn.window(a, (ia, col), wa), dyn.window(b, (ib, col), wb),
                    out=dyn.window(out, (io, 8), (m, n)), transpose_a=ta,
                    transpose_b=tb)

  args = (a, b, out, jnp.int32(8), jnp.int32(16), jnp.int32(5))
  paths = plan_lib.traced_paths(lambda *x: f(dyn, *x), *args)
  assert len(paths) == 1
  covered = (np.dtype(in_dt).name, np.dtype(out_dt).name, ta, tb) in \
      plan_lib.SM90_KERNELS
  assert paths[0].startswith("sm90") == (aligned and covered), paths
  if np.dtype(in_dt) == np.float32 and not aligned:
    assert paths == ["tf32"]   # any alignment
  got = jax.jit(lambda *x: f(dyn, *x))(*args)
  want = ref_highest(lambda *x: f(dyn.reference, *x))(*args)
  # Outside the window: untouched (NaN stays NaN, bit for bit).
  outside = np.ones(got.shape, bool)
  outside[5:5 + m, 8:8 + n] = False
  assert np.isnan(np.asarray(got.astype(F32))[outside]).all()
  _check(got[5:5 + m, 8:8 + n], want[5:5 + m, 8:8 + n], in_dt, out_dt, k)


@pytest.mark.parametrize("shape,path", [((2048, 4096, 512), "sm90_large"),
                                        ((512, 4096, 1024), "sm90_medium"),
                                        ((256, 4096, 1024), "sm90_small_m"),
                                        ((128, 4096, 1024), "sm90_tiny")])
@pytest.mark.parametrize("dt", [BF16, F16])
@pytest.mark.gpu
@on_gpu
def test_sm90_tiles_large_problems(shape, path, dt):
  m, n, k = shape
  ks = jax.random.split(jax.random.key(2), 3)
  x = _rand(ks[0], (m, k), dt)
  w = _rand(ks[1], (4, k, n), dt)
  buf = jnp.full((3 * m, n), jnp.nan, dt)

  def f(mod, x, w, buf, i, r):
    return mod.gemm(x, dyn.window(w, (i, 0, 0), (k, n)),
                    out=dyn.window(buf, (r, 0), (m, n)))

  args = (x, w, buf, jnp.int32(2), jnp.int32(m))
  assert plan_lib.traced_paths(lambda *a: f(dyn, *a), *args) == [path]
  got = jax.jit(lambda *a: f(dyn, *a))(*args)
  want = ref_highest(lambda *a: f(dyn.reference, *a))(*args)
  _check(got[m:2 * m], want[m:2 * m], dt, dt, k)
  assert np.isnan(np.asarray(got[:m].astype(F32))).all()


@pytest.mark.parametrize("tile,key", [
    (t, key) for key in sorted(plan_lib.SM90_KERNELS)
    for t in plan_lib.SM90_KERNELS[key]])
@pytest.mark.gpu
@on_gpu
def test_every_sm90_kernel(tile, key):
  """Each tile x (dtypes, transposes) kernel, forced: a shape that is no
  multiple of any tile, operands and output inside bigger buffers at device
  offsets, alpha/beta with C, NaN-poisoned output kept outside the window."""
  in_name, out_name, ta, tb = key
  in_dt, out_dt = jnp.dtype(in_name), jnp.dtype(out_name)
  opts = KernelOptions(tile=tile)
  m, n, k = 200, 328, 136    # multiples of 8 (TMA), not of any tile
  a, b, wa, wb = _operands(jax.random.key(5), m, n, k, in_dt, ta, tb, 8)
  c = _rand(jax.random.key(6), (m, n), out_dt)
  out = jnp.full((m + 24, n + 16), jnp.nan, out_dt)

  def f(mod, a, b, c, out, ia, ib, io):
    return mod.gemm(dyn.window(a, (ia, 8), wa), dyn.window(b, (ib, 0), wb),
                    c, out=dyn.window(out, (io, 8), (m, n)), transpose_a=ta,
                    transpose_b=tb, alpha=0.5, beta=-2.0, opts=opts)

  args = (a, b, c, out, jnp.int32(8), jnp.int32(24), jnp.int32(16))
  assert plan_lib.traced_paths(lambda *x: f(dyn, *x), *args) == \
      ["sm90_" + tile]
  got = jax.jit(lambda *x: f(dyn, *x))(*args)
  want = ref_highest(lambda *x: f(dyn.reference, *x))(*args)
  outside = np.ones(got.shape, bool)
  outside[16:16 + m, 8:8 + n] = False
  np.testing.assert_array_equal(bits(got)[outside], bits(out)[outside])
  _check(got[16:16 + m, 8:8 + n], want[16:16 + m, 8:8 + n], in_dt, out_dt, k)


@pytest.mark.parametrize("precision", [None, lax.Precision.HIGHEST])
@pytest.mark.gpu
@on_gpu
def test_f32_precision(precision):
  ks = jax.random.split(jax.random.key(3))
  a, b = _rand(ks[0], (96, 80), F32), _rand(ks[1], (80, 72), F32)
  paths = plan_lib.traced_paths(
      lambda a, b: dyn.gemm(a, b, precision=precision), a, b)
  assert len(paths) == 1 and paths[0].startswith("sm90_"), paths
  got = jax.jit(lambda a, b: dyn.gemm(a, b, precision=precision))(a, b)
  want = ref_highest(lambda a, b: dyn.reference.gemm(a, b))(a, b)
  _check(got, want, F32, F32, 80,
         "highest" if precision is not None else None)


# ---------------------------------------------------------------------------
# GPU: offsets (clamping, int64, device tables, loops, vmap).

@pytest.mark.parametrize("dt", [BF16, F32])
@pytest.mark.parametrize("start", [-1, -300, 10 ** 6, -(2 ** 31), 2 ** 31 - 1])
@pytest.mark.gpu
@on_gpu
def test_clamped_offsets_int32(dt, start):
  m, n, k = 64, 128, 64
  ks = jax.random.split(jax.random.key(4), 3)
  a = _rand(ks[0], (256, k), dt)
  b = _rand(ks[1], (k, n), dt)
  out = jnp.full((200, n), jnp.nan, dt)

  def f(mod, a, b, out, s):
    return mod.gemm(dyn.window(a, (s, 0), (m, k)), b,
                    out=dyn.window(out, (s, 0), (m, n)))

  args = (a, b, out, jnp.int32(start))
  got = jax.jit(lambda *x: f(dyn, *x))(*args)
  want = ref_highest(lambda *x: f(dyn.reference, *x))(*args)
  rows = ~np.isnan(np.asarray(want.astype(F32))).any(axis=1)
  np.testing.assert_array_equal(
      ~np.isnan(np.asarray(got.astype(F32))).any(axis=1), rows)
  _check(got[rows], want[rows], dt, dt, k)


@pytest.mark.parametrize("start", [-(2 ** 63), 2 ** 63 - 1, -5, 7])
@pytest.mark.gpu
@on_gpu
def test_clamped_offsets_int64(start):
  m, n, k = 64, 128, 64
  with jax.enable_x64(True):
    ks = jax.random.split(jax.random.key(5), 2)
    a = _rand(ks[0], (256, k), BF16)
    b = _rand(ks[1], (k, n), BF16)

    def f(mod, a, b, s):
      return mod.gemm(dyn.window(a, (s, 0), (m, k)), b)

    args = (a, b, jnp.int64(start))
    got = jax.jit(lambda *x: f(dyn, *x))(*args)
    want = ref_highest(lambda *x: f(dyn.reference, *x))(*args)
    _check(got, want, BF16, BF16, k)


@pytest.mark.parametrize("dt", [BF16, F32])
@pytest.mark.gpu
@on_gpu
def test_fori_loop_device_table(dt):
  m, n, k, layers = 128, 256, 128, 6
  ks = jax.random.split(jax.random.key(6), 3)
  x = _rand(ks[0], (m, k), dt)
  w = _rand(ks[1], (layers, k, n), dt)
  table = jnp.asarray(np.random.default_rng(0).permutation(layers) * m,
                      jnp.int32)
  buf = jnp.full((layers * m, n), jnp.nan, dt)

  def f(mod, x, w, buf, table):
    def body(i, buf):
      return mod.gemm(x, dyn.window(w, (i, 0, 0), (k, n)),
                      out=dyn.window(buf, (table[i], 0), (m, n)))
    return lax.fori_loop(0, layers, body, buf)

  got = jax.jit(lambda *a: f(dyn, *a))(x, w, buf, table)
  want = ref_highest(lambda *a: f(dyn.reference, *a))(x, w, buf, table)
  _check(got, want, dt, dt, k)
  # New table, same compiled loop (a captured graph must read new offsets).
  table2 = jnp.roll(table, 1)
  got = jax.jit(lambda *a: f(dyn, *a))(x, w, buf, table2)
  want = ref_highest(lambda *a: f(dyn.reference, *a))(x, w, buf, table2)
  _check(got, want, dt, dt, k)


@pytest.mark.parametrize("dt", [BF16, F16, F32])
@pytest.mark.gpu
@on_gpu
def test_vmap_batched_offsets(dt):
  m, n, k, nb = 64, 128, 64, 5
  ks = jax.random.split(jax.random.key(7), 2)
  a = _rand(ks[0], (512, k), dt)
  b = _rand(ks[1], (nb, k, n), dt)
  rows = jnp.asarray([0, 64, 448, -64, 1000], jnp.int32)

  def f(mod, a, b, r):
    return mod.gemm(dyn.window(a, (r, 0), (m, k)), b)

  got = jax.jit(jax.vmap(lambda b, r: f(dyn, a, b, r)))(b, rows)
  want = ref_highest(jax.vmap(lambda b, r: f(dyn.reference, a, b, r)))(
      b, rows)
  _check(got, want, dt, dt, k)


# ---------------------------------------------------------------------------
# GPU: C read from D's own buffer (in place, partial overlap, disjoint).

@pytest.mark.parametrize("dt", [BF16, F32])
@pytest.mark.parametrize("c_row,c_col", [(8, 0), (8 + 16, 0), (8 + 40, 0),
                                         (8 + 100, 0), (8, 8), (200, 64)])
@pytest.mark.gpu
@on_gpu
def test_c_from_out_windows(dt, c_row, c_col):
  m, n, k = 64, 128, 64
  ks = jax.random.split(jax.random.key(8), 3)
  a, b = _rand(ks[0], (m, k), dt), _rand(ks[1], (k, n), dt)
  buf = _rand(ks[2], (320, 256), dt)

  def f(mod, a, b, buf, cr, dr):
    return mod.gemm(a, b, dyn.window(buf, (cr, c_col), (m, n)),
                    out=dyn.window(buf, (dr, 0), (m, n)), alpha=0.5,
                    beta=-1.25)

  args = (a, b, buf, jnp.int32(c_row), jnp.int32(8))
  got = jax.jit(lambda *x: f(dyn, *x))(*args)
  want = ref_highest(lambda *x: f(dyn.reference, *x))(*args)
  _check(got, want, dt, dt, k)


@pytest.mark.gpu
@on_gpu
def test_in_place_accumulate_loop():
  m, n, k, steps = 128, 256, 64, 4
  ks = jax.random.split(jax.random.key(9), 3)
  x = _rand(ks[0], (steps, m, k), BF16)
  w = _rand(ks[1], (k, n), BF16)
  acc = _rand(ks[2], (2 * m, n), F32)

  def f(mod, x, w, acc):
    def body(i, acc):
      win = dyn.window(acc, (m * (i % 2), 0), (m, n))
      return mod.gemm(dyn.window(x, (i, 0, 0), (m, k)), w, win, out=win)
    return lax.fori_loop(0, steps, body, acc)

  got = jax.jit(lambda *a: f(dyn, *a))(x, w, acc)
  want = ref_highest(lambda *a: f(dyn.reference, *a))(x, w, acc)
  _check(got, want, BF16, F32, k)


# ---------------------------------------------------------------------------
# The skinny kernel (path sm90_skinny: m <= 16): the plan, then the kernel
# against the reference.

def test_skinny_plan():
  for m in (1, 13, 16):
    assert plan_lib.plan(_spec(m=m)).path == "sm90_skinny", m
    assert plan_lib.skinny_reasons(_spec(m=m)) == []
  assert plan_lib.plan(_spec(m=16, dt=np.dtype(F16))).path == "sm90_skinny"
  assert plan_lib.plan(_spec(m=17)).path == "sm90_tiny"
  assert plan_lib.skinny_reasons(_spec(m=17)) == ["m = 17 > 16"]
  # Transposes, batches, a C read from out's own array: a wgmma tile.
  def tile_path(s):
    p = plan_lib.plan(s).path
    return _unsplit_sm90(p) and p != "sm90_skinny"
  assert tile_path(_spec(m=16, ta=True))
  assert tile_path(_spec(m=16, batch_shape=(4,)))
  # B transposed (x @ W^T, dX of a skinny layer): bfloat16 has its kernel.
  assert plan_lib.plan(_spec(m=16, tb=True)).path == "sm90_skinny"
  assert plan_lib.skinny_reasons(_spec(m=16, tb=True)) == []
  c = WinSpec((16, 4096), (16, 4096), (0, 0))
  s = _spec(m=16, c=c, c_mode="from_d", beta=1.0)
  assert plan_lib.plan(s).path == "sm90_tiny"
  assert "C is read from out's own array" in "; ".join(
      plan_lib.skinny_reasons(s))
  assert plan_lib.plan(_spec(m=16, c=c, c_mode="own",
                             beta=1.0)).path == "sm90_skinny"
  # A float32 result of 16-bit inputs: its own skinny kernels, B
  # transposed or not.
  for dt in (BF16, F16):
    for tb in (False, True):
      assert plan_lib.plan(_spec(m=16, dt=np.dtype(dt), out_dt=np.dtype(F32),
                                 tb=tb)).path == "sm90_skinny", (dt, tb)
  # No kernel for the transposes, or alignment not proven: not SM90 at all.
  assert plan_lib.plan(_spec(m=16, ta=True, tb=True)).path == "generic"
  a = WinSpec((16, 4100), (16, 4096), (0, 3))
  assert plan_lib.plan(_spec(m=16, a=a)).path == "generic"
  assert any(w.startswith("a: ") for w in plan_lib.skinny_reasons(
      _spec(m=16, a=a)))
  # The tiny tile's workspace: the handler's fallback fits.
  s = _spec(m=16)
  assert plan_lib.plan(s).workspace_bytes == plan_lib.workspace_layout(
      s, "sm90_tiny").total
  assert plan_lib.direct_reasons(s) == [
      "planned sm90_skinny: no direct kernel"]
  assert "sm90_skinny (wide tile, split 4 on 132 SMs" in plan_lib.explain(s)
  # A forced SM90 tile or split-K comes first.
  assert plan_lib.plan(_opts(s, tile="tiny")).path == "sm90_tiny"
  assert plan_lib.plan(_opts(s, split_k=True)).path == "sm90_split_k"


@pytest.mark.parametrize("m,n,k,want", [
    (16, 4096, 4096, 4),    # 64 column tiles x 4 = 256 CTAs, two an SM
    (13, 1000, 1000, 8),    # 16 tiles, 16 K stages: 2 each
    (1, 136, 72, 1),        # 2 K stages: no split
    (5, 8192, 512, 2),      # 128 tiles
    (7, 14336, 4104, 1),    # 224 tiles: within two an SM already
])
def test_skinny_split(m, n, k, want):
  assert plan_lib.skinny_split(_spec(m=m, n=n, k=k)) == want


# (m, n, k, A start, B layer, out start, C); the split each runs on 132
# SMs (test_skinny_split) in the comment.  Starts are dynamic int32 and
# some clamp; A and out sit at static column 8 of wider buffers, B is a
# layer of a 3-d stack at a dynamic K row and static column 8, NaN
# outside its window.
SKINNY_CASES = [
    (16, 4096, 4096, 3, 1, 5, None),            # split 4
    (13, 1000, 1000, -2, 10 ** 6, 40, "own"),   # split 8, clamped starts
    (1, 136, 72, 0, 0, 2 ** 31 - 1, "own"),     # split 1
    (5, 8192, 512, 7, -1, 0, None),             # split 2
    (8, 256, 4104, 1, 2, -3, None),             # K tail of 8
]


def _skinny_case(case, dt, opts=None, tb=False, out_dt=None):
  """B's (k x n) window, or with tb its transposed (n x k) one, at a
  dynamic layer and row and static column 8; C and out of out_dt
  (default: dt)."""
  m, n, k, sa, sb, so, cmode = case
  out_dt = dt if out_dt is None else out_dt
  ks = jax.random.split(jax.random.key(m * 7 + n), 4)
  a = _rand(ks[0], (m + 9, k + 16), dt)
  b = _rand(ks[1], (3, n + 24, k + 16) if tb else (3, k + 24, n + 16), dt)
  # B outside its window (the layer the start selects, rows 16.., columns
  # 8..): NaN, so a kernel that lets an element past the window's K into a
  # sum (0 * NaN is NaN, where a zero A would hide a finite one) fails.
  rows, cols = (n, k) if tb else (k, n)
  keep = np.zeros(b.shape, bool)
  keep[clamp_start(sb, b.shape[0], 1), 16:16 + rows, 8:8 + cols] = True
  b = jnp.where(keep, b, jnp.nan).astype(dt)
  c = _rand(ks[2], (m, n), out_dt) if cmode == "own" else None
  out = jnp.full((m + 40, n + 16), jnp.nan, out_dt)

  def f(mod, a, b, c, out, sa, sb, so, kr):
    kw = dict(alpha=0.75, beta=-1.5) if c is not None else dict(alpha=0.75)
    kw["preferred_element_type"] = out_dt
    bw = (dyn.window(b, (sb, kr, 8), (n, k)) if tb else
          dyn.window(b, (sb, kr, 8), (k, n)))
    return mod.gemm(dyn.window(a, (sa, 8), (m, k)), bw, c,
                    out=dyn.window(out, (so, 8), (m, n)), transpose_b=tb,
                    opts=opts, **kw)

  return f, (a, b, c, out, jnp.int32(sa), jnp.int32(sb), jnp.int32(so),
             jnp.int32(16))


# Both skinny tiles on every case: the wide one (64 columns a CTA, K
# split across a cluster) and the narrow one (16 columns a CTA over all of
# K), each forced.
SKINNY_TILES = ("wide", "narrow")


@pytest.mark.parametrize("case", SKINNY_CASES,
                         ids=[f"{c[0]}x{c[1]}x{c[2]}" for c in SKINNY_CASES])
@pytest.mark.parametrize("dt", [BF16, F16])
@pytest.mark.parametrize("tile", SKINNY_TILES)
@pytest.mark.gpu
@on_gpu
def test_skinny_matches_reference(case, dt, tile):
  """The skinny kernel at every split, and its narrow tile, against the
  reference; the output's elements outside the window stay the poison,
  bit for bit."""
  _check_skinny_case(case, dt, tile=tile)


@pytest.mark.parametrize("case", SKINNY_CASES,
                         ids=[f"{c[0]}x{c[1]}x{c[2]}" for c in SKINNY_CASES])
@pytest.mark.parametrize("dt", [BF16, F16])
@pytest.mark.parametrize("tile", SKINNY_TILES)
@pytest.mark.gpu
@on_gpu
def test_skinny_nt_matches_reference(case, dt, tile):
  """The skinny kernel with B transposed, as above."""
  _check_skinny_case(case, dt, tb=True, tile=tile)


def _check_skinny_case(case, dt, opts=None, tb=False, out_dt=None,
                       tile=None):
  """tile: forces the skinny tile (opts then None); the traced call is
  planned for it, and the choice function runs its kernel."""
  if tile is not None:
    opts = KernelOptions(skinny_tile=tile)
  f, args = _skinny_case(case, dt, opts, tb, out_dt)
  specs = plan_lib.traced_specs(lambda *x: f(dyn, *x), *args)
  assert [plan_lib.plan(s).path for s in specs] == ["sm90_skinny"]
  if tile is not None:
    assert plan_lib.plan(specs[0]).kernel.skinny_tile == tile
    name = plan_lib.launch_choice(specs[0])["kernel"]
    assert name.startswith("kSm90SkinnyNarrow" if tile == "narrow"
                           else "kSm90Skinny16"), name
  got = jax.jit(lambda *x: f(dyn, *x))(*args)
  want = ref_highest(lambda *x: f(dyn.reference, *x))(*args)
  _check_window(got, want, args[3], dt, case[2])


@pytest.mark.parametrize("out_dt", [BF16, F32])
@pytest.mark.gpu
@on_gpu
def test_skinny_in_a_host_driven_loop(out_dt):
  """A fori_loop of skinny calls at XLA's default flags: a body of the
  call and the counter is no CUDA graph, so every iteration calls the
  handler at the same addresses with a new counter value, and from the
  second on it launches the launch it kept (the repeat cache)."""
  L, m, n, k = 6, 8, 512, 1024
  ks = jax.random.split(jax.random.key(31), 2)
  x = _rand(ks[0], (L * m, k), BF16)
  w = _rand(ks[1], (L, k, n), BF16)

  def f(mod, x, w):
    def body(i, out):
      return mod.gemm(dyn.window(x, (i * m, 0), (m, k)),
                      dyn.window(w, (i, 0, 0), (k, n)),
                      out=dyn.window(out, (i * m, 0), (m, n)))
    return jax.lax.fori_loop(0, L, body, jnp.zeros((L * m, n), out_dt))

  assert plan_lib.traced_paths(lambda *a: f(dyn, *a), x, w) == [
      "sm90_skinny"]
  run = jax.jit(lambda *a: f(dyn, *a))
  want = ref_highest(lambda *a: f(dyn.reference, *a))(x, w)
  for _ in range(3):  # the whole loop again: the kept launches once more
    _check(run(x, w), want, BF16, out_dt, k)


# With B transposed, n need only suit D: 1004 float32 columns end half way
# through the last 8-column chunk.
SKINNY_F32_CASES = SKINNY_CASES + [(9, 1004, 512, 2, 1, 3, "own")]


@pytest.mark.parametrize("case", SKINNY_F32_CASES,
                         ids=[f"{c[0]}x{c[1]}x{c[2]}" for c in SKINNY_F32_CASES])
@pytest.mark.parametrize("dt", [BF16, F16])
@pytest.mark.parametrize("tb", [False, True])
@pytest.mark.parametrize("tile", SKINNY_TILES)
@pytest.mark.gpu
@on_gpu
def test_skinny_float32_result(case, dt, tb, tile):
  """16-bit inputs into a float32 result and C (preferred_element_type):
  the skinny kernel's float32 lines, both tiles, B transposed or not."""
  if case[1] % 8 and not tb:
    pytest.skip("B's rows of a 16-bit dtype: n a multiple of 8")
  _check_skinny_case(case, dt, tb=tb, out_dt=F32, tile=tile)


def _layer_script(m, n=4096, k=4096, tb=False):
  """A script: x (m x k) @ layer 1 of two k x n weights (tb: x @ W^T of
  n x k ones), checked against the reference (for `_run_script`: its gemm
  calls take `opts`)."""
  return textwrap.dedent(f"""
      import json, sys
      import jax, jax.numpy as jnp
      import jax_dynoff as dyn
      from jax_dynoff import plan
      opts = dyn.KernelOptions(**json.loads(sys.argv[1]))
      m, n, k = {m}, {n}, {k}
      ks = jax.random.split(jax.random.key(0), 2)
      x = jax.random.uniform(ks[0], (m, k), jnp.float32, -1, 1).astype(jnp.bfloat16)
      tb = {tb}
      w = jax.random.uniform(ks[1], (2, n, k) if tb else (2, k, n), jnp.float32, -1, 1).astype(jnp.bfloat16)
      f = lambda mod, x, w, i: mod.gemm(x, dyn.window(w, (i, 0, 0), (n, k) if tb else (k, n)), transpose_b=tb, opts=opts)
      print("PLANNED", plan.traced_paths(lambda x, w, i: f(dyn, x, w, i), x, w, jnp.int32(1)))
      got = jax.jit(lambda x, w, i: f(dyn, x, w, i))(x, w, jnp.int32(1)).astype(jnp.float32)
      with jax.default_matmul_precision("highest"):
        want = jax.jit(lambda x, w, i: f(dyn.reference, x, w, i))(x, w, jnp.int32(1)).astype(jnp.float32)
      err = float(jnp.abs(got - want).max() / jnp.abs(want).max())
      print("ERR", err)
      assert err < 2 ** -5, err
  """)


_SKINNY_SCRIPT = _layer_script(13)


@pytest.mark.gpu
@on_gpu
def test_skinny_kernel_ran():
  """The skinny kernel runs where planned (sm_90, split 4 at n = k = 4096);
  skinny=False runs the tiny path's direct tile (here the cluster-K tile:
  64 tiles 64 wide, K split in two), and with direct=False too the tiny
  ptr-array kernel; not sm_90 or sm90=False: the generic kernel."""
  out, lines = _run_script(_SKINNY_SCRIPT)
  assert "['sm90_skinny']" in out, out
  assert all("planned=sm90_skinny" in l for l in lines), lines
  if _is_sm90():
    assert all("kernel=kSm90Skinny16Bf16NN split_k=4" in l
               for l in lines), lines
  else:
    assert all("kernel=kGenericBf16Bf16" in l for l in lines), lines
  _, lines = _run_script(_SKINNY_SCRIPT, skinny=False)
  if _is_sm90():
    assert all("kernel=kSm90DirectClusterKBf16NN split_k=2" in l
               for l in lines), lines
  _, lines = _run_script(_SKINNY_SCRIPT, skinny=False, direct=False)
  if _is_sm90():
    assert all("kernel=kSm90TinyBf16Bf16NN" in l for l in lines), lines
  _, lines = _run_script(_SKINNY_SCRIPT, sm90=False)
  assert all("kernel=kGenericBf16Bf16" in l for l in lines), lines
  # B transposed: its own kernel; skinny=False the tiny tile's NT twin.
  nt = _layer_script(13, tb=True)
  out, lines = _run_script(nt)
  assert "['sm90_skinny']" in out, out
  if _is_sm90():
    assert all("kernel=kSm90Skinny16Bf16NT split_k=4" in l
               for l in lines), lines
  _, lines = _run_script(nt, skinny=False)
  if _is_sm90():
    assert all("kernel=kSm90DirectTinyBf16NT" in l for l in lines), lines


@pytest.mark.gpu
@on_gpu
def test_skinny_narrow_kernel_ran():
  """K = 512: the narrow skinny tile runs where planned, unsplit, B
  transposed or not; skinny_tile="wide" runs the wide one at its split
  (64 column tiles x 4 on 132 SMs; 4 wherever 256 CTAs fit)."""
  for tb in (False, True):
    script = _layer_script(13, k=512, tb=tb)
    out, lines = _run_script(script)
    assert "['sm90_skinny']" in out, out
    want = "kSm90SkinnyNarrowBf16" + ("NT" if tb else "NN")
    if _is_sm90():
      assert all(f"kernel={want} split_k=1" in l for l in lines), lines
    _, lines = _run_script(script, skinny_tile="wide")
    if _is_sm90():
      assert all("kernel=kSm90Skinny16Bf16" in l for l in lines), lines


# ---------------------------------------------------------------------------
# GPU: split-K (KernelOptions(split_k=True)) against the reference.


def _check_window(got, want, poison, dt, k):
  """`got` (the whole out array) against the reference's `want` inside
  out's window (where `want` is not the NaN poison); every element outside
  it: bit for bit `poison`, the array passed in."""
  w = np.asarray(want.astype(F32))
  outside = np.isnan(w)
  assert outside.any() and not outside.all()
  np.testing.assert_array_equal(bits(got)[outside], bits(poison)[outside])
  _check(jnp.asarray(np.asarray(got.astype(F32))[~outside]),
         jnp.asarray(w[~outside]), dt, dt, k)


SPLITK_DTYPES = [(BF16, BF16), (F16, F16), (BF16, F32)]


# Every m with bf16; the other dtype pairs at m = 16 (they share the code).
@pytest.mark.parametrize("in_dt,out_dt,m", [
    (SPLITK_DTYPES[0] + (m,)) for m in (1, 16, 64)] + [
    (dts + (16,)) for dts in SPLITK_DTYPES[1:]])
@pytest.mark.parametrize("n,k", [(256, 4096), (1024, 4160), (4096, 4096),
                                 (512, 1000)])
@pytest.mark.gpu
@on_gpu
def test_split_k_matches_reference(in_dt, out_dt, m, n, k):
  """x @ W[i] into a NaN-poisoned window of a bigger buffer: k = 4096 splits
  into slices of a multiple of 64, k = 4160 into slices of 520 (the last
  k-tile of every slice partly zero-filled), k = 1000 cannot split (the plan
  falls back to the unsplit small-m kernel)."""
  ks = jax.random.split(jax.random.key(11), 2)
  x = _rand(ks[0], (m + 8, k), in_dt)
  w = _rand(ks[1], (3, k, n), in_dt)
  out = jnp.full((m + 40, n + 16), jnp.nan, out_dt)

  def f(mod, x, w, out, r, i, o):
    return mod.gemm(dyn.window(x, (r, 0), (m, k)),
                    dyn.window(w, (i, 0, 0), (k, n)),
                    out=dyn.window(out, (o, 8), (m, n)), opts=SPLITK)

  args = (x, w, out, jnp.int32(8), jnp.int32(2), jnp.int32(17))
  (spec,) = plan_lib.traced_specs(lambda *a: f(dyn, *a), *args)
  assert spec.opts == SPLITK
  p = plan_lib.plan(spec)
  if k == 1000:  # the plan without split-K (for bf16 -> f32: generic)
    assert p == plan_lib.plan(_opts(spec))
  else:
    assert p.path == "sm90_split_k", plan_lib.split_k_reasons(spec)
  if p.path == "sm90_split_k":
    assert p.split_k > 1 and k % p.split_k == 0
  got = jax.jit(lambda *a: f(dyn, *a))(*args)
  want = ref_highest(lambda *a: f(dyn.reference, *a))(*args)
  outside = np.ones(got.shape, bool)
  outside[17:17 + m, 8:8 + n] = False
  np.testing.assert_array_equal(bits(got)[outside], bits(out)[outside])
  _check(got[17:17 + m, 8:8 + n], want[17:17 + m, 8:8 + n], in_dt, out_dt, k)


@pytest.mark.parametrize("dt,out_dt", [(BF16, BF16), (BF16, F32), (F16, F16)])
@pytest.mark.parametrize("c_win", ["own", "same", "overlap_rows",
                                   "overlap_cols", "disjoint"])
@pytest.mark.gpu
@on_gpu
def test_split_k_beta_c(dt, out_dt, c_win):
  """alpha * x @ W + beta * C with C its own array, or a window of out's
  buffer: the same window (in place), partly overlapping ones (copied to
  scratch before the reduction writes D), a disjoint one.  Everything
  outside D's window stays bit-for-bit as it was."""
  m, n, k = 16, 1024, 2048
  ks = jax.random.split(jax.random.key(12), 4)
  x = _rand(ks[0], (m, k), dt)
  w = _rand(ks[1], (k, n), dt)
  buf = _rand(ks[2], (96, n + 64), out_dt)
  own = _rand(ks[3], (m, n), out_dt)
  d_at = (24, 32)
  c_at = {"same": (24, 32), "overlap_rows": (24 + 5, 32),
          "overlap_cols": (24 - 3, 32 + 24), "disjoint": (60, 0),
          "own": None}[c_win]

  def f(mod, x, w, buf, own, cr, cc, dr, dc):
    c = own if c_at is None else dyn.window(buf, (cr, cc), (m, n))
    return mod.gemm(x, w, c, out=dyn.window(buf, (dr, dc), (m, n)),
                    alpha=0.75, beta=-1.5, opts=SPLITK)

  cr, cc = c_at or (0, 0)
  args = (x, w, buf, own, jnp.int32(cr), jnp.int32(cc), jnp.int32(d_at[0]),
          jnp.int32(d_at[1]))
  assert plan_lib.traced_paths(lambda *a: f(dyn, *a), *args) == \
      ["sm90_split_k"]
  got = jax.jit(lambda *a: f(dyn, *a))(*args)
  want = ref_highest(lambda *a: f(dyn.reference, *a))(*args)
  win = (slice(d_at[0], d_at[0] + m), slice(d_at[1], d_at[1] + n))
  outside = np.ones(got.shape, bool)
  outside[win] = False
  np.testing.assert_array_equal(bits(got)[outside], bits(buf)[outside])
  _check(got[win], want[win], dt, out_dt, k)


@pytest.mark.gpu
@on_gpu
def test_split_k_unaligned_d():
  """D at an odd column (2-byte aligned only): the reduction's scalar
  stores; the GEMM itself only needs A and B aligned."""
  m, n, k = 16, 512, 2048
  ks = jax.random.split(jax.random.key(13), 2)
  x, w = _rand(ks[0], (m, k), BF16), _rand(ks[1], (k, n), BF16)
  out = jnp.full((40, n + 8), jnp.nan, BF16)

  def f(mod, x, w, out, r):
    return mod.gemm(x, w, out=dyn.window(out, (r, 3), (m, n)), opts=SPLITK)

  args = (x, w, out, jnp.int32(5))
  assert plan_lib.traced_paths(lambda *a: f(dyn, *a), *args) == \
      ["sm90_split_k"]
  got = jax.jit(lambda *a: f(dyn, *a))(*args)
  want = ref_highest(lambda *a: f(dyn.reference, *a))(*args)
  outside = np.ones(got.shape, bool)
  outside[5:5 + m, 3:3 + n] = False
  np.testing.assert_array_equal(bits(got)[outside], bits(out)[outside])
  _check(got[5:5 + m, 3:3 + n], want[5:5 + m, 3:3 + n], BF16, BF16, k)


@pytest.mark.parametrize("dt", [BF16, F16])
@pytest.mark.gpu
@on_gpu
def test_split_k_stacked_weights_loop(dt):
  """The stacked-weights workload: layers of x @ W[i] in a fori_loop, m = 16,
  n = k = 4096, offsets from a device table, twice with different tables
  through the same compiled loop."""
  m, n, k, layers = 16, 4096, 4096, 3
  ks = jax.random.split(jax.random.key(14), 2)
  x = _rand(ks[0], (m, k), dt)
  w = _rand(ks[1], (layers, k, n), dt)
  buf = jnp.full((layers * m, n), jnp.nan, dt)

  def f(mod, x, w, buf, table):
    def body(i, buf):
      return mod.gemm(x, dyn.window(w, (table[i], 0, 0), (k, n)),
                      out=dyn.window(buf, (i * m, 0), (m, n)), opts=SPLITK)
    return lax.fori_loop(0, layers, body, buf)

  table = jnp.asarray([2, 0, 1], jnp.int32)
  assert plan_lib.traced_paths(lambda *a: f(dyn, *a), x, w, buf, table) == \
      ["sm90_split_k"]
  run = jax.jit(lambda *a: f(dyn, *a))
  for t in (table, jnp.roll(table, 1)):
    got = run(x, w, buf, t)
    want = ref_highest(lambda *a: f(dyn.reference, *a))(x, w, buf, t)
    _check(got, want, dt, dt, k)


@pytest.mark.gpu
@on_gpu
def test_split_k_vmap():
  """Batched offsets: batch * split_k ptr-array items, one reduction."""
  m, n, k, nb = 16, 1024, 2048, 3
  ks = jax.random.split(jax.random.key(15), 2)
  a = _rand(ks[0], (128, k), BF16)
  b = _rand(ks[1], (nb, k, n), BF16)
  rows = jnp.asarray([0, 40, 1000], jnp.int32)

  def f(mod, a, b, r):
    return mod.gemm(dyn.window(a, (r, 0), (m, k)), b, opts=SPLITK)

  g = jax.vmap(lambda b, r: f(dyn, a, b, r))
  (spec,) = plan_lib.traced_specs(g, b, rows)
  assert spec.batch == nb
  assert plan_lib.plan(spec).path == "sm90_split_k"
  got = jax.jit(g)(b, rows)
  want = ref_highest(jax.vmap(lambda b, r: f(dyn.reference, a, b, r)))(
      b, rows)
  _check(got, want, BF16, BF16, k)


# ---------------------------------------------------------------------------
# GPU: the SM90 -> generic fallback rule and the kernel actually run.

_SCRIPT = textwrap.dedent("""
    import json, sys
    import jax, jax.numpy as jnp, numpy as np
    import jax_dynoff as dyn
    from jax_dynoff import plan
    opts = dyn.KernelOptions(**json.loads(sys.argv[1]))
    m, n, k = 256, 512, 256
    ks = jax.random.split(jax.random.key(0), 2)
    a = jax.random.uniform(ks[0], (2 * m, k), jnp.float32, -1, 1).astype(jnp.bfloat16)
    b = jax.random.uniform(ks[1], (k, n), jnp.float32, -1, 1).astype(jnp.bfloat16)
    f = lambda mod, a, b, r: mod.gemm(dyn.window(a, (r, 0), (m, k)), b, opts=opts)
    print("PLANNED", plan.traced_paths(lambda a, b, r: f(dyn, a, b, r), a, b, jnp.int32(m)))
    got = jax.jit(lambda a, b, r: f(dyn, a, b, r))(a, b, jnp.int32(m)).astype(jnp.float32)
    with jax.default_matmul_precision("highest"):
      want = jax.jit(lambda a, b, r: f(dyn.reference, a, b, r))(a, b, jnp.int32(m)).astype(jnp.float32)
    err = float(jnp.abs(got - want).max() / jnp.abs(want).max())
    print("ERR", err)
    assert err < 2 ** -5, err
""")


def _run_script(script=_SCRIPT, **options):
  """Runs `script` in a fresh process with JAX_DYNOFF_LOG=1 (the kernel log,
  read once per process), its gemm calls given KernelOptions(**options)
  (the script reads them as JSON from its argv); returns its stdout and the
  handler's per-call kernel lines."""
  KernelOptions(**options)   # a misspelt or invalid option fails here
  return run_logged(script, options)


@pytest.mark.gpu
@on_gpu
def test_fallback_rule():
  out, lines = _run_script()
  assert "['sm90_tiny']" in out
  assert all("planned=sm90_tiny" in l for l in lines), lines
  if _is_sm90():  # the tiny tile's direct twin (one item, NN)
    assert all("kernel=kSm90DirectTinyBf16NN" in l for l in lines), lines
  else:  # not sm_90: the handler must fall back by itself
    assert all("kernel=kGenericBf16Bf16" in l for l in lines), lines
  _, lines = _run_script(direct=False)
  if _is_sm90():
    assert all("kernel=kSm90TinyBf16Bf16NN" in l for l in lines), lines
  out, lines = _run_script(sm90=False)
  assert all("kernel=kGenericBf16Bf16" in l for l in lines), lines


_TF32_SCRIPT = textwrap.dedent("""
    import json, sys
    import jax, jax.numpy as jnp
    import jax_dynoff as dyn
    from jax_dynoff import plan
    opts = dyn.KernelOptions(**json.loads(sys.argv[1]))
    ks = jax.random.split(jax.random.key(0), 2)
    a = jax.random.uniform(ks[0], (300, 257), jnp.float32, -1, 1)
    b = jax.random.uniform(ks[1], (257, 130), jnp.float32, -1, 1)
    f = lambda mod, a, b, r: mod.gemm(dyn.window(a, (r, 1), (200, 256)), b[:256], opts=opts)
    print("PLANNED", plan.traced_paths(lambda a, b, r: f(dyn, a, b, r), a, b, jnp.int32(3)))
    got = jax.jit(lambda a, b, r: f(dyn, a, b, r))(a, b, jnp.int32(3))
    with jax.default_matmul_precision("highest"):
      want = jax.jit(lambda a, b, r: f(dyn.reference, a, b, r))(a, b, jnp.int32(3))
    err = float(jnp.abs(got - want).max() / jnp.abs(want).max())
    print("ERR", err)
    assert err < 2e-3, err
""")


@pytest.mark.gpu
@on_gpu
def test_tf32_kernel_ran():
  """float32 at default precision runs the TF32 tensor-op kernel (a window
  at an odd column: 4-byte alignment), within TF32 error of the exact
  product; tf32=False runs the exact SIMT kernel instead."""
  out, lines = _run_script(_TF32_SCRIPT)
  assert "['tf32']" in out, out
  assert all("planned=tf32 kernel=kTf32NN" in l for l in lines), lines
  err = float(out.split("ERR")[1].split()[0])
  assert err > 0   # TF32 rounding is visible: not the exact kernel
  out, lines = _run_script(_TF32_SCRIPT, tf32=False)
  assert all("kernel=kGenericF32F32" in l for l in lines), lines
  assert float(out.split("ERR")[1].split()[0]) < 1e-5


_SPLITK_SCRIPT = _layer_script(16)


def _run_splitk_script(**options):
  return _run_script(_SPLITK_SCRIPT, split_k=True, **options)


@pytest.mark.gpu
@on_gpu
def test_split_k_kernel_ran():
  """The direct split-K kernel really runs (sm_90), 4 slices; the unsplit
  kernel without split_k; the ptr-array slices without direct kernels; the
  generic kernel (unsplit) when SM90 is disabled or the GPU is not sm_90."""
  out, lines = _run_splitk_script()
  assert "['sm90_split_k']" in out, out
  assert all("planned=sm90_split_k" in l for l in lines), lines
  if _is_sm90():
    assert all("kernel=kSm90DirectSplitKBf16NN split_k=4" in l
               for l in lines), lines
  else:
    assert all("kernel=kGenericBf16Bf16 split_k=1" in l for l in lines), lines
  # Without split_k: the skinny kernel (m = 16).
  out, lines = _run_script(_SPLITK_SCRIPT)
  assert "['sm90_skinny']" in out, out
  if _is_sm90():
    assert all("kernel=kSm90Skinny16Bf16NN split_k=4" in l
               for l in lines), lines
  # Without direct kernels: the ptr-array slices, as many.
  out, lines = _run_splitk_script(direct=False)
  if _is_sm90():
    assert all("kernel=kSm90SplitKBf16NN split_k=4" in l for l in lines), lines
  out, lines = _run_splitk_script(sm90=False)
  assert all("kernel=kGenericBf16Bf16 split_k=1" in l for l in lines), lines


@pytest.mark.gpu
@on_gpu
def test_build_info():
  from jax_dynoff import _jax_dynoff
  assert _jax_dynoff.cuda_built()
  info = _jax_dynoff.cuda_build_info()
  assert "generic" in info and "rule" in info
  if _is_sm90():
    assert "sm90=yes" in info, ("this build has no sm_90a kernels: build with "
                                "JAX_DYNOFF_CUDA_ARCHS containing 90a")


# ---------------------------------------------------------------------------
# The direct kernel (ffi/kernels/sm90_direct.h): which calls take it, and
# every way its windows can sit in their buffers, against the reference.

def test_direct_reasons():
  # Tile multiples at dynamic row / layer offsets: direct, the large tile
  # (512 wide tiles: several waves).
  a = WinSpec((8192, 4096), (4096, 4096), (None, 0))
  b = WinSpec((4, 4096, 4096), (1, 4096, 4096), (None, 0, 0))
  d = WinSpec((9000, 4096), (4096, 4096), (None, 0))
  s = _spec(m=4096, a=a, b=b, d=d)
  assert plan_lib.plan(s).path == "sm90_large"
  assert plan_lib.direct_reasons(s) == []
  assert plan_lib.direct_kernel(s) == "large"
  assert "direct kernel, large tile" in plan_lib.explain(s)
  # K not a multiple of 64 but the whole width / height: direct; 128 wide
  # tiles fit one wave: the wide tile.
  assert plan_lib.direct_reasons(_spec(m=2048, n=2048, k=200)) == []
  assert plan_lib.direct_kernel(_spec(m=2048, n=2048, k=200)) == "wide"
  assert "direct kernel, wide tile" in plan_lib.explain(
      _spec(m=2048, n=2048, k=200))
  # Only one tile's store rule holds: that tile, whatever the waves say
  # (the SM90 tile forced: the wave model plans smaller ones here).
  large = KernelOptions(tile="large")
  d = WinSpec((9000, 4096), (4224, 4096), (None, 0))   # 4224 = 33 * 128
  assert plan_lib.direct_kernel(_spec(m=4224, n=4096, d=d,
                                      opts=large)) == "wide"
  d = WinSpec((4096, 1024), (2048, 128), (None, 0))    # n = 128 < 256
  assert plan_lib.direct_kernel(_spec(m=2048, n=128, d=d,
                                      opts=large)) == "large"
  # KernelOptions.direct_tile forces a tile where its rules hold.
  assert plan_lib.direct_kernel(_spec(
      m=2048, n=2048, k=200, opts=KernelOptions(direct_tile="large"))) == \
      "large"
  wide = KernelOptions(direct_tile="wide")
  assert plan_lib.direct_kernel(dataclasses.replace(s, opts=wide)) == "wide"
  d = WinSpec((9000, 4096), (4096, 3968), (None, 0))   # 3968 = 31 * 128
  why = plan_lib.direct_reasons(_spec(m=4096, n=3968, d=d, opts=wide))
  assert why == ["out: n = 3968 neither a multiple of 256 nor the array's "
                 "width (wide tile)"], why
  with pytest.raises(ValueError, match="KernelOptions.direct_tile"):
    KernelOptions(direct_tile="huge")
  # ... inside a wider A: not.
  a = WinSpec((2048, 264), (2048, 200), (None, 0))
  why = plan_lib.direct_reasons(_spec(m=2048, n=2048, k=200, a=a))
  assert any(w.startswith("a: k = 200") for w in why), why
  # An output window that is no tile multiple inside a bigger buffer: not.
  d = WinSpec((4096, 2048), (2000, 2048), (None, 0))
  why = plan_lib.direct_reasons(_spec(m=2000, n=2048, k=2048, d=d))
  assert any(w.startswith("out: m = 2000") for w in why), why
  assert any(w.startswith("out: m = 2000") and w.endswith("(wide tile)")
             for w in why), why
  assert "ptr-array kernel" in plan_lib.explain(
      _spec(m=2000, n=2048, k=2048, d=d))
  assert plan_lib.direct_kernel(_spec(m=2000, n=2048, k=2048, d=d)) is None
  # Batches, transposes, f32 out, C read from out's array: not.
  assert plan_lib.direct_reasons(_spec(m=256, n=1024, k=1024,
                                       batch_shape=(64,)))
  assert plan_lib.direct_reasons(_spec(m=2048, ta=True))
  c = WinSpec((2048, 4096), (2048, 4096), (0, 0))
  assert plan_lib.direct_reasons(_spec(m=2048, c=c, c_mode="from_d",
                                       beta=1.0))
  assert plan_lib.direct_reasons(_spec(m=2048, c=c, c_mode="own",
                                       beta=1.0)) == []
  # The smaller tiles' paths: each its direct twin, under that tile's store
  # rule.
  assert plan_lib.direct_kernel(_spec(m=512)) == "medium"
  assert plan_lib.direct_kernel(_spec(m=256)) == "small_m"
  # The tiny path: its tile.
  assert plan_lib.direct_kernel(_spec(m=128)) == "tiny"
  assert "direct kernel, tiny tile" in plan_lib.explain(_spec(m=128))
  d = WinSpec((4096, 4096), (100, 4096), (None, 0))
  assert plan_lib.plan(_spec(m=100, d=d)).path == "sm90_tiny"
  # m = 100 inside a taller buffer: the tiny tile would store past the
  # window; the cluster-K tile, whose stores are predicated on it, runs.
  assert plan_lib.direct_reasons(_spec(m=100, d=d)) == []
  assert plan_lib.direct_kernel(_spec(m=100, d=d)) == "cluster_k"
  # A forced tile of another path: the ptr-array kernel.
  assert plan_lib.direct_reasons(_spec(
      m=128, opts=KernelOptions(direct_tile="large"))) == [
          "direct_tile=large: not a tile of sm90_tiny"]
  assert plan_lib.direct_kernel(_spec(
      m=128, opts=KernelOptions(direct_tile="tiny"))) == "tiny"
  # float32: NN only (the TF32 direct kernels, tests/test_gpu_tf32.py);
  # bfloat16 in, float32 out: none (the ptr-array kernel runs it).
  assert plan_lib.direct_kernel(_spec(m=128, dt=np.dtype(F32))) == "medium"
  assert plan_lib.direct_reasons(_spec(m=128, dt=np.dtype(F32), tb=True)) == [
      "transposed operand"]
  # A float32 result of 16-bit inputs: the large tile (the wide one is not
  # built for it); float16 with B transposed on the large path: none.
  assert plan_lib.direct_reasons(_spec(m=2048, out_dt=np.dtype(F32))) == []
  assert plan_lib.direct_kernel(_spec(m=2048, out_dt=np.dtype(F32))) == \
      "large"
  assert plan_lib.direct_kernel(_spec(m=128, dt=np.dtype(F16),
                                      out_dt=np.dtype(F32))) == "tiny"
  assert plan_lib.direct_reasons(_spec(m=2048, dt=np.dtype(F16), tb=True)) \
      == ["transposed operand"]
  assert plan_lib.direct_reasons(_spec(m=2048, ta=True, tb=True)) == [
      "planned generic: no direct kernel"]
  # Not an SM90 tile plan at all.
  a = WinSpec((128, 4097), (128, 4096), (None, 1))
  assert plan_lib.direct_reasons(_spec(m=128, dt=np.dtype(F32), a=a)) == [
      "planned tf32: no direct kernel"]


# (name, m, n, k, A buffer, A start, B buffer, B start, out buffer, out
# start, C: None / "own"); starts: ints are dynamic (passed as int32).
DIRECT_CASES = [
    # Row windows of bigger buffers at dynamic offsets, one clamped.
    ("rows", 512, 256, 192, (600, 192), (40,), (300, 256), (10 ** 6,),
     (1000, 256), (-488,), None),
    # Stacked weights: B is layer 2 of 3; out is a 3-d cache, layer 1,
    # rows from a dynamic position.
    ("layers", 256, 128, 320, (256, 320), (0,), (3, 320, 128), (2, 0),
     (2, 600, 128), (1, 300), None),
    # k = 200: no multiple of 64 but A's whole width and B's whole height;
    # out is the whole (300 x 200) result: no tile multiple, but its dims.
    ("edges", 300, 200, 200, (300, 200), (0,), (200, 200), (0,), None, None,
     None),
    # A window at a static column (8) of a wider buffer, C its own array.
    ("column_c", 256, 384, 128, (300, 136), (44,), (128, 384), (0,),
     (512, 384), (256,), "own"),
]


def _direct_case(case, dt, int64=False, opts=None, out_dt=None):
  """(f, args) of a DIRECT_CASES-style case: f(mod, *args) runs it, its gemm
  call given `opts`; C and out of `out_dt` (default: dt)."""
  name, m, n, k, ash, ast, bsh, bst, osh, ost, cmode = case
  out_dt = dt if out_dt is None else out_dt
  ks = jax.random.split(jax.random.key(11), 4)
  a = _rand(ks[0], ash, dt)
  b = _rand(ks[1], bsh, dt)
  c = _rand(ks[2], (m, n), out_dt) if cmode == "own" else None
  out = jnp.full(osh, jnp.nan, out_dt) if osh else None
  it = jnp.int64 if int64 else jnp.int32
  starts = [it(v) for v in (*ast, *bst, *(ost or ()))]
  na, nb = len(ast), len(bst)

  def f(mod, a, b, c, out, *st):
    sa, sb, so = st[:na], st[na:na + nb], st[na + nb:]
    aw = dyn.window(a, (*sa, 8 if name == "column_c" else 0), (m, k))
    bw = dyn.window(b, (*sb, 0), (k, n))
    kw = dict(alpha=0.5, beta=-2.0) if c is not None else {}
    kw["opts"] = opts
    kw["preferred_element_type"] = out_dt
    if out is None:
      return mod.gemm(aw, bw, c, **kw)
    return mod.gemm(aw, bw, c, out=dyn.window(out, (*so, 0), (m, n)), **kw)

  return f, (a, b, c, out, *starts)


@pytest.mark.parametrize("case", DIRECT_CASES, ids=[c[0] for c in DIRECT_CASES])
@pytest.mark.parametrize("dt", [BF16, F16])
@pytest.mark.parametrize("tile", list(plan_lib.DIRECT_TILES))
@pytest.mark.gpu
@on_gpu
def test_direct_kernel_matches_reference(case, dt, tile):
  if tile == "split_k" and case[0] != "layers":
    pytest.skip("m > 256 or k without equal 16-byte halves: no split-K "
                "(test_direct_split_k_matches_reference covers that tile)")
  _check_direct(case, dt, tile, _force_direct(tile))


def _force_direct(tile):
  """Options that plan the path `tile` stands in for (the wave model would
  pick another at these small shapes) and force `tile` (the handler takes
  it from the call's plan).  The split-K tile: split-K, K in two slices
  (no SM90 tile forced)."""
  if tile == "split_k":
    return _split_k(2, direct_tile=tile)
  path = plan_lib.DIRECT_TILE_PATHS[tile]
  return KernelOptions(tile=path.removeprefix("sm90_"), direct_tile=tile)


def _check_direct(case, dt, tile, opts, out_dt=None):
  """Runs a DIRECT_CASES-style case, its gemm call given `opts`, on the
  direct kernel `tile` against the reference; the output's elements outside
  the window stay the poison."""
  out_dt = dt if out_dt is None else out_dt
  f, args = _direct_case(case, dt, opts=opts, out_dt=out_dt)
  specs = plan_lib.traced_specs(lambda *x: f(dyn, *x), *args)
  assert [s.opts for s in specs] == [opts]
  assert [plan_lib.plan(s).path for s in specs] == [
      plan_lib.DIRECT_TILE_PATHS[tile]]
  assert plan_lib.direct_reasons(specs[0]) == []
  assert plan_lib.direct_kernel(specs[0]) == tile
  got = jax.jit(lambda *x: f(dyn, *x))(*args)
  want = ref_highest(lambda *x: f(dyn.reference, *x))(*args)
  assert got.dtype == out_dt
  if args[3] is not None:
    _check_window(got, want, args[3], dt, case[3])
  else:
    _check(got, want, dt, out_dt, case[3])


@pytest.mark.parametrize("case", DIRECT_CASES, ids=[c[0] for c in DIRECT_CASES])
@pytest.mark.parametrize("dt", [BF16, F16])
@pytest.mark.parametrize("tile", ["large", "medium", "small_m", "tiny"])
@pytest.mark.gpu
@on_gpu
def test_direct_float32_result_matches_reference(case, dt, tile):
  """16-bit inputs into a float32 result and C (preferred_element_type):
  the direct kernels of the four tiles built for it."""
  _check_direct(case, dt, tile, _force_direct(tile), out_dt=F32)


# Windows whose tile grid CUTLASS's scheduler rounds up (to whole clusters,
# or to whole swizzle groups once there are more tiles than SMs), so that
# some tiles lie wholly past the window but inside out's buffer: they must
# store nothing.  (case as in DIRECT_CASES, the direct tiles that run it:
# the rounding concerns the clustered large and wide tiles, and the swizzle
# every tile; the one-CTA ping-pong tiles run the cluster cases too, and so
# does the cluster-K tile, whose grid has no tile past the window and whose
# stores are predicated on it.)
DIRECT_PHANTOM_CASES = [
    # Large tile, cluster 1x2 along N: 3 column tiles, a 4th past the window.
    (("cluster_n", 256, 384, 128, (300, 128), (40,), (128, 512), (0,),
      (600, 512), (100,), None),
     ("large", "medium", "small_m", "tiny", "split_k", "cluster_k")),
    # Wide tile, cluster 2x1 along M: 3 row tiles, a 4th past the window.
    (("cluster_m", 384, 256, 128, (400, 128), (10,), (128, 256), (0,),
      (1000, 256), (300,), None),
     ("wide", "medium", "small_m", "tiny", "cluster_k")),
    # An odd count of row tiles (5 tiny, 3 small_m: the last one half
    # past the window) and one row of tiles.
    (("odd_rows", 320, 256, 128, (400, 128), (10,), (128, 256), (0,),
      (1000, 256), (300,), None), ("tiny", "small_m", "cluster_k")),
    (("one_row", 64, 256, 128, (100, 128), (5,), (128, 256), (0,),
      (500, 256), (200,), None), ("tiny", "small_m", "cluster_k")),
    # More tiles than SMs: swizzle 4 rounds 17 (large) / 34 (wide, medium)
    # row tiles up to 20 / 36, swizzle 8 (tiny: 1088 tiles) 68 up to 72;
    # small_m's 68 stay.
    (("swizzle", 4352, 1024, 64, (4400, 64), (20,), (64, 1024), (0,),
      (5200, 1024), (8,), None),
     tuple(t for t in plan_lib.DIRECT_TILES if t != "split_k")),
]


@pytest.mark.parametrize(
    "case,tile", [(c, t) for c, tiles in DIRECT_PHANTOM_CASES for t in tiles],
    ids=[f"{c[0]}-{t}" for c, tiles in DIRECT_PHANTOM_CASES for t in tiles])
@pytest.mark.gpu
@on_gpu
def test_direct_kernel_tiles_past_the_window(case, tile):
  _check_direct(case, BF16, tile, _force_direct(tile))


# The direct kernels with a transposed operand (bfloat16 NT / TN, the
# ping-pong tiles): (name, transpose_a, transpose_b, m, n, k, A buffer,
# A start, B buffer, B start, out buffer, out start); A and B as stored
# (TN: A is k x m; NT: B is n x k), starts dynamic (int32), one clamped.
DIRECT_T_CASES = [
    # dW = X^T dY: X's rows (k) at a dynamic start, a static column start
    # (m) in a wider buffer; dY a window of rows; out a window of a cache.
    ("tn", True, False, 256, 256, 192, (400, 264), (100,), (300, 256),
     (10 ** 6,), (700, 256), (300,)),
    # dX = dY W^T: W stacked (layer 1 of 2), stored n x k, whole width.
    ("nt", False, True, 256, 256, 320, (300, 320), (7,), (2, 256, 320),
     (1, 0), (600, 256), (128,)),
]


def _direct_t_case(case, tile, dt=BF16, out_dt=None):
  name, ta, tb, m, n, k, ash, ast, bsh, bst, osh, ost = case
  ks = jax.random.split(jax.random.key(23), 2)
  a = _rand(ks[0], ash, dt)
  b = _rand(ks[1], bsh, dt)
  out = jnp.full(osh, jnp.nan, dt if out_dt is None else out_dt)
  starts = [jnp.int32(v) for v in (*ast, *bst, *ost)]
  na, nb = len(ast), len(bst)
  path = plan_lib.DIRECT_TILE_PATHS[tile]
  opts = KernelOptions(tile=path.removeprefix("sm90_"), direct_tile=tile)

  def f(mod, a, b, out, *st):
    sa, sb, so = st[:na], st[na:na + nb], st[na + nb:]
    aw = dyn.window(a, (*sa, 8 if ta else 0), (k, m) if ta else (m, k))
    bw = dyn.window(b, (*sb, 0), (n, k) if tb else (k, n))
    return mod.gemm(aw, bw, out=dyn.window(out, (*so, 0), (m, n)),
                    transpose_a=ta, transpose_b=tb, opts=opts,
                    preferred_element_type=out_dt)

  return f, (a, b, out, *starts)


@pytest.mark.parametrize("case", DIRECT_T_CASES,
                         ids=[c[0] for c in DIRECT_T_CASES])
@pytest.mark.parametrize("tile", ["medium", "small_m", "tiny"])
@pytest.mark.parametrize("dt", [BF16, F16])
def test_direct_transposed_plan(case, tile, dt):
  """The transposed cases take the direct kernel of the forced or planned
  tile (CPU: the plan only); a tile without a transposed build keeps the
  ptr-array kernel and says why."""
  f, args = _direct_t_case(case, tile, dt)
  spec = plan_lib.first_spec(lambda *x: f(dyn, *x), *args)
  assert plan_lib.direct_reasons(spec) == []
  assert plan_lib.direct_kernel(spec) == tile
  # Not forced: the planned tile's direct kernel all the same.
  planned = dataclasses.replace(spec, opts=KernelOptions(
      tile=plan_lib.DIRECT_TILE_PATHS[tile].removeprefix("sm90_")))
  assert plan_lib.direct_kernel(planned) == tile
  large = dataclasses.replace(spec, opts=KernelOptions(tile="large"))
  assert plan_lib.direct_kernel(large) is None
  assert plan_lib.direct_reasons(large) == ["transposed operand"]


@pytest.mark.parametrize("case", DIRECT_T_CASES,
                         ids=[c[0] for c in DIRECT_T_CASES])
@pytest.mark.parametrize("tile", ["medium", "small_m", "tiny"])
@pytest.mark.parametrize("dt", [BF16, F16])
@pytest.mark.gpu
@on_gpu
def test_direct_transposed_matches_reference(case, tile, dt):
  f, args = _direct_t_case(case, tile, dt)
  got = jax.jit(lambda *x: f(dyn, *x))(*args)
  want = ref_highest(lambda *x: f(dyn.reference, *x))(*args)
  _check_window(got, want, args[2], dt, case[5])


@pytest.mark.parametrize("case", DIRECT_T_CASES,
                         ids=[c[0] for c in DIRECT_T_CASES])
@pytest.mark.parametrize("tile", ["medium", "small_m", "tiny"])
@pytest.mark.gpu
@on_gpu
def test_direct_transposed_float32_result(case, tile):
  """bfloat16 NT / TN into a float32 result: the direct kernels."""
  f, args = _direct_t_case(case, tile, BF16, F32)
  spec = plan_lib.first_spec(lambda *x: f(dyn, *x), *args)
  assert plan_lib.direct_kernel(spec) == tile
  got = jax.jit(lambda *x: f(dyn, *x))(*args)
  assert got.dtype == F32
  want = ref_highest(lambda *x: f(dyn.reference, *x))(*args)
  _check_window(got, want, args[2], BF16, case[5])


# The direct split-K kernel (Sm90DirectSplitKConfig: 128x128 cooperative,
# CUTLASS's stream-K scheduler in split-K mode): cases as DIRECT_CASES,
# with the slices to force (None: the plan's choice).
DIRECT_SPLITK_CASES = [
    # A stacked-weights layer: x @ W[i] into a new array, 4 slices.
    (("layer", 16, 4096, 4096, (16, 4096), (0,), (3, 4096, 4096), (2, 0),
      None, None, None), None),
    # One row at a dynamic offset, 16 slices of 256.
    (("row", 1, 1024, 4096, (40, 4096), (33,), (4096, 1024), (0,), None,
      None, None), None),
    # k = 4128: 64.5 k-tiles, the last half zero-filled, over two CTAs.
    (("ragged_k", 128, 512, 4128, (128, 4128), (0,), (4128, 512), (0,),
      None, None, None), 2),
    # A tile-multiple window of a bigger (poisoned) array at a dynamic row
    # start, B a layer at a dynamic index, alpha * AB + beta * C (own).
    (("window_c", 256, 384, 2048, (300, 2048), (40,), (2, 2048, 384), (1, 0),
      (1000, 384), (700,), "own"), 4),
    # Clamped starts (rows past the end, a negative layer).
    (("clamped", 128, 256, 1024, (200, 1024), (10 ** 6,), (2, 1024, 256),
      (-3, 0), (512, 256), (10 ** 6,), None), 8),
    # 100 x 200 out spanning its array: tiles past both edges.
    (("edges", 100, 200, 320, (100, 320), (0,), (320, 200), (0,), None,
      None, None), 2),
]


@pytest.mark.parametrize("case,slices", DIRECT_SPLITK_CASES,
                         ids=[c[0][0] for c in DIRECT_SPLITK_CASES])
@pytest.mark.parametrize("dt", [BF16, F16])
@pytest.mark.gpu
@on_gpu
def test_direct_split_k_matches_reference(case, slices, dt):
  _check_direct(case, dt, "split_k", _split_k(slices))


@pytest.mark.gpu
@on_gpu
def test_direct_split_k_is_deterministic():
  """The CTAs sharing a tile add their partials in a fixed order: the same
  bits on every run."""
  case = DIRECT_SPLITK_CASES[0][0]
  f, args = _direct_case(case, BF16, opts=_split_k())
  spec = plan_lib.first_spec(lambda *x: f(dyn, *x), *args)
  assert plan_lib.direct_kernel(spec) == "split_k"
  run = jax.jit(lambda *x: f(dyn, *x))
  first = bits(run(*args))
  for _ in range(3):
    np.testing.assert_array_equal(bits(run(*args)), first)


@pytest.mark.gpu
@on_gpu
def test_direct_split_k_nondeterministic():
  """deterministic=False: the CTAs add their partials as they arrive; the
  result still matches the reference."""
  _check_direct(DIRECT_SPLITK_CASES[3][0], BF16, "split_k",
                _split_k(8, deterministic=False))


def test_direct_split_k_cases_plan():
  """The cases above take the direct split-K kernel (CPU: the plan only),
  those without forced slices with the ones `choose_split_k` gives them."""
  for case, slices in DIRECT_SPLITK_CASES:
    f, args = _direct_case(case, BF16, opts=_split_k(slices))
    spec = plan_lib.first_spec(lambda *x: f(dyn, *x), *args)
    p = plan_lib.plan(spec)
    assert p.path == "sm90_split_k", (case[0], plan_lib.split_k_reasons(spec))
    assert plan_lib.direct_kernel(spec) == "split_k", (
        case[0], plan_lib.direct_reasons(spec))
    assert p.split_k == (slices or {"layer": 4, "row": 16}[case[0]])


def test_direct_phantom_cases_plan():
  """The cases above take the direct tiles they are meant for (CPU: the
  plan only)."""
  for case, tiles in DIRECT_PHANTOM_CASES:
    for tile in plan_lib.DIRECT_TILES:
      f, args = _direct_case(case, BF16, opts=_force_direct(tile))
      spec = plan_lib.first_spec(lambda *x: f(dyn, *x), *args)
      assert (plan_lib.direct_kernel(spec) == tile) == (tile in tiles), (
          case[0], tile, plan_lib.direct_reasons(spec))


# ---------------------------------------------------------------------------
# The cluster-K direct tile (ffi/kernels/sm90_cluster_k.h): 64x32 or 64x64
# output tiles, each one's K split across the 2 CTAs of a cluster and
# reduced in distributed shared memory; the tiny path's tile where its
# tiles would leave SMs idle (plan.h ClusterKTileN), or forced.

CLUSTER_K = KernelOptions(tile="tiny", direct_tile="cluster_k")
def _ck(width, skinny_split=0):
  """The planned kernel of the cluster-K tile at `width`."""
  return plan_lib.PlannedKernel("cluster_k", skinny_split, width)


@pytest.mark.parametrize("m,n,k,planned,forced", [
    (128, 1024, 1024, 32, 32),   # 64 tiles of 64x32: 128 CTAs
    (64, 1024, 1024, 32, 32),    # 32 tiles: 64 CTAs (64x64: 32)
    (256, 1024, 1024, 64, 64),   # 64x32 would need 256 CTAs
    (128, 2048, 2048, 64, 64),
    (64, 2048, 2048, 32, 32),
    (96, 2048, 448, 0, 64),      # 7 K tiles: short K, the tiny tile
    (128, 4096, 4096, 0, 64),    # 128 tiles fill the SMs: the tiny tile
    (300, 200, 200, 0, 64),      # 4 K tiles
])
def test_cluster_k_plan(m, n, k, planned, forced):
  """Not forced, the tiny path runs the cluster-K tile where ClusterKTileN
  gives it a width (the call's plan carries it, explain names it),
  else the tiny tile; forced, the cluster-K tile at that width, or 64."""
  s = _spec(m=m, n=n, k=k, opts=CLUSTER_K)
  p = plan_lib.plan(s)
  assert p.path == "sm90_tiny"
  assert plan_lib.direct_reasons(s) == []
  assert plan_lib.direct_kernel(s) == "cluster_k"
  assert plan_lib.cluster_k_tile_n(s) == planned
  assert plan_lib.cluster_k_tile_n(s, 132) == planned
  assert p.kernel == _ck(forced)
  assert (f"cluster_k tile: 64x{forced} output tiles, each one's K split "
          f"across a cluster of 2 CTAs") in plan_lib.explain(s)
  free = _opts(s, tile="tiny")
  if planned:
    assert plan_lib.direct_kernel(free) == "cluster_k"
    assert plan_lib.plan(free).kernel == _ck(planned)
  else:
    assert plan_lib.direct_kernel(free) == "tiny"
    assert plan_lib.plan(free).kernel == plan_lib.PlannedKernel("tiny")


def test_cluster_k_plan_elsewhere():
  """The width follows the SMs; the tile stands in for the tiny tile only,
  NN only; the skinny path's fallback carries it where forced."""
  s = _spec(m=128, n=1024, k=1024, opts=CLUSTER_K)
  # 78 SMs: 64x32's 128 CTAs are more than a wave, 64x64's 64 are not.
  assert plan_lib.cluster_k_tile_n(s, 78) == 64
  # Forced on another path (small_m plans 256 rows): the ptr-array kernel.
  s256 = _spec(m=256, opts=KernelOptions(direct_tile="cluster_k"))
  assert plan_lib.plan(s256).path == "sm90_small_m"
  assert plan_lib.direct_reasons(s256) == [
      "direct_tile=cluster_k: not a tile of sm90_small_m"]
  # Transposed: no cluster-K kernel, the reason says so.
  nt = _spec(m=128, tb=True, opts=CLUSTER_K)
  assert plan_lib.direct_kernel(nt) is None
  assert plan_lib.direct_reasons(nt) == [
      "direct_tile=cluster_k: not built for these dtypes and transposes"]
  # The skinny path (m = 16): its fallback is the forced tile, 64 wide
  # (64 tiles: 128 CTAs), beside the skinny split 4.
  sk = _spec(m=16, opts=KernelOptions(direct_tile="cluster_k"))
  p = plan_lib.plan(sk)
  assert p.path == "sm90_skinny"
  assert p.kernel == _ck(64, skinny_split=4)
  assert "fallback the cluster_k tile: 64x64 output tiles, each one's K " \
      "split across a cluster of 2 CTAs" in plan_lib.explain(sk)
  # K inside a wider A that is no multiple of 64: the K rule holds here too.
  a = WinSpec((128, 1088), (128, 1000), (None, 0))
  why = plan_lib.direct_reasons(_spec(m=128, n=1024, k=1000, a=a,
                                      opts=CLUSTER_K))
  assert any(w.startswith("a: k = 1000") for w in why), why


# (name, m, n, k, A buffer, A start, B buffer, B start, out buffer, out
# start, out's static column start, C buffer or None, C start, the tile
# width on 132 SMs); starts are dynamic int32, some clamped.  Each out
# buffer is bigger than its window (poisoned: what lies outside must stay
# the poison).
CLUSTER_K_CASES = [
    # The small GEMM the tile is for: 64 tiles of 64x32, 2 ranks of 8 K
    # tiles; A at a clamped row start, B a layer of a stack, out rows of a
    # taller buffer, alpha * AB + beta * C with C a window at a clamped
    # start.
    ("small", 128, 1024, 1024, (300, 1024), (10 ** 6,), (2, 1024, 1024),
     (1, 0), (400, 1024), (-272,), 0, (700, 1024), (-3,), 32),
    # 64x64 tiles (64x32 would need 256 CTAs): 4 row tiles, A at a row
    # start, B a layer at a negative index, C its own array.
    ("wide", 256, 1024, 1024, (300, 1024), (30,), (3, 1024, 1024), (-1, 0),
     (512, 1024), (100,), 0, (256, 1024), (0,), 64),
    # 10 K tiles over 2 ranks (5, 5).
    ("ten_k", 128, 512, 640, (200, 640), (-1,), (640, 512), (0,),
     (300, 512), (64,), 0, None, None, 32),
    # 7 K tiles (forced where K is short: 64 wide) over 2 ranks (3, 4);
    # m = 96 at out's buffer edge (the second row tile half past it), out a
    # window of its columns.
    ("uneven", 96, 2048, 448, (96, 448), (0,), (448, 2048), (0,),
     (96, 2112), (0,), 64, None, None, 64),
    # k = 1000: the last K tile 40 deep (zero-filled past A's width and B's
    # height); 2 ranks of 8 tiles.
    ("ragged_k", 64, 256, 1000, (64, 1000), (0,), (1000, 256), (0,),
     (128, 256), (2 ** 31 - 1,), 0, None, None, 32),
    # m = 40 < 64: out spans its buffer's 40 rows (a window of its
    # columns), A at a clamped row start, C its own array.
    ("short_m", 40, 512, 2048, (100, 2048), (70,), (2048, 512), (0,),
     (40, 640), (0,), 64, (40, 512), (0,), 32),
    # m = 200: the last row tile 8 rows deep at out's buffer edge; B a
    # layer at a negative index, C a window at a clamped start.
    ("odd_m", 200, 256, 1024, (256, 1024), (56,), (2, 1024, 256), (-1, 0),
     (200, 320), (0,), 64, (300, 256), (10 ** 6,), 32),
    # Row windows of m = 32, 96 and 8 inside taller buffers, at offsets no
    # tile divides: the tiny tile's TMA store would write past them, the
    # cluster-K tile's predicated stores do not (its store rule is the
    # window).  A at a negative (wrapped, clamped) start, B a layer.
    ("rows_32", 32, 1536, 512, (500, 512), (200,), (512, 1536), (0,),
     (400, 1536), (37,), 0, None, None, 32),
    ("rows_96", 96, 768, 2048, (300, 2048), (-5,), (2, 2048, 768), (1, 0),
     (1000, 768), (450,), 0, (400, 768), (17,), 32),
    ("rows_8", 8, 512, 768, (64, 768), (3,), (768, 512), (0,),
     (100, 512), (91,), 0, None, None, 32),
]


def _cluster_k_case(case, dt, opts=CLUSTER_K):
  """(f, args) of a CLUSTER_K_CASES case: f(mod, *args) runs it."""
  (_, m, n, k, ash, ast, bsh, bst, osh, ost, ocol, csh, cst, _) = case
  ks = jax.random.split(jax.random.key(m + n + k), 3)
  a = _rand(ks[0], ash, dt)
  b = _rand(ks[1], bsh, dt)
  c = None if csh is None else _rand(ks[2], csh, dt)
  out = jnp.full(osh, jnp.nan, dt)
  starts = [jnp.int32(v) for v in (*ast, *bst, *ost, *(cst or ()))]
  na, nb, no = len(ast), len(bst), len(ost)

  def f(mod, a, b, c, out, *st):
    sa, sb = st[:na], st[na:na + nb]
    so, sc = st[na + nb:na + nb + no], st[na + nb + no:]
    aw = dyn.window(a, (*sa, 0), (m, k))
    bw = dyn.window(b, (*sb, 0), (k, n))
    ow = dyn.window(out, (*so, ocol), (m, n))
    if c is None:
      return mod.gemm(aw, bw, out=ow, alpha=0.75, opts=opts)
    return mod.gemm(aw, bw, dyn.window(c, (*sc, 0), (m, n)), out=ow,
                    alpha=0.5, beta=-2.0, opts=opts)

  return f, (a, b, c, out, *starts)


@pytest.mark.parametrize("m,n,k", [(32, 1536, 512), (32, 2048, 1024),
                                   (96, 768, 2048), (96, 1536, 768),
                                   (100, 1024, 256)])
def test_row_windows_off_the_tile_plan_cluster_k(m, n, k):
  """Not forced: a row window of D whose m is no multiple of 64, inside a
  taller buffer, runs the cluster-K tile (one launch) on the tiny path,
  not the ptr-array kernel (a pointer kernel and the GEMM)."""
  d = WinSpec((48 * m, n), (m, n), (None, 0))
  s = _spec(m=m, n=n, k=k, d=d, opts=KernelOptions())
  assert plan_lib.plan(s).path == "sm90_tiny"
  assert plan_lib.direct_kernel(s) == "cluster_k", plan_lib.direct_reasons(s)
  assert "ptr-array" not in plan_lib.explain(s)


def test_cluster_k_cases_plan():
  """The cases below take the cluster-K tile at the width they say (CPU:
  the plan only)."""
  for case in CLUSTER_K_CASES:
    f, args = _cluster_k_case(case, BF16)
    spec = plan_lib.first_spec(lambda *x: f(dyn, *x), *args)
    assert plan_lib.plan(spec).path == "sm90_tiny", case[0]
    assert plan_lib.direct_kernel(spec) == "cluster_k", (
        case[0], plan_lib.direct_reasons(spec))
    assert plan_lib.plan(spec).kernel == _ck(case[-1]), case[0]


@pytest.mark.parametrize("case", CLUSTER_K_CASES,
                         ids=[c[0] for c in CLUSTER_K_CASES])
@pytest.mark.parametrize("dt", [BF16, F16])
@pytest.mark.gpu
@on_gpu
def test_cluster_k_matches_reference(case, dt):
  """The cluster-K tile at both widths against the reference; every
  element of out outside its window stays the poison, bit for bit."""
  f, args = _cluster_k_case(case, dt)
  got = jax.jit(lambda *x: f(dyn, *x))(*args)
  want = ref_highest(lambda *x: f(dyn.reference, *x))(*args)
  _check_window(got, want, args[3], dt, case[3])


@pytest.mark.gpu
@on_gpu
def test_cluster_k_is_deterministic():
  """The ranks add their partials in rank order: the same bits every run."""
  f, args = _cluster_k_case(CLUSTER_K_CASES[0], BF16)
  run = jax.jit(lambda *x: f(dyn, *x))
  first = bits(run(*args))
  for _ in range(3):
    np.testing.assert_array_equal(bits(run(*args)), first)


_CLUSTER_K_SCRIPT = _layer_script(128, 1024, 1024)


@pytest.mark.gpu
@on_gpu
def test_cluster_k_kernel_ran():
  """The handler runs the cluster-K tile (split 2) at 128x1024x1024,
  forced or not; direct=False keeps the tiny ptr-array kernel."""
  out, lines = _run_script(_CLUSTER_K_SCRIPT, tile="tiny",
                           direct_tile="cluster_k")
  assert "['sm90_tiny']" in out, out
  if _is_sm90():
    assert all("kernel=kSm90DirectClusterKBf16NN split_k=2" in l
               for l in lines), lines
  _, lines = _run_script(_CLUSTER_K_SCRIPT)
  if _is_sm90():
    assert all("kernel=kSm90DirectClusterKBf16NN split_k=2" in l
               for l in lines), lines
  _, lines = _run_script(_CLUSTER_K_SCRIPT, tile="tiny",
                         direct_tile="cluster_k", direct=False)
  if _is_sm90():
    assert all("kernel=kSm90TinyBf16Bf16NN" in l for l in lines), lines


# The cluster-K shape, compiled with CUDA graphs from one command up
# (cuda_graph_options), so the call is captured into a command buffer,
# and run three times.
_CLUSTER_K_CAPTURED_SCRIPT = textwrap.dedent("""
    import json, sys
    import jax, jax.numpy as jnp
    import jax_dynoff as dyn
    opts = dyn.KernelOptions(**json.loads(sys.argv[1]))
    m, n, k = 128, 1024, 1024
    ks = jax.random.split(jax.random.key(0), 2)
    x = jax.random.uniform(ks[0], (m, k), jnp.float32, -1, 1).astype(jnp.bfloat16)
    w = jax.random.uniform(ks[1], (2, k, n), jnp.float32, -1, 1).astype(jnp.bfloat16)
    f = lambda mod, x, w, i: mod.gemm(x, dyn.window(w, (i, 0, 0), (k, n)), opts=opts)
    i = jnp.int32(1)
    g = jax.jit(lambda x, w, i: f(dyn, x, w, i)).lower(x, w, i).compile(
        compiler_options=dyn.cuda_graph_options())
    for _ in range(3):
      got = g(x, w, i).astype(jnp.float32)
    with jax.default_matmul_precision("highest"):
      want = jax.jit(lambda x, w, i: f(dyn.reference, x, w, i))(x, w, i).astype(jnp.float32)
    err = float(jnp.abs(got - want).max() / jnp.abs(want).max())
    print("ERR", err)
    assert err < 2 ** -5, err
""")


@pytest.mark.gpu
@on_gpu
def test_cluster_k_runs_captured():
  """The cluster-K tile runs where the launch is captured into a CUDA
  graph too (as a graph node it is faster than the tiny tile as well), the
  planner's choice and a forced one alike, with the right result."""
  if not _is_sm90():
    pytest.skip("the direct tiles need an SM90 GPU")
  for opts in ({}, {"tile": "tiny", "direct_tile": "cluster_k"}):
    _, lines = _run_script(_CLUSTER_K_CAPTURED_SCRIPT, **opts)
    assert any(l.endswith("(captured)") for l in lines), lines
    assert all("kernel=kSm90DirectClusterKBf16NN split_k=2" in l
               for l in lines), lines


_DIRECT_SCRIPT = textwrap.dedent("""
    import json, sys
    import jax, jax.numpy as jnp
    import jax_dynoff as dyn
    opts = dyn.KernelOptions(**json.loads(sys.argv[1]))
    ks = jax.random.split(jax.random.key(0), 3)
    x = jax.random.uniform(ks[0], (2048, 1024), jnp.float32).astype(jnp.bfloat16)
    w = jax.random.uniform(ks[1], (2, 1024, 2048), jnp.float32).astype(jnp.bfloat16)
    buf = jnp.zeros((4096, 2048), jnp.bfloat16)
    # Eligible: tile multiples at dynamic offsets (128 wide tiles: one wave).
    f = jax.jit(lambda x, w, buf, i, r: dyn.gemm(
        x, dyn.window(w, (i, 0, 0), (1024, 2048)),
        out=dyn.window(buf, (r, 0), (2048, 2048)), opts=opts))
    f(x, w, buf, jnp.int32(1), jnp.int32(2048)).block_until_ready()
    from jax_dynoff import plan
    print(plan.direct_kernel(plan.first_spec(
        f, x, w, buf, jnp.int32(1), jnp.int32(2048))))
    # Not: 2000 output rows inside a bigger buffer.
    g = jax.jit(lambda x, w, buf, i, r: dyn.gemm(
        x[:2000], dyn.window(w, (i, 0, 0), (1024, 2048)),
        out=dyn.window(buf, (r, 0), (2000, 2048)), opts=opts))
    g(x, w, buf, jnp.int32(1), jnp.int32(5)).block_until_ready()
""")


@pytest.mark.gpu
@on_gpu
def test_direct_kernel_ran():
  """The handler takes the direct kernel exactly where plan.direct_reasons
  says (and forces the tile KernelOptions.direct_tile names), and
  direct=False keeps the ptr-array kernel."""
  out, lines = _run_script(_DIRECT_SCRIPT)
  assert out.split() == ["wide"], out
  assert len(lines) == 2, lines
  assert all("planned=sm90_large" in l for l in lines), lines
  if _is_sm90():
    assert "kernel=kSm90DirectWideBf16NN" in lines[0], lines
    assert "kernel=kSm90LargeBf16Bf16NN" in lines[1], lines
  out, lines = _run_script(_DIRECT_SCRIPT, direct_tile="large")
  assert out.split() == ["large"], out
  if _is_sm90():
    assert "kernel=kSm90DirectLargeBf16NN" in lines[0], lines
    assert "kernel=kSm90LargeBf16Bf16NN" in lines[1], lines
  _, lines = _run_script(_DIRECT_SCRIPT, direct=False)
  if _is_sm90():
    assert all("kernel=kSm90LargeBf16Bf16NN" in l for l in lines), lines


@pytest.mark.gpu
@on_gpu
def test_direct_kernel_int64_starts():
  f, args = _direct_case(DIRECT_CASES[1], BF16, int64=True,
                         opts=KernelOptions(tile="large"))
  assert plan_lib.direct_reasons(
      plan_lib.first_spec(lambda *x: f(dyn, *x), *args)) == []
  got = jax.jit(lambda *x: f(dyn, *x))(*args)
  want = ref_highest(lambda *x: f(dyn.reference, *x))(*args)
  w = np.asarray(want.astype(F32))
  np.testing.assert_array_equal(np.isnan(np.asarray(got.astype(F32))),
                                np.isnan(w))
  inside = ~np.isnan(w)
  _check(jnp.asarray(np.asarray(got.astype(F32))[inside]),
         jnp.asarray(w[inside]), BF16, BF16, 320)


# Every kernel of ours: the library's own (namespace jax_dynoff: the skinny,
# pointer, copy, scale and reduction kernels) and CUTLASS's
# (cutlass::device_kernel).  XLA's kernels are left out: the sanitizers
# need not vouch for them.
OUR_KERNELS = "regex=jax_dynoff|cutlass"
# What each tool adds: memcheck checks every kernel (ours and XLA's, the
# copies around ours); racecheck and synccheck run over ours.
SANITIZER_ARGS = {
    "memcheck": ["--leak-check", "no"],
    "racecheck": ["--kernel-name", OUR_KERNELS],
    "synccheck": ["--kernel-name", OUR_KERNELS],
}
SANITIZER_SUMMARY = {
    "memcheck": "ERROR SUMMARY: 0 errors",
    "racecheck": "RACECHECK SUMMARY: 0 hazards",
    "synccheck": "ERROR SUMMARY: 0 errors",
}
SANITIZER_LIMIT_S = 600


def _compute_sanitizer():
  import shutil
  exe = shutil.which("compute-sanitizer")
  if exe is None:
    cuda = os.environ.get("CUDA_HOME", "/usr/local/cuda")
    exe = os.path.join(cuda, "bin", "compute-sanitizer")
    if not os.path.exists(exe):
      pytest.skip("compute-sanitizer not found")
  return exe


def _run_case_script(cmd, env, what):
  """Runs cmd in a process group of its own (killing the sanitizer alone
  would leave Python holding the pipes); fails naming the cases that
  finished if it outlasts the limit (each CASE line carries its seconds,
  the next case in the script being the one that stalled)."""
  proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True,
                          start_new_session=True)
  try:
    out, err = proc.communicate(timeout=SANITIZER_LIMIT_S)
  except subprocess.TimeoutExpired:
    os.killpg(proc.pid, signal.SIGKILL)
    out, _ = proc.communicate()
    done = [l for l in out.splitlines() if l.startswith("CASE")]
    pytest.fail(f"{what} did not finish in {SANITIZER_LIMIT_S} s; the cases "
                "that did:\n" + "\n".join(done[-40:]))
  return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


@pytest.mark.gpu
@on_gpu
@pytest.mark.parametrize("tool", ["racecheck", "synccheck"])
def test_sanitizer_filter_sees_planted_bugs(tool, tmp_path):
  """The filter of test_sanitizers_clean instruments what it claims to:
  a planted shared-memory race (racecheck) or divergent barrier
  (synccheck) under a jax_dynoff:: name and under cutlass::device_kernel
  is reported; the same bug under another name is not (tests/
  sanitizer_control.cu)."""
  import shutil
  nvcc = shutil.which("nvcc") or os.path.join(
      os.environ.get("CUDA_HOME", "/usr/local/cuda"), "bin", "nvcc")
  if not os.path.exists(nvcc):
    pytest.skip("nvcc not found")
  exe = str(tmp_path / "control")
  src = os.path.join(os.path.dirname(__file__), "sanitizer_control.cu")
  built = subprocess.run([nvcc, "-O1", "-std=c++17", "-lineinfo",
                          "-gencode=arch=compute_90a,code=sm_90a", src, "-o",
                          exe], capture_output=True, text=True, check=False)
  assert built.returncode == 0, built.stderr[-3000:]
  bug = "race" if tool == "racecheck" else "sync"
  for where, reported in [("jax_dynoff", True), ("cutlass", True),
                          ("elsewhere", False)]:
    r = _run_case_script([_compute_sanitizer(), "--tool", tool,
                          "--error-exitcode", "99", *SANITIZER_ARGS[tool],
                          exe, bug, where], dict(os.environ), tool)
    out = r.stdout + r.stderr
    assert "LAUNCHED" in out, (where, out[-3000:])
    assert (r.returncode == 99) == reported, (where, out[-3000:])


@pytest.fixture(scope="module")
def sanitizer_env(tmp_path_factory):
  """tests/memcheck_cases.py run once without a sanitizer, filling a
  persistent compilation cache of its own; the environment that serves
  the sanitizers' runs from it, so that XLA compiles nothing under them
  (compute-sanitizer 2025.3.1 crashed with SIGSEGV inside XLA compiles on
  an H200, after a different number of clean cases each time; loading a
  cached executable loads the same kernels, which the sanitizer
  instruments as before)."""
  env = dict(os.environ, XLA_PYTHON_CLIENT_PREALLOCATE="false",
             JAX_COMPILATION_CACHE_DIR=str(
                 tmp_path_factory.mktemp("jax_cache")),
             JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0",
             JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES="0")
  script = os.path.join(os.path.dirname(__file__), "memcheck_cases.py")
  warm = _run_case_script([sys.executable, "-u", script], env,
                          "the cache's run")
  tail = (warm.stdout + warm.stderr)[-6000:]
  assert warm.returncode == 0 and "ALL_OK" in warm.stdout, tail
  return env, script


@pytest.mark.gpu
@on_gpu
@pytest.mark.parametrize("tool", ["memcheck", "racecheck", "synccheck"])
def test_sanitizers_clean(tool, sanitizer_env):
  """tests/memcheck_cases.py (every kernel family and path, clamping,
  table look-ups, C copies, split-K, grouped and ragged, batches, k = 0)
  under compute-sanitizer: memcheck (no invalid access in our kernels or
  the kernels around them), racecheck (no shared-memory hazard) and
  synccheck (no invalid barrier use) over every kernel of ours.

  (racecheck 2025.3 does not attribute writes by TMA tensor copies to a
  thread, so hazards on shared memory that TMA fills are outside what it
  can see; our own kernels share data through plain and distributed
  shared memory, which it covers.)"""
  env, script = sanitizer_env
  r = _run_case_script([_compute_sanitizer(), "--tool", tool,
                        "--error-exitcode", "99", "--report-api-errors", "no",
                        *SANITIZER_ARGS[tool], sys.executable, "-u", script],
                       env, tool)
  tail = (r.stdout + r.stderr)[-6000:]
  assert r.returncode == 0, tail
  assert "ALL_OK" in r.stdout, tail
  assert SANITIZER_SUMMARY[tool] in r.stdout + r.stderr, tail
  # Every case ran, each from the cache (no XLA compile under the tool).
  assert r.stdout.count("CASE") >= 50, tail
  assert "COMPILES 0 of" in r.stdout, tail
  print(tail)  # (pytest -rA shows it: the summary and the compile count)
