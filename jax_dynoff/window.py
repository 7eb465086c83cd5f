"""Windows: a 2-D block of an array at starts that may be traced.

A `Window` is what `gemm` accepts for each operand.  Construction checks
everything static (ranks, extents, the types of the starts and of the
valid extents) and raises a `TypeError` / `ValueError` that names the
argument; the dynamic starts stay traced values and are clamped on the
device exactly like `lax.dynamic_slice` (see `clamp_start`).

A ragged window (`valid=(vr, vc)`, entries that may be traced) has a static
capacity `shape` and a valid part `[0:vr, 0:vc]` of it: reads see zeros
outside the valid part, writes touch only the valid part, and its two
trailing starts are clamped with the valid extents instead of the capacity
(`clamp_start(s, dim, v)`), so a window near the end of its array keeps its
start although its capacity would cross the end.
"""

from __future__ import annotations

import dataclasses
import operator
from typing import Any, Optional, Sequence, Union

import jax
import jax.numpy as jnp
import numpy as np

from jax_dynoff import graph_pads

Start = Union[int, jax.Array]


def clamp_start(start: int, dim: int, size: int) -> int:
  """lax.dynamic_slice's rule for one start (allow_negative_indices=True).

  A start s < 0 first becomes s + dim; then it is clamped to
  [0, dim - size] so that the window lies inside the array.
  """
  if start < 0:
    start += dim
  return min(max(start, 0), dim - size)


@jax.tree_util.register_pytree_node_class
@dataclasses.dataclass(frozen=True, eq=False)
class Window:
  """`x[start[0], ..., start[r-3], start[r-2]:+rows, start[r-1]:+cols]`.

  x:     the whole array (rank r >= 2).
  start: r entries, each a Python int or an integer scalar (traced or not).
  shape: (rows, cols), the extent in the two trailing dims (the capacity of
         a ragged window).
  valid: None, or (vr, vc): the valid extents of a ragged window, each a
         Python int or an integer scalar, clamped to [0, rows] / [0, cols].
  """

  x: jax.Array
  start: tuple[Start, ...]
  shape: tuple[int, int]
  valid: Optional[tuple[Start, Start]] = None
  # The graph token `window()` made at a loop body's top level
  # (graph_pads.window_token; a call below that level takes it).  Not a
  # constructor argument: only `window()` sets it.
  graph_token: Optional[jax.Array] = dataclasses.field(default=None,
                                                       init=False, repr=False)

  def __post_init__(self):
    # Built directly or through `window`: the same checks either way.
    x, start, shape, valid = _checked(self.x, self.start, self.shape,
                                      self.valid)
    object.__setattr__(self, "x", x)
    object.__setattr__(self, "start", start)
    object.__setattr__(self, "shape", shape)
    object.__setattr__(self, "valid", valid)

  @property
  def ragged(self) -> bool:
    """Whether the window has valid extents (`valid` given)."""
    return self.valid is not None

  @property
  def dtype(self):
    return self.x.dtype

  @property
  def win(self) -> tuple[int, ...]:
    """The window's extent in every dim of x (1 in the leading dims)."""
    return (1,) * (self.x.ndim - 2) + tuple(self.shape)

  def static_valid(self) -> tuple[Optional[int], Optional[int]]:
    """Per trailing dim: the valid extent, clamped, if it is a Python int
    (the capacity when `valid` is None), else None."""
    if self.valid is None:
      return tuple(self.shape)
    return tuple(min(max(v, 0), c) if isinstance(v, int) else None
                 for v, c in zip(self.valid, self.shape))

  def static_starts(self) -> tuple[Optional[int], ...]:
    """Per dim: the clamped start if it is a Python int (and, in a trailing
    dim of a ragged window, so is that dim's valid extent, or the start is
    0 there, which every valid extent keeps at 0), else None."""
    clamp_by = self.win[:-2] + self.static_valid()

    def static(s, d, w):
      if not isinstance(s, int):
        return None
      if w is None:  # a traced valid extent: only a start at 0 is known
        return 0 if (s + d if s < 0 else s) <= 0 else None
      return clamp_start(s, d, w)
    return tuple(static(s, d, w)
                 for s, d, w in zip(self.start, self.x.shape, clamp_by))

  def dynamic_valid(self) -> list[jax.Array]:
    """The traced valid extents (rows first)."""
    return [v for v in (self.valid or ()) if not isinstance(v, int)]

  def dynamic_starts(self) -> list[jax.Array]:
    """The starts `static_starts` leaves to the device (dim order): the
    start operands of the primitive.  Traced ones as they are; a Python int
    whose dim has a traced valid extent as a constant, first brought into
    [0, dim] (lax's rule then clamps it exactly as it would the int)."""
    out = []
    for s, d, st in zip(self.start, self.x.shape, self.static_starts()):
      if st is not None:
        continue
      if isinstance(s, int):
        s = min(max(s + d if s < 0 else s, 0), d)
        s = np.int32(s) if s < 2 ** 31 else np.int64(s)
        s = jnp.asarray(s)
      out.append(s)
    return out

  def __repr__(self):  # not the default: that would print all of x
    def show(vals):
      return ", ".join(str(v) if isinstance(v, int) else
                       f"<{getattr(v, 'dtype', type(v).__name__)} scalar>"
                       for v in vals)
    valid = "" if self.valid is None else f", valid=({show(self.valid)})"
    return (f"Window(x: {self.x.dtype}{list(self.x.shape)}, "
            f"start=({show(self.start)}), shape={tuple(self.shape)}{valid})")

  def tree_flatten(self):
    # graph_token is no child: a window carried through a loop must keep
    # one structure, padded or not.  Flattened (a jit's argument, a carry),
    # a window loses its pads, never its value.
    return (self.x, self.start, self.valid), self.shape

  @classmethod
  def tree_unflatten(cls, shape, children):
    # No checks: JAX rebuilds pytrees with placeholder leaves too.
    x, start, valid = children
    w = object.__new__(cls)
    object.__setattr__(w, "x", x)
    object.__setattr__(w, "start", tuple(start))
    object.__setattr__(w, "shape", shape)
    object.__setattr__(w, "valid", None if valid is None else tuple(valid))
    object.__setattr__(w, "graph_token", None)
    return w


