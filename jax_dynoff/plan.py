"""Which CUDA kernel runs a call, decided at trace time from static facts.

The choice (and the workspace it needs) is baked into the lowered program, so
a compiled loop always launches the same kernels: that is what keeps the
CUDA handler command-buffer (CUDA graph) safe.  The CPU handler ignores it.

Paths (enum Path in ffi/gemm_problem.h):

* ``generic``: CUTLASS 2.x SIMT GEMM in array mode, alignment 1, any
  transpose, every dtype pair, full float32 accuracy; any GPU >= sm_80.
  float32 at ``precision=HIGHEST`` (or under
  ``jax.default_matmul_precision("highest")``) always comes here.
* ``tf32``: float32 in and out at default precision, as jnp.dot on GPU:
  CUTLASS 2.x tensor-op GEMM (TF32 inputs, float32 accumulation) in array
  mode, alignment 1, one kernel per transpose combination; any GPU >= sm_80.
  ``KernelOptions(tf32=False)`` (applied by the handler) runs the exact
  generic kernel instead.
* ``sm90_large`` / ``sm90_medium`` / ``sm90_small_m`` / ``sm90_tiny``:
  CUTLASS 3.x ptr-array TMA warp-specialized kernels (256x128x64
  cooperative, cluster 1x2 / 128x128x64, 64x128x64 and 64x64x64 ping-pong),
  built for sm_90a only, for the (dtype, transpose) combinations in
  `SM90_KERNELS`.  Chosen only when `alignment_proof` shows that every window
  address is 16-byte aligned whatever the dynamic offsets are.  The tile is
  the one `sm90_tile_times` predicts fastest (waves of tiles over 132 SMs,
  each tile at its measured rate); ``KernelOptions(tile=...)`` forces one
  (for tests and tuning sweeps).
* ``sm90_split_k`` (opt-in: planned only with ``KernelOptions(split_k=True)``;
  its GPU tests pass on an H200, but neither of its kernels made a loop of
  skinny layers faster than the unsplit 64x64 tile at default XLA flags, see
  benchmarks/NOTES.md): skinny problems (m <= 256, no transposes,
  bfloat16 / float16 inputs, any output dtype).  Where its windows suit it
  (`split_k_direct`: the direct kernels' rules, 128x128 output tiles) the
  direct split-K kernel runs: split_k CTAs share each output tile along K
  and add their float32 accumulators in the workspace in a fixed order
  (CUTLASS's stream-K scheduler in split-K mode; one launch after the
  scheduler's memset).  Elsewhere K is split into ``split_k`` equal slices
  through the ptr-array batch (batch * split_k items of a 64x128x64
  ping-pong kernel writing float32 partials into the workspace), then a
  reduction kernel sums the partials, applies alpha and beta * C and writes
  the D window.  Needs A and B aligned as for every SM90 path, each K slice
  a multiple of 16 bytes and n % 4 == 0 (C and D may have any alignment
  for the ptr-array slices); `choose_split_k` picks split_k.
  ``KernelOptions(split_k_slices=S)`` forces S (for tuning sweeps).

* ``sm90_skinny``: m <= 16 (stacked-weight layers, decode steps), where
  the time is streaming B and the wgmma tiles (64 rows or more) waste most
  of their work: one launch of the skinny kernel (ffi/kernels/
  sm90_skinny.h: mma.sync, 128-column CTAs, each column tile's K shared by
  the CTAs of one cluster, reduced in distributed shared memory in a fixed
  order; no workspace, no memset).  Needs what every SM90 path needs (every
  window aligned) and one item, no transposes, bfloat16 / float16 in and
  out of one dtype, no C read from out's own array (`skinny_reasons`).
  The handler runs the tiny tile instead (as if planned for it, direct twin
  included; the workspace is the tiny tile's) where the kernel cannot run,
  or with ``KernelOptions(skinny=False)`` (tests and the bench compare the
  two).  A forced SM90 tile (``KernelOptions(tile=...)``) or split-K
  (``KernelOptions(split_k=True)``) is planned instead.

Direct kernels (the handler's choice, mirrored by `direct_kernel` and
`direct_reasons`): a call planned for an SM90 tile runs CUTLASS's plain
(non-array) TMA kernel of that tile instead of the ptr-array one, its TMA
descriptors over the whole buffers and its tile coordinates shifted on the
device to the windows (ffi/kernels/sm90_direct.h): one launch, no pointer
kernel, no pointer arrays.  ``sm90_large`` has two: ``wide`` (128x256) where
its tiles fit one wave of SMs, else ``large`` (256x128); ``sm90_medium``,
``sm90_small_m`` and ``sm90_tiny`` one each (DIRECT_TILE_PATHS).  It needs
one item, no transposes, 16-bit inputs and output of the same dtype,
no C read from D's own buffer (that may overlap D partly), no dynamic
column start, windows whose K extent is a multiple of 64 or spans its
buffer's dim, and an output window whose rows / columns are multiples of
the tile's or span its buffer's dims.  ``KernelOptions(direct=False)``
(applied by the handler) keeps the ptr-array kernel;
``KernelOptions(direct_tile=...)`` forces one of the planned path's direct
tiles.

Fallback rule (the handler, ffi/cuda_gemm.cu): a planned SM90 path is a
request.  The CUDA handler runs the generic kernel instead when the device
is not compute capability 9.0 (the plan cannot see the device), when the
extension was built without sm_90a, when a buffer base is not 16-byte
aligned, or with ``KernelOptions(sm90=False)``; a split-K plan then runs
the generic kernel unsplit.  The result is the same; only the speed
differs.  ``JAX_DYNOFF_LOG=1`` (the one debug switch, read once by the
handler) makes it print the kernel of every call.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import Optional

import numpy as np

from jax_dynoff import options
from jax_dynoff.extension import ext as _ext
from jax_dynoff.spec import GemmSpec, WinSpec, encode_desc

# Mirrors enum class Path in ffi/gemm_problem.h.
PATHS = {"generic": 0, "sm90_large": 1, "sm90_small_m": 2, "sm90_split_k": 3,
         "sm90_medium": 4, "sm90_tiny": 5, "tf32": 6, "sm90_skinny": 7}

# The handler's workspace layout lives in ffi/plan.h; these are its
# numbers, as the extension reports them.
WORKSPACE_ALIGN = _ext.WORKSPACE_ALIGN
SM90_KERNEL_WORKSPACE = _ext.SM90_KERNEL_WORKSPACE  # kSm90KernelWorkspace
TMA_ALIGN_BYTES = 16

# SM90 kernels built (ffi/kernels/sm90_*.cu), keyed by
# (input dtype, output dtype, transpose_a, transpose_b) -> tiles available.
SM90_TILES = options.SM90_TILES
SM90_KERNELS = {
    ("bfloat16", "bfloat16", False, False): SM90_TILES,
    ("bfloat16", "bfloat16", False, True): SM90_TILES,
    ("bfloat16", "bfloat16", True, False): SM90_TILES,
    ("float16", "float16", False, False): SM90_TILES,
}
# tile -> (tile m, tile n, TFLOP/s of one full wave of that tile on an H200,
# bf16, measured by benchmarks/sm90_tiles at 2048^3 .. 8192^3 and
# 128/512 x 4096 x 4096: the rate at which each SM works through its tile).
SM90_TILE_SHAPES = {
    "large": (256, 128, 650.0),
    "medium": (128, 128, 630.0),
    "small_m": (64, 128, 550.0),
    "tiny": (64, 64, 420.0),
}
# SMs assumed where no CUDA device is visible (lowering for CUDA on a machine
# without one): an H100 / H200's.
ASSUMED_SM_COUNT = 132


@functools.lru_cache(maxsize=None)
def sm_count() -> int:
  """SMs of the GPU calls are planned for: the first CUDA device's (the
  handler runs its device's own count through the same rules), else
  ASSUMED_SM_COUNT."""
  try:
    import jax  # pylint: disable=g-import-not-at-top
    devices = jax.devices("cuda")
  except RuntimeError:  # no CUDA backend in this process
    return ASSUMED_SM_COUNT
  n = getattr(devices[0], "core_count", None) if devices else None
  return int(n) if n else ASSUMED_SM_COUNT

# Split-K (path sm90_split_k): the direct split-K kernel
# (ffi/kernels/sm90_direct_splitk_*.cu) where its windows suit it, else the
# ptr-array slices (ffi/kernels/sm90_splitk_*.cu) and a reduction kernel.
SPLITK_IN_DTYPES = ("bfloat16", "float16")   # kernels built (NN only)
SPLITK_MAX_M = 256
SPLITK_TILE = (64, 128)                      # Sm90SplitKConfig (ptr-array)
# kDirectSplitKTileM/N (ffi/plan.h): Sm90DirectSplitKConfig.
DIRECT_SPLITK_TILE = (128, 128)
SPLITK_CANDIDATES = (2, 4, 8, 16, 32)
SPLITK_MIN_SLICE_K = 128                     # two 64-deep k-tiles per slice
PARTIAL_BYTES = 4                            # float32 partials


def splitk_target_ctas() -> int:
  """Split until the slice tiles fill about two waves (ceil(1.5) = 2) of
  SMs."""
  return 3 * sm_count() // 2


@dataclasses.dataclass(frozen=True)
class Plan:
  path: str              # a key of PATHS
  split_k: int           # K slices (1: no split)
  workspace_bytes: int   # the CUDA handler's scratch (ret 1), fixed now


def _tiles(spec: GemmSpec, tile: tuple[int, ...]) -> int:
  """Output tiles of (tile m, tile n, ...) covering one item's m x n."""
  return math.ceil(spec.m / tile[0]) * math.ceil(spec.n / tile[1])


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


