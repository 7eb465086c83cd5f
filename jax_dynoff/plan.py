"""Which CUDA kernel runs a call, decided at trace time from static facts.

The choice (and the workspace it needs) is baked into the lowered program, so
a compiled loop always launches the same kernels: that is what keeps the
CUDA handler command-buffer (CUDA graph) safe.  The CPU handler ignores it.

Paths (enum Path in ffi/gemm_problem.h):

* ``generic``: CUTLASS 2.x SIMT GEMM in array mode, alignment 1, any
  transpose, every dtype pair, full float32 accuracy; any GPU >= sm_80.
* ``sm90_large`` / ``sm90_small_m``: CUTLASS 3.x ptr-array TMA
  warp-specialized kernels (256x128x64 cooperative / 64x128x64 ping-pong),
  built for sm_90a only, for the (dtype, transpose) combinations in
  `SM90_KERNELS`.  Chosen only when `alignment_proof` shows that every window
  address is 16-byte aligned whatever the dynamic offsets are.
* ``sm90_split_k``: reserved (not planned; the handler runs it as
  ``sm90_large``).

Fallback rule (the handler, ffi/cuda_gemm.cu): a planned SM90 path is a
request.  The CUDA handler runs the generic kernel instead when the device
is not compute capability 9.0 (the plan cannot see the device), when the
extension was built without sm_90a, when a buffer base is not 16-byte
aligned, or when the environment variable ``JAX_DYNOFF_DISABLE_SM90`` is set
(to anything but "0").  The result is the same; only the speed differs.
``JAX_DYNOFF_LOG=1`` makes the handler print the kernel of every call.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Optional

import numpy as np

from jax_dynoff.spec import GemmSpec, WinSpec

# Mirrors enum class Path in ffi/gemm_problem.h.
PATHS = {"generic": 0, "sm90_large": 1, "sm90_small_m": 2, "sm90_split_k": 3}

# Mirrors ffi/cuda_gemm.cu (Layout) and ffi/kernels/launch.h.
WORKSPACE_ALIGN = 256
SM90_KERNEL_WORKSPACE = 1 << 19   # kernels::kSm90KernelWorkspace
TMA_ALIGN_BYTES = 16

# SM90 kernels built (ffi/kernels/sm90_*.cu), keyed by
# (input dtype, output dtype, transpose_a, transpose_b) -> tiles available.
SM90_KERNELS = {
    ("bfloat16", "bfloat16", False, False): ("large", "small_m"),
    ("bfloat16", "bfloat16", False, True): ("large", "small_m"),
    ("bfloat16", "bfloat16", True, False): ("large", "small_m"),
    ("float16", "float16", False, False): ("large", "small_m"),
}
SM90_LARGE_TILE = (256, 128)
SM90_SMALL_TILE = (64, 128)
# The plan cannot see the device; an H100/H200 has 132 SMs.
ASSUMED_SM_COUNT = 132


@dataclasses.dataclass(frozen=True)
class Plan:
  path: str              # a key of PATHS
  split_k: int           # K slices (1: no split)
  workspace_bytes: int   # the CUDA handler's scratch (ret 1), fixed now


def _round_up(x: int, a: int) -> int:
  return (x + a - 1) // a * a


def element_bytes(dtype) -> int:
  return int(np.dtype(dtype).itemsize)


def batch_strides(w: WinSpec, batch_shape) -> tuple[int, ...]:
  """Element strides of the batch dims `w`'s array carries (0 if it does not).

  Same rule as Decode in ffi/gemm_problem.h: the carried batch dims lead,
  in batch-dim order, before the array's own dims.
  """
  s = int(np.prod(w.dims, dtype=np.int64)) if w.dims else 1
  out = [0] * len(batch_shape)
  for j in reversed(range(len(batch_shape))):
    if j < len(w.batched) and w.batched[j]:
      out[j] = s
      s *= int(batch_shape[j])
  return tuple(out)


def window_alignment(w: WinSpec, dtype, batch_shape) -> list[str]:
  """Why `w`'s address may not be 16-byte aligned (empty: proven aligned).

  Assumes the buffer base is 16-byte aligned (XLA's buffers are; the handler
  re-checks the actual addresses).  The window's address is
  base + elt * (static offset + sum of dynamic starts * stride
  + batch indices * batch stride), every start clamped; it is a multiple of
  16 bytes for every value of the dynamic starts iff each term is.  TMA also
  needs the leading dimension and (CUTLASS's check) the contiguous extent
  to be multiples of 16 bytes.
  """
  e = element_bytes(dtype)
  bad = []
  if (w.ld * e) % TMA_ALIGN_BYTES:
    bad.append(f"leading dimension {w.ld} x {e} bytes")
  if (w.cols * e) % TMA_ALIGN_BYTES:
    bad.append(f"window width {w.cols} x {e} bytes")
  if (w.static_offset() * e) % TMA_ALIGN_BYTES:
    bad.append(f"static offset {w.static_offset()} x {e} bytes")
  strides = w.strides
  for i, s in enumerate(w.starts):
    # A dynamic start on a dim the window spans fully is always clamped to 0.
    if s is None and w.win[i] != w.dims[i] and (strides[i] * e) % TMA_ALIGN_BYTES:
      bad.append(f"dynamic start in dim {i} (stride {strides[i]} x {e} bytes)")
  for j, bs in enumerate(batch_strides(w, batch_shape)):
    if (bs * e) % TMA_ALIGN_BYTES:
      bad.append(f"batch dim {j} (stride {bs} x {e} bytes)")
  return bad


def c_is_read(spec: GemmSpec) -> bool:
  return spec.c is not None and spec.c_mode != "none" and spec.beta != 0


def alignment_proof(spec: GemmSpec) -> dict[str, list[str]]:
  """Per operand, the reasons TMA alignment is not proven ({} when it is)."""
  ops = [("a", spec.a, spec.in_dtype), ("b", spec.b, spec.in_dtype),
         ("d", spec.d, spec.out_dtype)]
  if c_is_read(spec):
    # A C copied into the workspace (c_mode "from_d") keeps C's leading
    # dimension at a 256-byte aligned base: the same proof covers it.
    ops.append(("c", spec.c, spec.out_dtype))
  out = {}
  for name, w, dt in ops:
    bad = window_alignment(w, dt, spec.batch_shape)
    if bad:
      out[name] = bad
  return out


def sm90_reasons(spec: GemmSpec) -> list[str]:
  """Why `spec` cannot take an SM90 path (empty: it can)."""
  why = []
  key = (np.dtype(spec.in_dtype).name, np.dtype(spec.out_dtype).name,
         bool(spec.trans_a), bool(spec.trans_b))
  if key not in SM90_KERNELS:
    why.append(f"no SM90 kernel for {key}")
  if spec.k == 0 or spec.m == 0 or spec.n == 0 or spec.batch == 0:
    why.append("empty problem")
  if max(spec.m, spec.n, spec.k) >= 2**31 or spec.batch >= 2**31:
    why.append("extent >= 2^31")
  for name, bad in alignment_proof(spec).items():
    why.append(f"{name}: " + "; ".join(bad))
  return why


def _choose_tile(spec: GemmSpec, tiles: tuple[str, ...]) -> str:
  lm, ln = SM90_LARGE_TILE
  large_ctas = (math.ceil(spec.m / lm) * math.ceil(spec.n / ln) * spec.batch)
  # Small m, or too few large tiles to fill the GPU once: 64x128 ping-pong
  # has 4x the CTAs (and measured 29 us vs 52 us at 128x4096x4096).
  want = ("small_m" if spec.m <= 256 or large_ctas < ASSUMED_SM_COUNT
          else "large")
  return want if want in tiles else tiles[0]


@dataclasses.dataclass(frozen=True)
class WorkspaceLayout:
  kernel_bytes: int   # CUTLASS's own scratch at offset 0
  ptrs: int           # offset of the 4 * batch pointer arrays
  scratch: int        # offset of the C copies
  scratch_item: int   # bytes per batch item of C copy (0: none)
  total: int


def workspace_layout(spec: GemmSpec, path: str) -> WorkspaceLayout:
  """The handler's workspace layout (ffi/cuda_gemm.cu, Layout)."""
  batch = spec.batch
  kernel = SM90_KERNEL_WORKSPACE if path.startswith("sm90") else 0
  ptrs = kernel
  scratch = _round_up(ptrs + 4 * 8 * batch, WORKSPACE_ALIGN)
  item = 0
  if (spec.c_mode == "from_d" and spec.c is not None and spec.beta != 0
      and spec.m > 0 and spec.n > 0):
    item = _round_up(((spec.m - 1) * spec.c.ld + spec.n)
                     * element_bytes(spec.out_dtype), WORKSPACE_ALIGN)
  return WorkspaceLayout(kernel, ptrs, scratch, item, scratch + batch * item)


def plan(spec: GemmSpec) -> Plan:
  """The CUDA plan for `spec` (see the module docstring for the rules)."""
  path = "generic"
  if not sm90_reasons(spec):
    key = (np.dtype(spec.in_dtype).name, np.dtype(spec.out_dtype).name,
           bool(spec.trans_a), bool(spec.trans_b))
    path = "sm90_" + _choose_tile(spec, SM90_KERNELS[key])
  return Plan(path, 1, workspace_layout(spec, path).total)


def explain(spec: GemmSpec) -> str:
  """One line: the planned path and, for generic, why not SM90."""
  p = plan(spec)
  if p.path != "generic":
    return f"{p.path} (workspace {p.workspace_bytes} bytes)"
  return "generic: " + "; ".join(sm90_reasons(spec))


# --- Test helpers: which specs / paths a traced function uses. -------------

def _walk(jaxpr, out: list):
  for eqn in jaxpr.eqns:
    for v in eqn.params.values():
      _walk_param(v, out)


def _walk_param(v, out: list):
  if isinstance(v, GemmSpec):
    out.append(v)
  elif hasattr(v, "eqns"):             # core.Jaxpr
    _walk(v, out)
  elif hasattr(v, "jaxpr") and hasattr(v.jaxpr, "eqns"):  # ClosedJaxpr
    _walk(v.jaxpr, out)
  elif isinstance(v, (tuple, list)):
    for x in v:
      _walk_param(x, out)


def traced_specs(fn, *args, **kwargs) -> list[GemmSpec]:
  """Every GemmSpec in the jaxpr of fn(*args, **kwargs), nested ones too
  (loops, conds, vmap, grad), in program order."""
  import jax  # pylint: disable=g-import-not-at-top
  closed = jax.make_jaxpr(fn)(*args, **kwargs)
  out: list[GemmSpec] = []
  _walk(closed.jaxpr, out)
  return out


def traced_paths(fn, *args, **kwargs) -> list[str]:
  """The planned path of every jax_dynoff GEMM in fn(*args, **kwargs)."""
  return [plan(s).path for s in traced_specs(fn, *args, **kwargs)]


def first_spec(fn, *args, **kwargs) -> Optional[GemmSpec]:
  specs = traced_specs(fn, *args, **kwargs)
  return specs[0] if specs else None