def _is_array(x: Any) -> bool:
  return isinstance(x, (jax.Array, np.ndarray)) or hasattr(x, "aval")


def _check_start(arg: str, i: int, s: Any) -> Start:
  """One start entry: a Python int, or an integer scalar array."""
  if isinstance(s, (bool, np.bool_)):
    raise TypeError(f"{arg}[{i}] must be an integer, got a bool ({s!r})")
  if isinstance(s, (int, np.integer)):
    return int(s)
  if isinstance(s, (float, complex, np.floating)):
    raise TypeError(
        f"{arg}[{i}] must be an integer or an integer scalar array, "
        f"got {type(s).__name__} {s!r}")
  if not _is_array(s):
    raise TypeError(
        f"{arg}[{i}] must be an integer or an integer scalar array, got "
        f"{type(s).__name__}")
  shape, dtype = np.shape(s), np.dtype(s.dtype)
  if shape != ():
    raise ValueError(
        f"{arg}[{i}] must be a scalar (shape ()), got shape {shape}")
  if dtype == np.bool_ or not np.issubdtype(dtype, np.integer):
    raise TypeError(f"{arg}[{i}] must be an integer scalar, got {dtype}")
  if isinstance(s, np.ndarray):  # concrete numpy scalar: static
    return int(s)
  if dtype not in (np.dtype(np.int32), np.dtype(np.int64)):
    # Any integer dtype, as lax.dynamic_slice takes it, with its value: an
    # unsigned start past the widest signed type is cut there first (it
    # clamps to the end of any dim either way), never wrapped negative.
    wide = jnp.int64 if jax.config.jax_enable_x64 else jnp.int32
    if np.issubdtype(dtype, np.unsignedinteger) and (
        np.iinfo(dtype).max > np.iinfo(wide).max):
      s = jnp.minimum(s, np.asarray(np.iinfo(wide).max, dtype))
    s = s.astype(wide)
  return s