def sm90_tile_times(spec: GemmSpec) -> dict[str, float]:
  """Predicted microseconds per tile configuration: whole waves of tiles
  (a partial wave costs a full one) times one tile's time at its measured
  full-wave rate.  It reproduced the sweep within about 15% and picks its
  winner at every swept shape (2048^3: large; 512x4096x4096: medium;
  128x4096x4096: tiny)."""
  out = {}
  for name, (tm, tn, tflops) in SM90_TILE_SHAPES.items():
    tiles = _tiles(spec, (tm, tn)) * spec.batch
    sms = sm_count()
    waves = math.ceil(tiles / sms)
    per_tile_us = 2.0 * tm * tn * spec.k * sms / (tflops * 1e6)
    out[name] = waves * per_tile_us
  return out


def _choose_tile(spec: GemmSpec, tiles: tuple[str, ...]) -> str:
  forced = spec.opts.tile
  if forced is not None and forced in tiles:
    return forced
  times = sm90_tile_times(spec)
  # Ties go to the bigger tile (fewer CTAs, less re-reading of A and B).
  return min(tiles, key=lambda t: (times[t], SM90_TILES.index(t)))


# --- The direct kernels (ffi/kernels/sm90_direct.h) -------------------------

# tile -> (tile m, tile n): the Sm90Direct*Config of each direct kernel.
DIRECT_TILES = {"large": (256, 128), "wide": (128, 256), "medium": (128, 128),
                "small_m": (64, 128), "tiny": (64, 64),
                "split_k": DIRECT_SPLITK_TILE}
