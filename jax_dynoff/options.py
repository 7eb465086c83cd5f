"""Kernel options: tuning and test overrides of how a call is planned.

`KernelOptions` is part of a call's static spec (it is hashable and lives
in the primitive's parameter), so `jax.jit`'s cache sees it and a compiled
program always launches the kernels its plan chose.  Nothing here is read
from the environment.  Every default is the planner's own choice; an
override that cannot run a call (a tile the windows do not suit, an SM90
kernel on an older GPU) falls back the way the planner's own choices do:
the result is the same, only the speed differs (`jax_dynoff.explain` says
what a call runs).

    opts = dyn.KernelOptions(tile="tiny", direct=False)
    dyn.gemm(a, b, out=w, opts=opts)
"""

from __future__ import annotations

import dataclasses
from typing import Optional

# The choices, named as the planner names them (jax_dynoff/plan.py).
SM90_TILES = ("large", "medium", "small_m", "tiny")
DIRECT_TILES = ("large", "wide", "medium", "small_m", "tiny", "split_k",
                "cluster_k")
GROUPED_TILES = ("medium", "wide", "small_groups")
SKINNY_TILES = ("wide", "narrow")


@dataclasses.dataclass(frozen=True)
class KernelOptions:
  """How `gemm` picks its CUDA kernel (the CPU handler ignores all of it).

  sm90:          False runs 16-bit inputs on the generic kernel (any
                 alignment, any GPU) instead of the SM90 TMA kernels, and
                 float32 on the CUTLASS 2.x TF32 kernel (HIGHEST: the
                 generic kernel) instead of the SM90 TF32 kernels.
  tf32:          False runs float32 at default precision on the exact SIMT
                 kernel instead of TF32 tensor cores.
  tile:          forces an SM90 tile ("large", "medium", "small_m",
                 "tiny") where the call takes an SM90 path and the tile is
                 built for its dtype (float32: "large" and "medium"; others
                 are ignored); None: the planner's wave model picks.
                 Calls with ragged windows ignore it (grouped_tile).
  grouped_tile:  forces the grouped kernel's tile for calls with ragged
                 windows that run as one grouped launch: "medium"
                 (128x128, every dtype and transpose it runs), "wide"
                 (128x256, bfloat16 NN: planned there; ignored
                 elsewhere) or "small_groups" (the small-group kernels,
                 planned where the groups hold few rows on average: the
                 weight-gradient one for A transposed, ragged_dot's
                 weight gradient; the forward one for A not transposed,
                 ragged_dot's forward and gradient wrt lhs, and forced
                 only, ragged_dot(activation="swiglu"); ignored for
                 float32 inputs).
  direct:        False keeps the ptr-array kernel (pointer kernel + GEMM)
                 where a direct one-launch kernel would run.
  direct_tile:   forces one of the planned path's direct tiles ("large" or
                 "wide" for the large path, "tiny" or "cluster_k" (64x32
                 or 64x64 tiles whose K is split across the 2 CTAs of a
                 cluster, for 16-bit NN calls) for the tiny path, else the
                 path's own tile, or "split_k") where its rules hold.
  skinny:        False runs the tiny tile where the skinny (m <= 16) kernel
                 would run.
  skinny_tile:   forces the skinny kernel's tile: "wide" (64 columns a
                 CTA, K split across a cluster: planned where K is long)
                 or "narrow" (16 columns a CTA over all of K, no cluster:
                 planned where K is short and its CTAs fit one wave);
                 None: the planner's rule.
  split_k:       True plans split-K for skinny problems (m <= 256) where it
                 can run: on an H200 it was slower than the unsplit tiles
                 in loops of stacked layers, so it is off by default.
  split_k_slices: forces the K slice count of a split-K plan.
  deterministic: False lets the direct split-K kernel's CTAs add their
                 partials as they arrive (not bit-reproducible).
  xla_cotangent_dot: a gradient product (dA = G op(B)^T, dB = op(A)^T G)
                 is XLA's own dot where the windows it reads hold no more
                 elements than its result (for XLA's dot a window is a
                 copy; this library's GEMM reads it in place, worth it for
                 dX = G W[i]^T of stacked weights).  XLA fuses into its dot
                 what a custom call cannot take: operand casts, and in a
                 loop the add into the gradient's accumulator (an add apart
                 streams the whole array three times).  False: every
                 gradient product is this library's GEMM.
  loop_graph_pads: on CUDA, how many graph pads follow a call bound at
                 the top level of a loop body (`fori_loop`, `scan`,
                 `lax.map`, `while_loop`): pass-through FFI calls that do
                 nothing (ffi/graph_pad.cc), so that at XLA's default
                 flags a body of one call and the loop's counter reaches
                 XLA's minimum command-buffer size (5 thunks) and runs as
                 one CUDA graph instead of thunk by thunk from the host.
                 None: graph_pads.LOOP_GRAPH_PADS; 0: none.  Under a
                 gradient as many are anchored to the call's first
                 dynamic start (the forward loop may keep only the
                 start).  A call anywhere else (outside loops, inside a
                 `cond` branch, whose thunks XLA does not count) gets
                 none, but takes a window's graph token where that
                 window was made at the loop body's top level (unless 0
                 here).
  """

  sm90: bool = True
  tf32: bool = True
  tile: Optional[str] = None
  grouped_tile: Optional[str] = None
  direct: bool = True
  direct_tile: Optional[str] = None
  skinny: bool = True
  skinny_tile: Optional[str] = None
  split_k: bool = False
  split_k_slices: Optional[int] = None
  deterministic: bool = True
  xla_cotangent_dot: bool = True
  loop_graph_pads: Optional[int] = None

  def __post_init__(self):
    for name in ("sm90", "tf32", "direct", "skinny", "split_k",
                 "deterministic", "xla_cotangent_dot"):
      v = getattr(self, name)
      if not isinstance(v, bool):
        raise TypeError(f"KernelOptions.{name} must be a bool, got {v!r}")
    for name, choices in (("tile", SM90_TILES),
                          ("grouped_tile", GROUPED_TILES),
                          ("skinny_tile", SKINNY_TILES),
                          ("direct_tile", DIRECT_TILES)):
      v = getattr(self, name)
      if v is not None and v not in choices:
        raise ValueError(f"KernelOptions.{name}={v!r}: want None or one of "
                         f"{choices}")
    p = self.loop_graph_pads
    if p is not None and (isinstance(p, bool) or not isinstance(p, int)
                          or p < 0):
      raise ValueError(f"KernelOptions.loop_graph_pads must be None or an "
                       f"int >= 0, got {p!r}")
    s = self.split_k_slices
    if s is not None and (isinstance(s, bool) or not isinstance(s, int)
                          or s < 1):
      raise ValueError(f"KernelOptions.split_k_slices must be None or a "
                       f"positive int, got {s!r}")


DEFAULT = KernelOptions()


def check_opts(opts) -> KernelOptions:
  """`opts` as given to gemm: None (the defaults) or a KernelOptions."""
  if opts is None:
    return DEFAULT
  if not isinstance(opts, KernelOptions):
    raise TypeError(f"opts must be None or a jax_dynoff.KernelOptions, got "
                    f"{type(opts).__name__}")
  return opts
