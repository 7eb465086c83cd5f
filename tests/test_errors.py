"""Every static mistake raises TypeError / ValueError at trace time, and the
message names the argument and shows what was given.

Each test traces (`jax.jit(f).trace(...)`, nothing runs) a call that is
valid, then the same call with one mistake.  Both `dyn.gemm` and
`dyn.reference.gemm` are checked: they share one signature.
"""

from __future__ import annotations

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

import jax_dynoff as dyn

GEMMS = pytest.mark.parametrize("gemm", [dyn.gemm, dyn.reference.gemm],
                                ids=["gemm", "reference"])

f32 = jnp.float32
bf16 = jnp.bfloat16
f16 = jnp.float16


def arr(shape, dtype=f32):
  return jax.ShapeDtypeStruct(shape, dtype)


def names_argument(msg: str, name: str) -> bool:
  """Whether `msg` names argument `name` (not just uses the article "a")."""
  n = re.escape(name)
  pats = [rf"^{n}\b", rf"[`'\"]{n}[`'\"]", rf"\b{n}(\[|\.|:|=|\(|')",
          rf"\b(argument|operand|parameter|arg)\s+{n}\b",
          rf"\b{n}\s+(must|has|is|should|of|window|needs|was|dtype|shape)\b"]
  if name != "a":
    pats.append(rf"(?<![\w.]){n}(?![\w])")
  return any(re.search(p, msg) for p in pats)


def trace(f, *args):
  return jax.jit(f).trace(*args)


def expect_error(f, *args, name, given=(), exc=(TypeError, ValueError)):
  """Tracing f(*args) raises exc naming `name` (one of them, if a tuple)
  and mentioning every string in `given`."""
  with pytest.raises(exc) as info:
    trace(f, *args)
  err = info.value
  assert type(err) in (TypeError, ValueError), type(err)
  msg = str(err)
  names = (name,) if isinstance(name, str) else name
  assert any(names_argument(msg, nm) for nm in names), (
      f"message does not name {names}: {msg!r}")
  for g in given:
    assert g in msg, f"message does not mention {g!r}: {msg!r}"
  return msg


# ----------------------------------------------------------------------------
# window(...)
# ----------------------------------------------------------------------------

def test_window_rank_below_2():
  trace(lambda x: dyn.window(x, (0, 0), (2, 2)).x, arr((4, 4)))
  expect_error(lambda x: dyn.window(x, (0,), (1, 1)), arr((7,)), name="x",
               given=("7",))


@pytest.mark.parametrize("shape,big", [((11, 3), "11"), ((2, 13), "13"),
                                       ((11, 13), "11")])
def test_window_larger_than_its_array(shape, big):
  trace(lambda x: dyn.window(x, (0, 0, 0), (10, 12)).x, arr((2, 10, 12)))
  expect_error(lambda x: dyn.window(x, (0, 0, 0), shape), arr((2, 10, 12)),
               name="shape", given=(big,))


@pytest.mark.parametrize("start", [(0, 0), (0, 0, 0, 0), ()])
def test_window_start_of_wrong_length(start):
  expect_error(lambda x: dyn.window(x, start, (2, 2)), arr((3, 4, 5)),
               name="start", given=(str(len(start)),))


def test_window_start_python_float():
  expect_error(lambda x: dyn.window(x, (0, 1.0), (2, 2)), arr((4, 5)),
               name="start", exc=TypeError)


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.bool_])
def test_window_start_traced_non_integer(dtype):
  trace(lambda x, s: dyn.window(x, (s, 0), (2, 2)).x, arr((4, 5)),
        arr((), jnp.int32))
  expect_error(lambda x, s: dyn.window(x, (s, 0), (2, 2)), arr((4, 5)),
               arr((), dtype), name="start", exc=TypeError)


@pytest.mark.parametrize("dtype", [jnp.int8, jnp.int16, jnp.uint8,
                                   jnp.uint16, jnp.uint32])
def test_window_start_of_any_integer_dtype(dtype):
  """Traced starts of any integer dtype, as lax.dynamic_slice takes them,
  with their values: a uint32 start past int32's range clamps to the end
  of the dim (it is not wrapped to a negative start, which would count
  from the end)."""
  x = jnp.arange(60, dtype=f32).reshape(6, 10)
  b = jnp.eye(2, dtype=f32)

  def f(s, t):
    return dyn.gemm(dyn.window(x, (s, t), (2, 2)), b)

  def want(s, t):
    return jax.lax.dynamic_slice(x, (s, t), (2, 2))

  for s, t in ((3, 1), (0, 8), (5, 9)):
    got = jax.jit(f)(np.asarray(s, dtype), np.asarray(t, dtype))
    np.testing.assert_array_equal(got, want(s, t))
    # Concrete numpy scalars are static starts: the same windows.
    np.testing.assert_array_equal(
        f(np.asarray(s, dtype), np.asarray(t, dtype)), want(s, t))
  if dtype == jnp.uint32:
    big = np.asarray(2**32 - 3, np.uint32)
    np.testing.assert_array_equal(jax.jit(f)(big, big),
                                  x[4:6, 8:10])