# The planned path each direct tile stands in for (its SM90 tile, the one
# KernelOptions.tile names: "wide" is a second tile of the large path).
DIRECT_TILE_PATHS = {"large": "sm90_large", "wide": "sm90_large",
                     "medium": "sm90_medium", "small_m": "sm90_small_m",
                     "tiny": "sm90_tiny", "split_k": "sm90_split_k"}
DIRECT_TILE_K = 64
DIRECT_DTYPES = ("bfloat16", "float16")      # kernels built (NN, out = in)
_INT32_MAX = 2 ** 31 - 1


def _tile_or_edge(win: int, dim: int, tile: int) -> bool:
  return win % tile == 0 or win == dim


def _direct_window_reasons(name: str, w: WinSpec) -> list[str]:
  why = []
  layers = int(np.prod(w.dims[:-2], dtype=np.int64)) if len(w.dims) > 2 else 1
  if max(w.dims[-2], w.dims[-1], layers) > _INT32_MAX:
    why.append(f"{name}: a dim >= 2^31")
  if w.starts[-1] is None and w.win[-1] != w.dims[-1]:
    why.append(f"{name}: dynamic column start")
  return why


def _store_reasons(d: WinSpec, tile: str) -> list[str]:
  tm, tn = DIRECT_TILES[tile]
  return [f"out: {extent} = {win} neither a multiple of {t} nor the array's "
          f"{edge} ({tile} tile)"
          for extent, win, dim, t, edge in (
              ("m", d.win[-2], d.dims[-2], tm, "height"),
              ("n", d.win[-1], d.dims[-1], tn, "width"))
          if not _tile_or_edge(win, dim, t)]


