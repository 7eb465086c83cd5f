"""Which CUDA kernel runs a call, decided at trace time from static facts.

The choice (and the workspace it needs) is baked into the lowered program, so
a compiled loop always launches the same kernels: that is what keeps the
CUDA handler command-buffer (CUDA graph) safe.  The CPU handler ignores it.

Paths (enum Path in ffi/gemm_problem.h):

* ``generic``: CUTLASS 2.x SIMT GEMM in array mode, alignment 1, any
  transpose, every dtype pair, full float32 accuracy; any GPU >= sm_80.
  float32 at ``precision=HIGHEST`` (or under
  ``jax.default_matmul_precision("highest")``) comes here where the SM90
  3xTF32 kernels cannot run (below).
* ``tf32``: float32 in and out at default precision, as jnp.dot on GPU,
  where the SM90 TF32 kernels cannot run (`sm90_reasons`: a window TMA
  cannot read): CUTLASS 2.x tensor-op GEMM (TF32 inputs, float32
  accumulation) in array mode, alignment 1, one kernel per transpose
  combination; any GPU >= sm_80.  ``KernelOptions(tf32=False)`` (applied by
  the handler) runs the exact generic kernel instead.
* float32 on ``sm90_large`` / ``sm90_medium`` (the two tiles built for it):
  CUTLASS 3.x ptr-array TF32 wgmma kernels that read A and B K-major only
  (ffi/kernels/sm90_tf32.h says why); an MN-major operand (A transposed, B
  not transposed) is first copied K-major into the workspace by a staging
  kernel, which reads its window at any alignment.  At ``HIGHEST`` both
  operands are staged split into TF32 parts (hi, lo) along a K three times
  as long, so one TF32 GEMM sums hi*hi + lo*hi + hi*lo (3xTF32), on a
  128x128 cooperative kernel whose wgmma accumulators are promoted to
  CUDA-core float32 every k-tile (about float32's accuracy; without the
  promotion the error grew with K).  The operands read in place, D and C need the
  alignment proof; otherwise ``tf32`` (default precision) or ``generic``
  (HIGHEST).  The handler falls back the same way (and with
  ``KernelOptions(sm90=False)``).  NN at default precision runs the
  direct TF32 kernel of its tile where the direct rules hold (below, with
  a K tile of 32 and B aligned as well): one launch, nothing staged (it
  computes D^T = B^T A^T, B read through registers; ffi/kernels/
  sm90_direct_tf32.h), and no workspace for a staged B unless
  ``KernelOptions(direct=False)`` asks for the ptr-array kernel.
  `explain` names the kernel ("TF32 wgmma" / "3xTF32 wgmma", ptr-array
  or direct) and the staged operands.
* ``sm90_large`` / ``sm90_medium`` / ``sm90_small_m`` / ``sm90_tiny``:
  CUTLASS 3.x ptr-array TMA warp-specialized kernels (256x128x64
  cooperative, cluster 1x2 / 128x128x64, 64x128x64 and 64x64x64 ping-pong),
  built for sm_90a only, for the (dtype, transpose) combinations in
  `SM90_KERNELS`.  Chosen only when `alignment_proof` shows that every window
  address is 16-byte aligned whatever the dynamic offsets are.  The tile is
  the one `sm90_tile_times` predicts fastest (waves of tiles over the SMs,
  each tile at its measured rate); ``KernelOptions(tile=...)`` forces one
  (for tests and tuning sweeps).
* ``sm90_split_k`` (opt-in: planned only with ``KernelOptions(split_k=True)``;
  its GPU tests pass on an H200, but neither of its kernels made a loop of
  skinny layers faster than the unsplit 64x64 tile at default XLA flags, see
  docs/design.md): skinny problems (m <= 256, no transposes,
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
  of their work: one launch of the skinny kernel, of one of two tiles
  (`skinny_tile`; ``KernelOptions(skinny_tile=...)`` forces one): "wide"
  (ffi/kernels/sm90_skinny.h: mma.sync, 64-column CTAs, each column
  tile's K shared by the CTAs of one cluster, reduced in distributed
  shared memory in a fixed order) where K is long, else "narrow"
  (ffi/kernels/sm90_skinny_narrow.h: 16-column CTAs over all of K, their
  warps' partials added in shared memory, no cluster: where K is short
  the wide tile's reduction is most of its call); no workspace, no
  memset.  Needs what every SM90 path needs (every window aligned) and
  one item, A not transposed, B not transposed (bfloat16, float16) or
  transposed (bfloat16: x @ W^T, the gradient wrt x of a skinny layer),
  in and out of one dtype, no C read from out's own array
  (`skinny_reasons`).
  The handler runs the tiny tile instead (as if planned for it, direct twin
  included; the workspace is the tiny tile's) where the kernel cannot run,
  or with ``KernelOptions(skinny=False)`` (tests and the bench compare the
  two).  A forced SM90 tile (``KernelOptions(tile=...)``) or split-K
  (``KernelOptions(split_k=True)``) is planned instead.

* ``sm90_grouped``: calls with ragged windows (valid extents, `window(...,
  valid=...)`), one item or a vmap over groups such as
  `jax_dynoff.ragged_dot`: one grouped launch (ffi/kernels/sm90_grouped.h,
  after CUTLASS example 57; its tiles GROUPED_TILES: 128x256 cooperative,
  no cluster, for 16-bit NN, 128x128 ping-pong for the others;
  `grouped_tile` says which runs and ``KernelOptions(grouped_tile=...)``
  forces one; A transposed over few rows per item, the weight gradient of
  a decode-sized `ragged_dot`, runs the small-group weight-gradient kernel
  instead, grouped tile ``small_groups``: ffi/kernels/small_group_grad.h,
  SMALL_GROUP_MAX_MEAN_ROWS; A not transposed over few rows per item, its
  forward and input gradient, the small-group forward kernel under the
  same tile: ffi/kernels/small_group_fwd.h, SMALL_GROUP_FWD_MAX_MEAN_ROWS;
  with the swiglu epilogue only where that tile is forced) after one pointer
  kernel that writes every item's operand addresses, strides and problem
  shape (its valid extents) into the workspace, and the zeros of D's valid
  part that no product covers.  The kernel's scheduler reads the shapes on
  the device, so no tile past an item's valid rows is ever scheduled.
  Needs a grouped kernel for the dtypes and transposes (bfloat16 NN, NT,
  TN; float16 NN; in and out of one dtype), no C read, the alignment proof
  (a ragged window's trailing dynamic starts count even where its capacity
  spans the dim), extents along a contiguous dim that are static multiples
  of 16 bytes (the kernel moves whole 16-byte vectors there: ragged rows
  and a ragged K of transposed operands are fine, ragged columns are not)
  and compute capability 9.0 (`grouped_reasons`).  Where
  they do not hold, the lowering composes the call instead: each ragged
  operand read into a dense window by XLA ops (its valid part, zeros
  elsewhere), one plain `gemm`, and the valid part written back (exact,
  no tile skipped; `explain` says "composed" and why).

Direct kernels (`direct_kernel`; `direct_reasons` says why none): a call
planned for an SM90 tile runs CUTLASS's plain (non-array) TMA kernel of
that tile instead of the ptr-array one, its TMA descriptors over the whole
buffers and its tile coordinates shifted on the device to the windows (ffi/kernels/sm90_direct.h): one launch, no pointer
kernel, no pointer arrays.  ``sm90_large`` has two: ``wide`` (128x256) where
its tiles fit one wave of SMs, else ``large`` (256x128); ``sm90_medium``,
``sm90_small_m`` and ``sm90_tiny`` one each (DIRECT_TILE_PATHS).  It needs
one item, inputs and output of the same dtype (16-bit: no transposes, or
bfloat16 NT / TN on the ping-pong tiles; float32: NN at default
precision, the large and medium tiles), no C read from D's own buffer
(that may overlap D partly), no dynamic column start, windows whose K
extent is a multiple of the K tile (128 bytes: 64 16-bit elements, 32
float32 ones) or spans its buffer's dim, and an output window whose rows /
columns are multiples of the tile's or span its buffer's dims.
``KernelOptions(direct=False)`` (applied by the handler; for float32 the
workspace then holds the staged B) keeps the ptr-array kernel;
``KernelOptions(direct_tile=...)`` forces one of the planned path's direct
tiles.  ``sm90_tiny`` has a second one, ``cluster_k`` (ffi/kernels/
sm90_cluster_k.h, NN only), planned where the tiny tile's output tiles
would leave half the SMs or more idle (on an H200 faster than the tiny
tile at 64-256 x 1024-2048 x 1024-2048, launched from the host and in CUDA
graphs alike; docs/design.md): 64x32 or 64x64 output tiles (the width
whose CTAs fill the most SMs, `cluster_k_tile_n`), each one's K split
across the 2 CTAs of a thread-block cluster, which add their float32
partials in distributed shared memory in a fixed order (one launch, no
workspace).

One planner (ffi/planner.cc): every rule above lives there, in C++.  Each
function here asks it through the extension (`answer`: one call per spec
and device, cached) with this process's GPU (the first CUDA device's SM
count and compute capability; an H100 / H200's, 132 SMs and 9.0, where
none is visible), and the lowering writes its answer into the call's
`plan` attribute (path, split_k, and the kernel within the path: the
direct tile, the skinny split, the cluster-K width, the grouped tile),
which the CUDA handler checks and follows instead of deciding again.

Fallback rule (the choice function, ffi/launch_choice.h, which the CUDA
handler runs at its instantiate stage; `launch_choice` asks it): a planned
SM90 path is a request.  The CUDA handler runs the generic kernel instead when the device
it runs on is not compute capability 9.0, when the extension was built
without sm_90a, when a buffer base is not 16-byte aligned, or with
``KernelOptions(sm90=False)``; a split-K plan then runs the generic kernel
unsplit.  The result is the same; only the speed differs.
``JAX_DYNOFF_LOG=1`` (the one debug switch, read once by the
handler) makes it print the kernel of every call.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
from typing import Optional

from jax_dynoff.extension import ext as _ext
from jax_dynoff.spec import GemmSpec, call_attrs

_TABLES = _ext.planner_tables()
# The kernel paths (enum class Path, ffi/gemm_problem.h), as the extension
# names them: {name: code}.
PATHS = dict(_TABLES["paths"])
# SM90 ptr-array tiles: tile -> (tile m, tile n, TFLOP/s of one full wave
# of that tile on an H200), bigger first (ffi/planner.h kSm90TileShapes).
SM90_TILE_SHAPES = {k: tuple(v) for k, v in _TABLES["sm90_tiles"].items()}
SM90_TILES = tuple(SM90_TILE_SHAPES)
# SM90 kernels built (ffi/kernels/sm90_*.cu), keyed by
# (input dtype, output dtype, transpose_a, transpose_b) -> tiles available.
SM90_KERNELS = {tuple(k): tuple(t) for k, t in _TABLES["sm90_kernels"]}
# Direct tiles: tile -> (tile m, tile n), and the planned path each stands
# in for ("wide" is a second tile of the large path).
DIRECT_TILES = {k: tuple(v) for k, v in _TABLES["direct_tiles"].items()}
DIRECT_TILE_PATHS = dict(_TABLES["direct_tile_paths"])
# The grouped kernel's tiles (ragged windows): tile -> (tile m, tile n);
# m is the granule each item's rows are padded to.
GROUPED_TILES = {k: tuple(v) for k, v in _TABLES["grouped_tiles"].items()}
# The skinny path's tiles ("wide": 64 columns a CTA, K split across a
# cluster; "narrow": 16 columns a CTA over all of K), and where the narrow
# one is planned (ffi/plan.h SkinnyTileChoice): where its n / 16 CTAs fit
# one wave at SKINNY_NARROW_CTAS_PER_SM an SM and, NN, K <=
# SKINNY_NARROW_MAX_K, or K <= SKINNY_NARROW_LONG_MAX_K where n <=
# SKINNY_NARROW_LONG_MAX_N; NT, K <= SKINNY_NARROW_NT_MAX_K.
SKINNY_TILES = tuple(_TABLES["skinny_tiles"])
SKINNY_NARROW_MAX_K = _TABLES["skinny_narrow_max_k"]
SKINNY_NARROW_LONG_MAX_K = _TABLES["skinny_narrow_long_max_k"]
SKINNY_NARROW_LONG_MAX_N = _TABLES["skinny_narrow_long_max_n"]
SKINNY_NARROW_NT_MAX_K = _TABLES["skinny_narrow_nt_max_k"]
SKINNY_NARROW_CTAS_PER_SM = _TABLES["skinny_narrow_ctas_per_sm"]
# The small-group weight-gradient kernel (grouped tile "small_groups") is
# planned for a grouped call with A transposed whose mean rows per item
# (K's capacity / items) are at most this (ffi/plan.h SmallGroupRows).
SMALL_GROUP_MAX_MEAN_ROWS = _TABLES["small_group_max_mean_rows"]
# The small-group forward kernel (the same grouped tile) is planned for a
# grouped call with A not transposed (ragged_dot's forward, NN, and its
# gradient wrt lhs, NT) whose mean rows per item (m's capacity / items)
# are at most this (ffi/plan.h SmallGroupFwdRows), except with the swiglu
# epilogue, whose fused CUTLASS kernel stays planned (the small-group
# kernel's swiglu line runs where grouped_tile="small_groups" forces it).
SMALL_GROUP_FWD_MAX_MEAN_ROWS = _TABLES["small_group_fwd_max_mean_rows"]

# The kernel catalogue (ffi/kernels/catalogue.py, as the extension holds
# it): one line per kernel the CUDA build compiles, whichever build this
# is.  `family` names the search the choice function makes in it, `tiles`
# the family's tiles it serves (none for a family without tiles),
# `layouts` the transposes it serves ("NT": B transposed).
CatalogueLine = collections.namedtuple(
    "CatalogueLine", "name family tiles in_dtype out_dtype layouts")
CATALOGUE = tuple(CatalogueLine(n, f, tuple(t), i, o, tuple(l))
                  for n, f, t, i, o, l in _TABLES["catalogue"])

# The handler's workspace layout lives in ffi/plan.h; these are its
# numbers, as the extension reports them.
WORKSPACE_ALIGN = _ext.WORKSPACE_ALIGN
SM90_KERNEL_WORKSPACE = _ext.SM90_KERNEL_WORKSPACE  # kSm90KernelWorkspace

# The GPU assumed where no CUDA device is visible (lowering for CUDA on a
# machine without one): an H100 / H200's SMs and compute capability.
ASSUMED_SM_COUNT = 132
ASSUMED_COMPUTE_CAPABILITY = (9, 0)


@functools.lru_cache(maxsize=None)
def device() -> tuple[int, int, int]:
  """(SMs, compute capability major, minor) of the GPU calls are planned
  for: the first CUDA device's, else ASSUMED_SM_COUNT and
  ASSUMED_COMPUTE_CAPABILITY."""
  sms, cc = ASSUMED_SM_COUNT, ASSUMED_COMPUTE_CAPABILITY
  try:
    import jax  # pylint: disable=g-import-not-at-top
    devices = jax.devices("cuda")
  except RuntimeError:  # no CUDA backend in this process
    devices = []
  if devices:
    sms = int(getattr(devices[0], "core_count", 0) or sms)
    got = str(getattr(devices[0], "compute_capability", "") or "")
    parts = got.split(".")
    if len(parts) == 2 and all(x.isdigit() for x in parts):
      cc = (int(parts[0]), int(parts[1]))
  return sms, cc[0], cc[1]


def sm_count() -> int:
  """SMs of the GPU calls are planned for (`device`)."""
  return device()[0]


@functools.lru_cache(maxsize=4096)
def _answer(spec: GemmSpec, dev: tuple[int, int, int]) -> dict:
  # The call's attributes, options included, without a plan: the answer.
  return _ext.plan(call_attrs(spec), *dev)


def answer(spec: GemmSpec) -> dict:
  """The C++ planner's whole answer for `spec` on `device()` (a dict: the
  plan, the reasons for every option, the inputs of its choices)."""
  return _answer(spec, device())


@dataclasses.dataclass(frozen=True)
class PlannedKernel:
  """The kernel within the path (gemm_problem.h PlannedKernel): the direct
  tile standing in for the path's ptr-array kernel ("" none; the skinny
  path: its fallback's), the skinny split (CTAs per column tile, skinny
  path only), the cluster-K tile's width (where it is the direct tile),
  the grouped tile (sm90_grouped only), whether D is a fresh buffer
  (sm90_grouped only, `fresh_out_reasons`: the lowering passes no `out`
  and the handler zeroes D's rows outside every window) and the skinny
  tile (the skinny path's; "wide" elsewhere)."""
  direct_tile: str = ""
  skinny_split: int = 0
  cluster_k_tile_n: int = 0
  grouped_tile: str = "medium"
  fresh_out: bool = False
  skinny_tile: str = "wide"


@dataclasses.dataclass(frozen=True)
class Plan:
  path: str              # a key of PATHS
  split_k: int           # K slices (1: no split)
  workspace_bytes: int   # the CUDA handler's scratch (ret 1), fixed now
  kernel: PlannedKernel = dataclasses.field(default=PlannedKernel(),
                                            compare=False)

  def attrs(self) -> dict:
    """The call's `plan` attribute."""
    return dict(path=self.path, split_k=int(self.split_k),
                **dataclasses.asdict(self.kernel))


def _planned(spec: GemmSpec) -> dict:
  """`answer`, raising where no plan exists (forced split_k_slices that do
  not split K)."""
  a = answer(spec)
  if a["error"]:
    raise ValueError(a["error"])
  return a


def plan(spec: GemmSpec) -> Plan:
  """The CUDA plan for `spec` (see the module docstring for the rules)."""
  a = _planned(spec)
  return Plan(a["path"], a["split_k"], a["workspace"]["total"],
              PlannedKernel(**a["kernel"]))


def attrs(spec: GemmSpec, p: Optional[Plan] = None, sources=None) -> dict:
  """The attributes the CUDA lowering gives the call `spec`: the call (its
  starts from `sources`, spec.StartSources; default: one offsets vector),
  with the planner's answer `p` (default: `plan(spec)`) as its plan."""
  p = plan(spec) if p is None else p
  return call_attrs(spec, sources, p.attrs())


def alignment_proof(spec: GemmSpec) -> dict[str, list[str]]:
  """Per operand, the reasons TMA alignment is not proven ({} when it is),
  assuming 16-byte aligned buffer bases (the handler checks the actual
  ones)."""
  return {k: list(v) for k, v in answer(spec)["alignment"].items()}


def sm90_reasons(spec: GemmSpec) -> list[str]:
  """Why `spec` cannot take an SM90 path (empty: it can)."""
  return list(answer(spec)["sm90_reasons"])


def sm90_tile_times(spec: GemmSpec) -> dict[str, float]:
  """Predicted microseconds per tile configuration: whole waves of tiles
  (a partial wave costs a full one) times one tile's time at its measured
  full-wave rate.  It reproduced the tile sweep (docs/design.md) and picks
  its winner at every swept shape (2048^3: large; 512x4096x4096: medium;
  128x4096x4096: tiny)."""
  return dict(answer(spec)["tile_times"])


def grouped_reasons(spec: GemmSpec) -> list[str]:
  """Why a call with ragged windows is composed from XLA window ops and a
  plain call rather than run as one grouped launch (empty: grouped; a call
  without ragged windows: ["no ragged window"])."""
  return list(answer(spec)["grouped_reasons"])


def fresh_out_reasons(spec: GemmSpec) -> list[str]:
  """Why the CUDA call keeps its `out` operand (aliased to its result)
  rather than getting D as a fresh buffer, which the grouped pointer
  kernel zeroes outside the windows (empty: fresh, `Plan.kernel.fresh_out`).
  It needs `spec.out_zeros` (jax_dynoff.ragged_dot's out of zeros), one
  grouped launch, and windows that are full-width row ranges of one 2-D
  out the items share."""
  return list(answer(spec)["fresh_out_reasons"])


def grouped_tile(spec: GemmSpec) -> Optional[str]:
  """The grouped kernel's tile (GROUPED_TILES) that runs `spec`, or None
  where the call does not run as one grouped launch."""
  return answer(spec)["grouped_tile"]


def direct_reasons(spec: GemmSpec) -> list[str]:
  """Why a call runs a ptr-array kernel (or none of the SM90 ones) rather
  than a direct one (empty: a direct one, unless the call's options say
  direct=False)."""
  return list(_planned(spec)["direct_reasons"])


def direct_kernel(spec: GemmSpec) -> Optional[str]:
  """The direct tile (DIRECT_TILES) that runs `spec`, or None for the
  ptr-array kernel (then `direct_reasons` says why).  Each planned SM90
  tile has its direct twin; the large path has two: the wide tile (128x256)
  where its tiles fit one wave of SMs (each of its tiles is faster), else
  the large one (256x128, as fast or faster over several waves); either
  one where only its store rule holds.  ``KernelOptions(direct_tile=...)``
  forces a tile where it stands in for the planned path and its rules
  hold."""
  return _planned(spec)["direct_tile"]


# --- Split-K -----------------------------------------------------------------

def direct_split_k_workspace(spec: GemmSpec) -> int:
  """The direct split-K kernel's scheduler workspace (DirectSplitKWorkspace
  in ffi/plan.h): a float32 accumulator tile per output tile, then
  two 32-bit barriers per output tile, each part rounded to 128 bytes."""
  return int(_ext.direct_split_k_workspace(spec.m, spec.n))


def split_k_direct(spec: GemmSpec) -> bool:
  """Whether a split-K plan of `spec` runs the direct split-K kernel (else
  the ptr-array slices and the reduction kernel)."""
  return not answer(spec)["split_k_direct_reasons"]


def split_k_candidates(spec: GemmSpec) -> list[int]:
  """The slice counts `choose_split_k` may pick, ascending: equal slices of
  a multiple of 16 bytes and of at least 128 elements, whose float32
  partials at most double the bytes of B."""
  return list(answer(spec)["split_k_candidates"])


def split_k_tiles(spec: GemmSpec) -> int:
  """Output tiles (CTAs' work units) of the unsplit problem, split-K tile."""
  return int(answer(spec)["split_k_tiles"])


def split_k_reasons(spec: GemmSpec) -> list[str]:
  """Why `spec` cannot take the split-K path (empty: it can), whether or not
  its options ask for it.  Raises ValueError for forced split_k_slices that
  do not split K into equal 16-byte slices."""
  a = answer(spec)
  if a["split_k_slices_error"]:
    raise ValueError(a["split_k_slices_error"])
  return list(a["split_k_reasons"])


def choose_split_k(spec: GemmSpec) -> int:
  """K slices for a spec without `split_k_reasons`.  The direct kernel: the
  most whose CTAs (output tiles x slices) fit one wave of SMs, e.g.
  m = 16, n = k = 4096: 32 tiles of 128x128 -> 4 (128 CTAs of 1024-deep K).
  The ptr-array slices: the fewest that bring the slice tiles to about two
  waves (fewer slices = less partial traffic), else the most allowed
  (m = 16, n = k = 4096: 32 tiles of 64x128 -> 8 slices).  Either from
  `split_k_candidates`."""
  forced = spec.opts.split_k_slices
  return forced if forced is not None else int(answer(spec)["split_k_choice"])


# --- The skinny kernel (ffi/kernels/sm90_skinny.h) ---------------------------

def skinny_reasons(spec: GemmSpec) -> list[str]:
  """Why `spec` cannot take the skinny path (empty: it can)."""
  return list(answer(spec)["skinny_reasons"])


def skinny_split(spec: GemmSpec, sms: Optional[int] = None) -> int:
  """CTAs (one cluster) sharing each 64-column tile's K, as the handler
  splits (SkinnySplit in ffi/plan.h): the most, a power of two up to 8,
  whose CTAs (tiles x split) fit one wave of two CTAs on each of `sms`
  SMs (default: the device's) and each get two or more 64-deep K stages;
  n = k = 4096 on 132 SMs: 64 tiles x 4 (faster than 2 or 8, hot and
  cold, on an H100)."""
  if sms is None:
    return int(answer(spec)["skinny_split"])
  return int(_ext.skinny_split(spec.n, spec.k, sms))


def skinny_tile(spec: GemmSpec) -> str:
  """The skinny kernel's tile ("wide" or "narrow", SKINNY_TILES) the
  planner picks for `spec` (SkinnyTileChoice in ffi/plan.h: narrow where
  its n / 16 CTAs fit one wave of the device's SMs and, B not transposed,
  K <= SKINNY_NARROW_MAX_K, or K <= SKINNY_NARROW_LONG_MAX_K and n <=
  SKINNY_NARROW_LONG_MAX_N; B transposed, K <= SKINNY_NARROW_NT_MAX_K),
  or the one ``KernelOptions(skinny_tile=...)``
  forces, where built for the call's dtypes and transposes ("wide"
  otherwise).  The skinny path runs it; other paths ignore it."""
  return str(answer(spec)["skinny_tile"])


# --- The cluster-K direct tile (ffi/kernels/sm90_cluster_k.h) --------------

def cluster_k_tile_n(spec: GemmSpec, sms: Optional[int] = None) -> int:
  """The output tile width (32 or 64) of the ``cluster_k`` direct tile for
  `spec` (ClusterKTileN in ffi/plan.h): of the two, the one whose CTAs
  (tiles x 2, K split in two) fill the most of `sms` SMs (default: the
  device's) at one CTA per SM, ties to 64; 0 where neither fits one wave
  or K is under 8 tiles of 64 (the tiny tile runs there unless the
  options force ``cluster_k``, which then takes 64).  128x1024x1024 on 132
  SMs: 64x32 (64 tiles, 128 CTAs)."""
  if sms is None:
    return int(answer(spec)["cluster_k_tile_n"])
  return int(_ext.cluster_k_tile_n(spec.m, spec.n, spec.k, sms))


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
  # float32 on an SM90 tile: the staged operands' pointer arrays, then the
  # staged A and B (bytes per item; 0: not staged).
  stage_ptrs: int = 0
  stage_a: int = 0
  stage_a_item: int = 0
  stage_b: int = 0
  stage_b_item: int = 0
  # sm90_grouped: the items' problem shapes (int32 m, n, k), then their A,
  # B, C, D strides (int64).
  shapes: int = 0
  strides: int = 0


def workspace_layout(spec: GemmSpec, path: str, split_k: int = 1,
                     kernel: PlannedKernel = PlannedKernel()
                     ) -> WorkspaceLayout:
  """The handler's workspace layout for `spec` planned for `path` (and the
  planned kernel within it, `Plan.kernel`), as the extension computes it
  (ffi/plan.h, Layout; the one formula).

  [0, kernel_bytes) CUTLASS's scratch (SM90 paths; for sm90_split_k also
  the direct split-K kernel's, `direct_split_k_workspace`); pointer arrays;
  the C copies; for sm90_split_k, batch * split_k float32 m x n partials
  (the ptr-array slices'); for float32 on an SM90 tile, the staged
  operands (K-major copies, TF32 parts at HIGHEST; none where the direct
  TF32 kernel is planned, `kernel`, and the options allow it).
  """
  if path == "sm90_split_k" and split_k < 1:
    raise ValueError(f"split_k must be >= 1, got {split_k}")
  p = Plan(path, split_k, 0, kernel)
  return WorkspaceLayout(**_ext.workspace_layout(
      call_attrs(spec, plan=p.attrs())))


def launch_choice(spec: GemmSpec, *, sm90_device: bool = True,
                  sm90_built: bool = True, bases_aligned: bool = True,
                  ab_ws_aligned: bool = True) -> dict:
  """The kernel the CUDA handler launches for `spec` as planned, on a
  device of compute capability 9.0 or not, in a build with or without its
  sm_90a kernels, with every buffer base 16-byte aligned, or only A's, B's
  and the workspace's (ffi/launch_choice.h, the one choice function, which
  the handler runs at its instantiate stage): {"kind": "ptr_array",
  "direct", "skinny" or "grouped", "kernel": its catalogue name, "split":
  CTAs or slices along K, ...; "error": why the call cannot run, or ""}."""
  return dict(_ext.launch_choice(
      attrs(spec), bool(sm90_device), bool(sm90_built), bool(bases_aligned),
      bool(ab_ws_aligned)))


def sm90_kernels_built() -> bool:
  """Whether this build's CUDA handler has its sm_90a kernels (the flag
  the choice function reads, ffi/cuda/registry.cu Sm90Built); a build
  without CUDA answers for the CUDA build its plans describe: True."""
  built = _ext.cuda_sm90_built()
  return True if built is None else bool(built)


def explain(spec: GemmSpec) -> str:
  """One line: the planned path and why (for generic, why not SM90), then
  the catalogue kernel the CUDA handler launches for it on `device()`,
  from this build (`sm90_kernels_built`), every buffer base 16-byte
  aligned (`launch_choice`, the one choice function).  KernelOptions that
  act at run time (sm90=False, tf32=False, direct=False, skinny=False)
  leave the plan as it is and show in that kernel.  A call with ragged
  windows that is composed (XLA window ops around one plain gemm, planned
  when it is lowered) names no kernel.  A call at a loop body's top level
  ends with its graph pads, a call below it that takes a window's graph
  token with that (graph_pads.py)."""
  a = _planned(spec)
  line = str(a["explain"])
  pads = (f"; then {spec.graph_pads} graph pads (a loop body's top level)"
          if spec.graph_pads else "")
  if spec.graph_tokens:
    pads += ("; takes a window's graph token (its pads sit at the loop "
             "body's top level)")
  if spec.ragged and a["path"] != "sm90_grouped":  # composed (lowering.py)
    return line + pads
  choice = launch_choice(spec, sm90_device=device()[1:] == (9, 0),
                         sm90_built=sm90_kernels_built())
  if choice["error"]:
    return f"{line}; cannot run: {choice['error']}"
  return f"{line}; launches {choice['kernel']}{pads}"


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