@pytest.mark.parametrize("shape", [(2,), (1,), (1, 1)])
def test_window_start_non_scalar(shape):
  expect_error(lambda x, s: dyn.window(x, (0, s), (2, 2)), arr((4, 5)),
               arr(shape, jnp.int32), name="start")


@pytest.mark.parametrize("shape", [(2,), (2, 2, 2), (2.0, 2)])
def test_window_shape_not_two_ints(shape):
  expect_error(lambda x: dyn.window(x, (0, 0), shape), arr((4, 5)),
               name="shape")


# ----------------------------------------------------------------------------
# gemm(...): ranks and shapes
# ----------------------------------------------------------------------------

@GEMMS
def test_gemm_operand_rank_below_2(gemm):
  trace(lambda a, b: gemm(a, b), arr((3, 4)), arr((4, 5)))
  expect_error(lambda a, b: gemm(a, b), arr((4,)), arr((4, 5)), name="a")
  expect_error(lambda a, b: gemm(a, b), arr((3, 4)), arr((4,)), name="b")


@GEMMS
@pytest.mark.parametrize("which", ["a", "b", "c", "out"])
def test_gemm_plain_array_of_rank_above_2(gemm, which):
  shapes = {"a": (3, 4), "b": (4, 5), "c": (3, 5), "out": (3, 5)}

  def f(a, b, c, out):
    return gemm(a, b, c, out=out)
  args = {k: arr(v) for k, v in shapes.items()}
  trace(f, *args.values())
  args[which] = arr((1,) + shapes[which])
  expect_error(f, *args.values(), name=which)


@GEMMS
@pytest.mark.parametrize("ta,tb,ashape,bshape", [
    (False, False, (3, 4), (6, 5)),
    (True, False, (4, 3), (6, 5)),
    (False, True, (3, 4), (5, 6)),
    (True, True, (4, 3), (5, 6)),
])
def test_gemm_inner_dims_mismatch(gemm, ta, tb, ashape, bshape):
  expect_error(lambda a, b: gemm(a, b, transpose_a=ta, transpose_b=tb),
               arr(ashape), arr(bshape), name=("a", "b"), given=("4", "6"))


@GEMMS
def test_gemm_inner_dims_mismatch_windows(gemm):
  def f(x, y):
    return gemm(dyn.window(x, (0, 0, 0), (3, 4)),
                dyn.window(y, (1, 1), (5, 2)))
  expect_error(f, arr((2, 8, 8)), arr((8, 8)), name=("a", "b"),
               given=("4", "5"))


@GEMMS
@pytest.mark.parametrize("cshape", [(3, 6), (4, 5), (5, 3), (1, 3, 5)])
def test_gemm_c_wrong_shape(gemm, cshape):
  trace(lambda a, b, c: gemm(a, b, c), arr((3, 4)), arr((4, 5)), arr((3, 5)))
  expect_error(lambda a, b, c: gemm(a, b, c), arr((3, 4)), arr((4, 5)),
               arr(cshape), name="c")


@GEMMS
def test_gemm_c_window_wrong_shape(gemm):
  def f(a, b, x):
    return gemm(a, b, dyn.window(x, (0, 0), (3, 4)))
  expect_error(f, arr((3, 4)), arr((4, 5)), arr((9, 9)), name="c",
               given=("4",))


@GEMMS
@pytest.mark.parametrize("oshape", [(3, 6), (4, 5), (5, 3)])
def test_gemm_out_wrong_shape(gemm, oshape):
  trace(lambda a, b, o: gemm(a, b, out=o), arr((3, 4)), arr((4, 5)),
        arr((3, 5)))
  expect_error(lambda a, b, o: gemm(a, b, out=o), arr((3, 4)), arr((4, 5)),
               arr(oshape), name="out")


@GEMMS
def test_gemm_out_window_wrong_shape(gemm):
  def f(a, b, x):
    return gemm(a, b, out=dyn.window(x, (0, 0), (3, 6)))
  expect_error(f, arr((3, 4)), arr((4, 5)), arr((9, 9)), name="out",
               given=("6",))