def _one_item_nn_reasons(spec: GemmSpec, dtypes, kind: str) -> list[str]:
  """The rules the direct and skinny kernels share: one item, no
  transposes, 16-bit in and out of one dtype (`dtypes`), and no C read from
  out's own array (a C window overlapping D's partly would be read after
  other CTAs wrote it)."""
  why = []
  if spec.batch != 1:
    why.append(f"{spec.batch} batch items")
  if spec.trans_a or spec.trans_b:
    why.append("transposed operand")
  in_dt, out_dt = np.dtype(spec.in_dtype).name, np.dtype(spec.out_dtype).name
  if in_dt not in dtypes or out_dt != in_dt:
    why.append(f"no {kind} kernel for {in_dt} -> {out_dt}")
  if spec.c_mode == "from_d" and c_is_read(spec):
    why.append("C is read from out's own array (may overlap D partly)")
  return why


def _direct_choice(spec: GemmSpec) -> tuple[Optional[str], list[str]]:
  """(the direct tile, None for the ptr-array kernel; the reasons for None).
  Mirrors ChooseDirect in ffi/cuda_gemm.cu, with sm_count() SMs."""
  return _direct_choice_for(spec, plan(spec).path)


def _direct_choice_for(spec: GemmSpec,
                       planned: str) -> tuple[Optional[str], list[str]]:
  """`_direct_choice` for a call planned for path `planned`."""
  candidates = [t for t, p in DIRECT_TILE_PATHS.items() if p == planned]
  if not candidates:
    return None, [f"planned {planned}: no direct kernel"]
  why = _one_item_nn_reasons(spec, DIRECT_DTYPES, "direct")
  if planned == "sm90_split_k":
    # The unsplit SM90 paths are planned only with every window aligned;
    # split-K proves it for A and B alone (its ptr-array slices leave C
    # and D to the reduction kernel), the direct kernel needs C and D too.
    why += [f"{name}: " + "; ".join(bad)
            for name, bad in alignment_proof(spec).items()
            if name in ("c", "d")]
  ops = [("a", spec.a), ("b", spec.b), ("d", spec.d)]
  if c_is_read(spec):
    ops.append(("c", spec.c))
  for name, w in ops:
    why += _direct_window_reasons(name, w)
  tk = DIRECT_TILE_K
  for name, win, dim, edge in (("a", spec.a.win[-1], spec.a.dims[-1], "width"),
                               ("b", spec.b.win[-2], spec.b.dims[-2], "height")):
    if not _tile_or_edge(win, dim, tk):
      why.append(f"{name}: k = {win} neither a multiple of {tk} nor the "
                 f"array's {edge}")
  forced = spec.opts.direct_tile
  if forced and forced not in candidates:
    why.append(f"direct_tile={forced}: not a tile of {planned}")
  stores = {t: _store_reasons(spec.d, t)
            for t in ([forced] if forced in candidates else candidates)}
  if all(stores.values()):
    why += [w for ws in stores.values() for w in ws]
  if why:
    return None, why
  if forced or len(candidates) == 1:
    return (forced or candidates[0]), []
  wide_tiles = _tiles(spec, DIRECT_TILES["wide"])
  if not stores["wide"] and (wide_tiles <= sm_count() or stores["large"]):
    return "wide", []
  return "large", []