def window(x: jax.Array, start: Sequence[Start], shape: Sequence[int],
           valid: Optional[Sequence[Start]] = None) -> Window:
  """A window of `x` for `gemm`: `shape = (rows, cols)` in the trailing dims.

  `start` has one entry per dim of `x`; each is a Python int or an integer
  scalar of any dtype, as `lax.dynamic_slice` takes it (typically traced:
  a loop index, a value read from a device table).  Starts follow
  `lax.dynamic_slice`: negative ones count from the end, then every start
  is clamped so the window lies inside `x`.

  `valid = (vr, vc)` makes the window ragged: `shape` is then its
  capacity and `[0:vr, 0:vc]` its valid part (each entry a Python int or
  an integer scalar of any dtype, clamped to [0, rows] / [0, cols]).
  Reads count the elements outside the valid part as zeros; `out` is
  written only in its valid part; the two trailing starts are clamped
  with vr / vc in place of rows / cols.  `valid=None` is the plain window.

  A plain window made at a loop body's top level also carries a graph
  token, graph pads from its first traced start, for a call in a `cond`
  branch of that body (jax_dynoff/graph_pads.py says why).
  """
  w = Window(x, start, shape, valid)
  if w.valid is None:
    object.__setattr__(w, "graph_token", graph_pads.window_token(w.start))
  return w


def _checked(x: Any, start: Any, shape: Any, valid: Any = None):
  """(x, start, shape, valid) of a window, checked and normalised (starts
  and valid extents: Python ints or integer scalar arrays); a TypeError /
  ValueError names what is wrong."""
  if not _is_array(x):
    x = jnp.asarray(x)
  if x.ndim < 2:
    raise ValueError(f"window: x must have rank >= 2, got shape {x.shape}")
  try:
    start = tuple(start)
  except TypeError:
    raise TypeError(
        f"window: start must be a sequence of {x.ndim} integers, got "
        f"{type(start).__name__}") from None
  if len(start) != x.ndim:
    raise ValueError(
        f"window: start must have {x.ndim} entries (one per dim of x, shape "
        f"{x.shape}), got {len(start)}")
  start = tuple(_check_start("start", i, s) for i, s in enumerate(start))
  try:
    shape = tuple(operator.index(v) for v in shape)
  except TypeError:
    raise TypeError(
        f"window: shape must be two Python ints (rows, cols), got {shape!r}"
    ) from None
  if len(shape) != 2 or min(shape) < 0:
    raise ValueError(
        f"window: shape must be (rows, cols) with rows, cols >= 0, got "
        f"{shape}")
  if shape[0] > x.shape[-2] or shape[1] > x.shape[-1]:
    raise ValueError(
        f"window: shape {shape} is larger than the trailing dims of x "
        f"{x.shape[-2:]} (x has shape {x.shape})")
  if valid is not None:
    if isinstance(valid, (str, bytes)) or _is_array(valid):
      raise TypeError(
          f"window: valid must be None or a pair (rows, cols) of integers "
          f"or integer scalars, got {type(valid).__name__}")
    try:
      valid = tuple(valid)
    except TypeError:
      raise TypeError(
          f"window: valid must be None or a pair (rows, cols) of integers "
          f"or integer scalars, got {type(valid).__name__}") from None
    if len(valid) != 2:
      raise ValueError(
          f"window: valid must have 2 entries (rows, cols), got "
          f"{len(valid)}")
    valid = tuple(_check_start("valid", i, v) for i, v in enumerate(valid))
  return x, start, shape, valid


def as_window(arg: str, v: Any) -> Window:
  """`v` as a Window: a Window as is, a rank-2 array as the whole array."""
  if isinstance(v, Window):
    return v
  if not _is_array(v):
    if isinstance(v, (list, tuple, int, float)):
      v = jnp.asarray(v)
    else:
      raise TypeError(
          f"{arg} must be an array or a jax_dynoff.Window, got "
          f"{type(v).__name__}")
  if v.ndim != 2:
    raise ValueError(
        f"{arg} must be a rank-2 array or a jax_dynoff.Window (use "
        f"jax_dynoff.window to pick a 2-D block of a rank-{v.ndim} array), "
        f"got shape {v.shape}")
  return Window(v, (0, 0), tuple(v.shape))