# ----------------------------------------------------------------------------
# gemm(...): dtypes
# ----------------------------------------------------------------------------

@GEMMS
@pytest.mark.parametrize("dtype", [jnp.int32, jnp.int8, jnp.float8_e4m3fn,
                                   jnp.complex64])
def test_gemm_unsupported_input_dtype(gemm, dtype):
  expect_error(lambda a, b: gemm(a, b), arr((3, 4), dtype),
               arr((4, 5), dtype), name=("a", "b"),
               given=(jnp.dtype(dtype).name,))


@GEMMS
def test_gemm_float64_inputs(gemm):
  with jax.enable_x64(True):
    expect_error(lambda a, b: gemm(a, b), arr((3, 4), jnp.float64),
                 arr((4, 5), jnp.float64), name=("a", "b"),
                 given=("float64",))


@GEMMS
@pytest.mark.parametrize("da,db", [(bf16, f32), (f32, bf16), (f16, bf16),
                                   (f32, f16)])
def test_gemm_mixed_input_dtypes(gemm, da, db):
  expect_error(lambda a, b: gemm(a, b), arr((3, 4), da), arr((4, 5), db),
               name=("a", "b"),
               given=(jnp.dtype(da).name, jnp.dtype(db).name))


@GEMMS
@pytest.mark.parametrize("din,dout", [(bf16, f16), (f16, bf16), (f32, bf16),
                                      (f32, f16), (bf16, jnp.int32)])
def test_gemm_out_wrong_dtype(gemm, din, dout):
  ok = trace(lambda a, b, o: gemm(a, b, out=o), arr((3, 4), din),
             arr((4, 5), din), arr((3, 5), f32))
  assert ok is not None
  expect_error(lambda a, b, o: gemm(a, b, out=o), arr((3, 4), din),
               arr((4, 5), din), arr((3, 5), dout), name="out",
               given=(jnp.dtype(dout).name,))


@GEMMS
@pytest.mark.parametrize("din,dpref", [(bf16, f16), (f32, bf16),
                                       (f16, jnp.int32)])
def test_gemm_preferred_element_type_wrong(gemm, din, dpref):
  expect_error(lambda a, b: gemm(a, b, preferred_element_type=dpref),
               arr((3, 4), din), arr((4, 5), din),
               name="preferred_element_type",
               given=(jnp.dtype(dpref).name,))


@GEMMS
@pytest.mark.parametrize("din,dout,dc", [
    (f32, f32, bf16), (bf16, bf16, f32), (bf16, f32, bf16),
    (f16, f16, bf16), (f32, f32, jnp.int32)])
def test_gemm_c_wrong_dtype(gemm, din, dout, dc):
  def f(a, b, c):
    return gemm(a, b, c, preferred_element_type=dout)
  trace(f, arr((3, 4), din), arr((4, 5), din), arr((3, 5), dout))
  expect_error(f, arr((3, 4), din), arr((4, 5), din), arr((3, 5), dc),
               name="c", given=(jnp.dtype(dc).name,))


@GEMMS
def test_gemm_c_wrong_dtype_with_out(gemm):
  def f(a, b, c, o):
    return gemm(a, b, c, out=o)
  trace(f, arr((3, 4), bf16), arr((4, 5), bf16), arr((3, 5), f32),
        arr((3, 5), f32))
  expect_error(f, arr((3, 4), bf16), arr((4, 5), bf16), arr((3, 5), bf16),
               arr((3, 5), f32), name="c", given=("bfloat16",))


# ----------------------------------------------------------------------------
# gemm(...): static scalars
# ----------------------------------------------------------------------------

@GEMMS
@pytest.mark.parametrize("which", ["alpha", "beta"])
def test_gemm_traced_alpha_beta(gemm, which):
  def f(a, b, c, s):
    return gemm(a, b, c, **{which: s})
  expect_error(f, arr((3, 4)), arr((4, 5)), arr((3, 5)), arr((), f32),
               name=which)


@GEMMS
def test_gemm_window_of_wrong_type(gemm):
  expect_error(lambda b: gemm("not an array", b), arr((4, 5)), name="a")


@GEMMS
def test_errors_raise_before_anything_runs(gemm):
  """Eager calls raise the same error (no device work is started)."""
  with pytest.raises((TypeError, ValueError)) as info:
    gemm(jnp.ones((3, 4)), jnp.ones((5, 6)))
  assert names_argument(str(info.value), "a") or names_argument(
      str(info.value), "b")