def direct_reasons(spec: GemmSpec) -> list[str]:
  """Why a call runs a ptr-array kernel (or none of the SM90 ones) rather
  than a direct one (empty: a direct one, unless the call's options say
  direct=False)."""
  return _direct_choice(spec)[1]


def direct_kernel(spec: GemmSpec) -> Optional[str]:
  """The direct tile that runs `spec` on an H200 (DIRECT_TILES), or None for
  the ptr-array kernel (then `direct_reasons` says why).  Each planned SM90
  tile has its direct twin; the large path has two: the wide tile (128x256)
  where its tiles fit one wave of SMs (each of its tiles is faster), else
  the large one (256x128, as fast or faster over several waves); either one
  where only its store rule holds.  ``KernelOptions(direct_tile=...)``
  forces a tile where it stands in for the planned path and its rules
  hold."""
  return _direct_choice(spec)[0]


# --- Split-K -----------------------------------------------------------------

def splitk_enabled(spec: GemmSpec) -> bool:
  """Whether the call's options ask for the (opt-in) split-K path."""
  return spec.opts.split_k


def direct_split_k_workspace(spec: GemmSpec) -> int:
  """The direct split-K kernel's scheduler workspace (DirectSplitKWorkspace
  in ffi/plan.h): a float32 accumulator tile per output tile, then
  two 32-bit barriers per output tile, each part rounded to 128 bytes."""
  return int(_ext.direct_split_k_workspace(spec.m, spec.n))


def split_k_direct(spec: GemmSpec) -> bool:
  """Whether a split-K plan of `spec` runs the direct split-K kernel on an
  H200 (else the ptr-array slices and the reduction kernel)."""
  return not _direct_choice_for(spec, "sm90_split_k")[1]


def _slice_ok(spec: GemmSpec, s: int) -> bool:
  """K splits into `s` equal slices whose addresses stay 16-byte aligned."""
  ks = spec.k // s if s > 0 else 0
  return (s >= 1 and ks > 0 and spec.k % s == 0
          and (ks * element_bytes(spec.in_dtype)) % TMA_ALIGN_BYTES == 0
          and spec.batch * s < 2**31)


def split_k_candidates(spec: GemmSpec) -> list[int]:
  """The slice counts `choose_split_k` may pick, ascending.

  Each must split K into equal slices of a multiple of 16 bytes (CUTLASS's
  ArrayProblemShape has one K for all items, and every slice's A / B address
  must stay TMA-aligned) and of at least SPLITK_MIN_SLICE_K elements, and
  the float32 partials (written once, read once) may at most double the
  bytes of B: 2 * S * m * n * 4 <= k * n * elt.
  """
  e = element_bytes(spec.in_dtype)
  return [s for s in SPLITK_CANDIDATES
          if _slice_ok(spec, s) and spec.k // s >= SPLITK_MIN_SLICE_K
          and 2 * s * spec.m * PARTIAL_BYTES <= spec.k * e]


def split_k_tiles(spec: GemmSpec) -> int:
  """Output tiles (CTAs' work units) of the unsplit problem, split-K tile."""
  return _tiles(spec, SPLITK_TILE) * spec.batch