def test_window_built_directly_is_checked_like_window():
  """`jax_dynoff.Window(...)` runs the checks `window` runs: a float or
  short start, or a window past its array, is a clear error at once, not
  a crash or a failure inside the handler."""
  x = np.ones((4, 6), np.float32)
  with pytest.raises(TypeError, match=r"start\[0\] must be an integer"):
    dyn.Window(x, (1.5, 0), (2, 2))
  with pytest.raises(ValueError, match="start must have 2 entries"):
    dyn.Window(x, (1,), (2, 2))
  with pytest.raises(ValueError, match="larger than the trailing dims"):
    dyn.Window(x, (0, 0), (5, 2))
  w = dyn.Window(x, (np.int32(1), 2), (2, 2))
  assert w.start == (1, 2) and w.shape == (2, 2)


# --- precision: what jnp.dot takes -------------------------------------------

@pytest.mark.parametrize("dtype, precision, mode", [
    (jnp.bfloat16, lax.DotAlgorithmPreset.DEFAULT, "default"),
    (jnp.bfloat16, lax.DotAlgorithmPreset.BF16_BF16_F32, "default"),
    (jnp.float16, lax.DotAlgorithmPreset.F16_F16_F32, "default"),
    (jnp.float32, lax.DotAlgorithmPreset.TF32_TF32_F32, "default"),
    (jnp.float32, lax.DotAlgorithmPreset.TF32_TF32_F32_X3, "highest"),
    (jnp.float32, lax.DotAlgorithmPreset.F32_F32_F32, "highest"),
    (jnp.bfloat16, lax.DotAlgorithm(jnp.bfloat16, jnp.bfloat16, jnp.float32),
     "default"),
    (jnp.float32, lax.DotAlgorithm(jnp.float32, jnp.float32, jnp.float32),
     "highest"),
    (jnp.float32, (lax.Precision.HIGHEST, lax.Precision.HIGHEST), "highest"),
    (jnp.float32, "highest", "highest"),
    (jnp.float32, (lax.Precision.HIGHEST, lax.Precision.DEFAULT), "default"),
])
def test_precision_takes_what_jnp_dot_takes(dtype, precision, mode):
  """A lax.Precision, its name, a pair, a lax.DotAlgorithmPreset or a
  lax.DotAlgorithm the kernels run, for gemm and ragged_dot alike."""
  from jax_dynoff import plan as plan_lib  # pylint: disable=g-import-not-at-top
  a, b = arr((8, 4), dtype), arr((4, 6), dtype)
  spec = plan_lib.first_spec(
      lambda a, b: dyn.gemm(a, b, precision=precision,
                            preferred_element_type=jnp.float32), a, b)
  assert spec.precision == mode
  spec = plan_lib.first_spec(
      lambda a, b: dyn.ragged_dot(a, b[None], jnp.asarray([8], jnp.uint32),
                                  precision=precision), a, b)
  assert spec.precision == mode


@pytest.mark.parametrize("dtype, precision", [
    (jnp.bfloat16, lax.DotAlgorithmPreset.BF16_BF16_BF16),
    (jnp.bfloat16, lax.DotAlgorithmPreset.BF16_BF16_F32_X3),
    (jnp.float16, lax.DotAlgorithmPreset.F16_F16_F16),
    (jnp.float32, lax.DotAlgorithmPreset.BF16_BF16_F32),
    (jnp.float32, lax.DotAlgorithmPreset.F16_F16_F32),
    (jnp.bfloat16, lax.DotAlgorithmPreset.F32_F32_F32),
    (jnp.float32, lax.DotAlgorithmPreset.ANY_F8_ANY_F8_F32),
    (jnp.float32, lax.DotAlgorithm(jnp.bfloat16, jnp.bfloat16, jnp.float32)),
])
def test_precision_refuses_an_algorithm_it_cannot_honour(dtype, precision):
  """An algorithm the kernels would run at another accuracy is a clear
  error naming it, never a silent change."""
  name = getattr(precision, "name", None) or "DotAlgorithm"
  msg = expect_error(
      lambda a, b: dyn.gemm(a, b, precision=precision),
      arr((8, 4), dtype), arr((4, 6), dtype), name="precision",
      given=(name,), exc=ValueError)
  assert "cannot be honoured" in msg
  with pytest.raises(ValueError, match="cannot be honoured"):
    trace(lambda a, b: dyn.ragged_dot(a, b[None], jnp.asarray([8]),
                                      precision=precision),
          arr((8, 4), dtype), arr((4, 6), dtype))