def split_k_reasons(spec: GemmSpec) -> list[str]:
  """Why `spec` cannot take the split-K path (empty: it can), whether or not
  its options ask for it."""
  why = []
  in_dt = np.dtype(spec.in_dtype).name
  if in_dt not in SPLITK_IN_DTYPES:
    why.append(f"no split-K kernel for {in_dt} inputs")
  if spec.trans_a or spec.trans_b:
    why.append("split-K kernels exist only for A and B not transposed")
  if spec.k == 0 or spec.m == 0 or spec.n == 0 or spec.batch == 0:
    why.append("empty problem")
  if max(spec.m, spec.n, spec.k) >= 2**31 or spec.batch >= 2**31:
    why.append("extent >= 2^31")
  if spec.m > SPLITK_MAX_M:
    why.append(f"m = {spec.m} > {SPLITK_MAX_M}")
  if spec.n % 4:
    why.append(f"n = {spec.n} is not a multiple of 4 (float32 partials)")
  for name, w in (("a", spec.a), ("b", spec.b)):
    bad = window_alignment(w, spec.in_dtype, spec.batch_shape)
    if bad:
      why.append(f"{name}: " + "; ".join(bad))
  if why:
    return why
  forced = spec.opts.split_k_slices
  if forced is not None:
    if not _slice_ok(spec, forced):
      raise ValueError(
          f"split_k_slices={forced}: k = {spec.k} does not split into "
          f"{forced} equal slices of a multiple of 16 bytes")
    return []
  if not split_k_candidates(spec):
    why.append(f"k = {spec.k} does not split into 2..32 equal slices of "
               f">= {SPLITK_MIN_SLICE_K} elements and a multiple of 16 bytes")
  elif split_k_tiles(spec) >= splitk_target_ctas():
    why.append(f"{split_k_tiles(spec)} tiles already fill the GPU")
  return why


def choose_split_k(spec: GemmSpec) -> int:
  """K slices for a spec without `split_k_reasons`.  The direct kernel: the
  most whose CTAs (output tiles x slices) fit one wave of 132 SMs, e.g.
  m = 16, n = k = 4096: 32 tiles of 128x128 -> 4 (128 CTAs of 1024-deep K).
  The ptr-array slices: the fewest that bring the slice tiles to
  `splitk_target_ctas` (about two waves; fewer slices = less partial
  traffic), else the most allowed (m = 16, n = k = 4096: 32 tiles of
  64x128 -> 8 slices).  Either from `split_k_candidates` (equal slices: the
  direct plan may fall back to the ptr-array kernel)."""
  forced = spec.opts.split_k_slices
  if forced is not None:
    return forced
  cands = split_k_candidates(spec)
  if split_k_direct(spec):
    tiles = _tiles(spec, DIRECT_SPLITK_TILE) * spec.batch
    fit = [s for s in cands if tiles * s <= sm_count()]
    return fit[-1] if fit else cands[0]
  tiles = split_k_tiles(spec)
  for s in cands:
    if tiles * s >= splitk_target_ctas():
      return s
  return cands[-1]


# --- The skinny kernel (ffi/kernels/sm90_skinny.h) ---------------------------

SKINNY_MAX_M = 16                       # kSm90Skinny16*: one m16 fragment
SKINNY_DTYPES = ("bfloat16", "float16")  # kernels built (NN, out = in)


def skinny_reasons(spec: GemmSpec) -> list[str]:
  """Why `spec` cannot take the skinny path (empty: it can); mirrors
  SkinnyKernel and the SM90 checks in ffi/cuda_gemm.cu."""
  why = list(sm90_reasons(spec))
  if spec.m > SKINNY_MAX_M:
    why.append(f"m = {spec.m} > {SKINNY_MAX_M}")
  return why + _one_item_nn_reasons(spec, SKINNY_DTYPES, "skinny")


def skinny_split(spec: GemmSpec, sms: Optional[int] = None) -> int:
  """CTAs (one cluster) sharing each 128-column tile's K, as the handler
  splits (SkinnySplit in ffi/plan.h): the most, a power of two up to 8,
  whose CTAs (tiles x split) fit one wave of `sms` SMs (default: the
  device's) and each get two or more 64-deep K stages; n = k = 4096 on 132
  SMs: 32 tiles x 4 (measured fastest of 2, 4, 8 on an H200)."""
  return int(_ext.skinny_split(spec.n, spec.k,
                               sm_count() if sms is None else sms))


# --- Workspace ---------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class WorkspaceLayout:
  kernel_bytes: int   # CUTLASS's own scratch at offset 0
  ptrs: int           # offset of the pointer arrays
  scratch: int        # offset of the C copies
  scratch_item: int   # bytes per batch item of C copy (0: none)
  total: int
  ptr_count: int = 0  # pointer entries (4 * batch; split-K: 4 * batch * S
                      # + 2 * batch)
  partials: int = 0   # offset of the float32 partials (split-K)
  partial_item: int = 0  # bytes per partial (0: none)


def workspace_layout(spec: GemmSpec, path: str,
                     split_k: int = 1) -> WorkspaceLayout:
  """The handler's workspace layout for `spec` planned for `path`, as the
  extension computes it (ffi/plan.h, Layout; the one formula).

  [0, kernel_bytes) CUTLASS's scratch (SM90 paths; for sm90_split_k also
  the direct split-K kernel's, `direct_split_k_workspace`); pointer arrays;
  the C copies; for sm90_split_k, batch * split_k float32 m x n partials
  (the ptr-array slices').
  """
  if path == "sm90_split_k" and split_k < 1:
    raise ValueError(f"split_k must be >= 1, got {split_k}")
  desc = encode_desc(spec, PATHS[path], split_k)
  return WorkspaceLayout(**_ext.workspace_layout(
      [int(v) for v in desc], float(spec.alpha), float(spec.beta)))


def plan(spec: GemmSpec) -> Plan:
  """The CUDA plan for `spec` (see the module docstring for the rules)."""
  if splitk_enabled(spec) and not split_k_reasons(spec):
    s = choose_split_k(spec)
    return Plan("sm90_split_k", s,
                workspace_layout(spec, "sm90_split_k", s).total)
  path = "generic"
  if (np.dtype(spec.in_dtype) == np.float32 and
      np.dtype(spec.out_dtype) == np.float32 and
      spec.precision == "default"):
    path = "tf32"
  elif not skinny_reasons(spec) and spec.opts.tile is None:
    path = "sm90_skinny"
  elif not sm90_reasons(spec):
    key = (np.dtype(spec.in_dtype).name, np.dtype(spec.out_dtype).name,
           bool(spec.trans_a), bool(spec.trans_b))
    path = "sm90_" + _choose_tile(spec, SM90_KERNELS[key])
  return Plan(path, 1, workspace_layout(spec, path).total)


def explain(spec: GemmSpec) -> str:
  """One line: the planned path and, for generic, why not SM90."""
  p = plan(spec)
  if p.path == "sm90_split_k":
    kind = ("direct kernel" if split_k_direct(spec) else
            "ptr-array slices + reduction: " + "; ".join(
                _direct_choice_for(spec, p.path)[1]))
    return (f"{p.path} (split_k {p.split_k}, {kind}; workspace "
            f"{p.workspace_bytes} bytes)")
  if p.path == "sm90_skinny":
    return (f"{p.path} (split {skinny_split(spec)} on {sm_count()} "
            f"SMs; fallback the tiny tile; workspace {p.workspace_bytes} "
            f"bytes)")
  if p.path in DIRECT_TILE_PATHS.values():
    tile, why = _direct_choice(spec)
    kind = (f"direct kernel, {tile} tile" if tile else
            "ptr-array kernel: " + "; ".join(why))
    return f"{p.path} ({kind}; workspace {p.workspace_bytes} bytes)"
  if p.path != "generic":
    return f"{p.path} (workspace {p.workspace_bytes} bytes)"
  if np.dtype(spec.in_dtype) == np.float32:
    return "generic: float32 at precision highest (exact SIMT kernel)"
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


def explain_calls(fn, *args, **kwargs) -> list[str]:
  """One line per jax_dynoff GEMM in fn(*args, **kwargs), in program order:
  the CUDA kernel path its plan picks on this process's GPU (or an
  H100 / H200 where none is visible) and why (`explain`).  Public as
  `jax_dynoff.explain`."""
  return [explain(s) for s in traced_specs(fn, *args, **kwargs)]


def first_spec(fn, *args, **kwargs) -> Optional[GemmSpec]:
  specs = traced_specs(fn, *args, **kwargs)
  return specs[0] if specs else None
