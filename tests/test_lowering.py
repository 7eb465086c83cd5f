"""What the lowered and compiled programs look like (on this CPU machine):
one custom call "jax_dynoff_gemm" per gemm, its dynamic starts in one
integer offsets operand (the last; a lone plain start passed as it is),
`out` aliased to the result, no copies of windows or of a loop-carried
`out`; and the same for a CUDA lowering made without a GPU."""

from __future__ import annotations

import re

import jax
import numpy as np
import pytest
from jax import lax

import jax_dynoff as dyn
from jax_dynoff import plan as plan_lib
from strategies import BF16, F32

TARGET = "jax_dynoff_gemm"
PLATFORMS = ["cpu", "cuda"]


# ----------------------------------------------------------------------------
# StableHLO parsing
# ----------------------------------------------------------------------------

def _split_top(s: str) -> list:
  """Split a comma-separated MLIR type list at depth 0."""
  out, depth, cur = [], 0, ""
  for ch in s:
    if ch in "<([{":
      depth += 1
    elif ch in ">)]}":
      depth -= 1
    if ch == "," and depth == 0:
      out.append(cur.strip())
      cur = ""
    else:
      cur += ch
  if cur.strip():
    out.append(cur.strip())
  return out


def custom_calls(text: str) -> list:
  """[(line, operand types, result types)] of every jax_dynoff_gemm call."""
  calls = []
  for line in text.splitlines():
    if f"stablehlo.custom_call @{TARGET}(" not in line:
      continue
    sig = line.rsplit(" : (", 1)[1]
    ins, outs = sig.split(") -> ", 1)
    outs = outs.strip()
    if outs.startswith("("):
      outs = outs[1:outs.rindex(")")]
    calls.append((line, _split_top(ins), _split_top(outs)))
  return calls


def aliases(line: str) -> list:
  """[(output tuple indices, operand index)] of a custom call's aliases."""
  return [(m.group(1), int(m.group(2))) for m in re.finditer(
      r"output_operand_alias<output_tuple_indices = \[([0-9, ]*)\], "
      r"operand_index = (\d+)", line)]


def lower(f, *args, platform="cpu"):
  return jax.jit(f).trace(*args).lower(
      lowering_platforms=(platform,)).as_text()


def _full_call(gemm=None):
  gemm = gemm or dyn.gemm

  def f(a, b, c, o, s0, s1, s2):
    return gemm(dyn.window(a, (s0, 1, s1), (6, 8)),
                b,
                dyn.window(c, (2, s2), (6, 5)),
                out=dyn.window(o, (s1, s0, 0), (6, 5)), beta=0.5)
  args = (np.zeros((3, 10, 12), np.float32), np.zeros((8, 5), np.float32),
          np.zeros((9, 9), np.float32), np.zeros((2, 8, 7), np.float32),
          np.int32(1), np.int32(2), np.int32(3))
  return f, args


# ----------------------------------------------------------------------------
# StableHLO: cpu and cuda
# ----------------------------------------------------------------------------

@pytest.mark.parametrize("platform", PLATFORMS)
def test_lowering_custom_call_with_offset_operands_and_alias(platform):
  f, args = _full_call()
  text = lower(f, *args, platform=platform)
  calls = custom_calls(text)
  assert len(calls) == 1, text
  line, ins, outs = calls[0]
  # 5 traced start entries (a: 2, c: 1, out: 2), all function arguments:
  # each of s0, s1, s2 once, as it is, after the four arrays.
  assert ins[4:] == ["tensor<i32>"] * 3, ins
  assert "tensor<3x10x12xf32>" in ins and "tensor<8x5xf32>" in ins
  assert "tensor<9x9xf32>" in ins and "tensor<2x8x7xf32>" in ins
  al = aliases(line)
  assert len(al) == 1, line
  idx_out, operand = al[0]
  assert ins[operand] == "tensor<2x8x7xf32>", (operand, ins)
  assert outs[int(idx_out or 0)] == "tensor<2x8x7xf32>", outs
  # The offsets are never attributes: they carry no traced value, and
  # nothing about the windows is sliced out before the call.
  for op in ("stablehlo.dynamic_slice", "stablehlo.dynamic_update_slice",
             "stablehlo.slice", "stablehlo.gather", "stablehlo.dot_general",
             "stablehlo.copy"):
    assert op not in text, op


@pytest.mark.parametrize("platform", PLATFORMS)
def test_lowering_without_out_has_no_alias(platform):
  def f(a, b, s):
    return dyn.gemm(dyn.window(a, (s, 0), (4, 6)), b)
  text = lower(f, np.zeros((9, 6), np.float32), np.zeros((6, 3), np.float32),
               np.int32(2), platform=platform)
  (line, ins, outs), = custom_calls(text)
  assert aliases(line) == [], line
  assert ins.count("tensor<i32>") == 1, ins
  assert outs[0] == "tensor<4x3xf32>", outs


@pytest.mark.parametrize("platform", PLATFORMS)
def test_lowering_python_int_starts_are_not_operands(platform):
  def f(a, b):
    return dyn.gemm(dyn.window(a, (3, -1), (4, 5)), b)
  text = lower(f, np.zeros((9, 6), np.float32), np.zeros((5, 3), np.float32),
               platform=platform)
  (line, ins, outs), = custom_calls(text)
  assert ins == ["tensor<9x6xf32>", "tensor<5x3xf32>"], ins


@pytest.mark.parametrize("platform", PLATFORMS)
def test_lowering_int64_offsets(platform):
  """Traced int64 starts reach the call as 0-d integer operands (i64, or
  anything wider than i32: they must not be truncated)."""
  with jax.enable_x64(True):
    def f(a, b, s):
      return dyn.gemm(dyn.window(a, (s, 0), (4, 6)), b)
    text = lower(f, np.zeros((9, 6), np.float32),
                 np.zeros((6, 3), np.float32), np.int64(2), platform=platform)
  (line, ins, outs), = custom_calls(text)
  assert ins[2:] == ["tensor<i64>"], ins


@pytest.mark.parametrize("platform", PLATFORMS)
def test_lowering_mixed_int32_int64_starts_pack_as_int64(platform):
  """Computed starts, an int64 one next to an int32 one: the offsets vector
  is int64 (an int32 value widens exactly; an int64 one must not be
  truncated)."""
  with jax.enable_x64(True):
    def f(a, b, s, t):
      return dyn.gemm(dyn.window(a, (s * s, 0), (4, 6)), b,
                      out=dyn.window(np.zeros((9, 3), np.float32), (t * t, 0),
                                     (4, 3)))
    text = lower(f, np.zeros((9, 6), np.float32),
                 np.zeros((6, 3), np.float32), np.int64(2), np.int32(1),
                 platform=platform)
  (line, ins, outs), = custom_calls(text)
  assert ins[-1] == "tensor<2xi64>", ins


@pytest.mark.parametrize("platform", PLATFORMS)
def test_lowering_c_window_of_out_passes_out_once(platform):
  """In-place accumulate: c is read from out's buffer (no separate copy of
  out passed as c)."""
  def f(a, b, o, s):
    w = dyn.window(o, (s, 0), (4, 3))
    return dyn.gemm(a, b, w, out=w)
  text = lower(f, np.zeros((4, 6), np.float32), np.zeros((6, 3), np.float32),
               np.zeros((10, 3), np.float32), np.int32(2), platform=platform)
  (line, ins, outs), = custom_calls(text)
  assert ins.count("tensor<10x3xf32>") == 1, ins
  (_, operand), = aliases(line)
  assert ins[operand] == "tensor<10x3xf32>"


def test_lowering_for_cpu_and_cuda_together():
  f, args = _full_call()
  text = jax.jit(f).trace(*args).lower(
      lowering_platforms=("cpu", "cuda")).as_text()
  assert len(custom_calls(text)) == 2, text


@pytest.mark.parametrize("platform", PLATFORMS)
def test_lowering_vmap_batched_offsets_is_one_call(platform):
  def f(a, b, s):
    return dyn.gemm(dyn.window(a, (s, 0), (4, 6)), b)
  text = lower(jax.vmap(f, in_axes=(None, None, 0)),
               np.zeros((9, 6), np.float32), np.zeros((6, 3), np.float32),
               np.arange(5, dtype=np.int32), platform=platform)
  calls = custom_calls(text)
  assert len(calls) == 1, text
  _, ins, outs = calls[0]
  assert "tensor<9x6xf32>" in ins, ins                # the unbatched array
  assert ins[-1] == "tensor<5xi32>", ins              # one start per item
  assert any(t.startswith("tensor<5x4x3x") for t in outs), outs


@pytest.mark.parametrize("platform", PLATFORMS)
def test_lowering_vmap_packs_every_slot_per_item(platform):
  """A batched start next to an unbatched one: every slot holds one value
  per item (slot j of item t at j * batch + t)."""
  def f(a, b, s, t):
    return dyn.gemm(dyn.window(a, (s, 0), (4, 6)), b,
                    out=dyn.window(np.zeros((9, 3), np.float32), (t, 0),
                                   (4, 3)))
  text = lower(jax.vmap(f, in_axes=(None, None, 0, None)),
               np.zeros((9, 6), np.float32), np.zeros((6, 3), np.float32),
               np.arange(5, dtype=np.int32), np.int32(1), platform=platform)
  (_, ins, _), = custom_calls(text)
  assert ins[-1] == "tensor<10xi32>", ins


# ----------------------------------------------------------------------------
# Compiled CPU HLO: aliasing, copies, loops
# ----------------------------------------------------------------------------

def hlo_computations(text: str) -> dict:
  """{name: body text} of every computation in compiled HLO text."""
  comps, name, body = {}, None, []
  for line in text.splitlines():
    m = re.match(r"^(ENTRY\s+)?%?([\w.\-]+)\s.*\{\s*$", line)
    if m and not line.startswith(" "):
      name, body = m.group(2), []
      if m.group(1):
        comps["ENTRY"] = name
      continue
    if line.startswith("}") and name is not None:
      comps[name] = "\n".join(body)
      name = None
      continue
    if name is not None:
      body.append(line)
  return comps


def custom_call_lines(text: str) -> list:
  return [l for l in text.splitlines()
          if f'custom_call_target="{TARGET}"' in l]


def copies(body: str) -> list:
  """Copies of arrays (a copy of a scalar loop counter does not count)."""
  return [l for l in body.splitlines()
          if re.search(r"= \w+\[\d[\d,]*\]\S* copy(-start)?\(", l)]


def compiled(f, *args, donate=()):
  return jax.jit(f, donate_argnums=donate).lower(*args).compile().as_text()


def test_compiled_custom_call_aliases_out():
  f, args = _full_call()
  text = compiled(f, *args)
  (line,) = custom_call_lines(text)
  assert "api_version=API_VERSION_TYPED_FFI" in line, line
  # {} on CPU (one result); {0} on CUDA (result 0 of D and the workspace).
  m = re.search(r"output_to_operand_aliasing=\{\{0?\}: \((\d+), \{\}\)\}",
                line)
  assert m, line
  operands = re.search(r"custom-call\(([^)]*)\)", line).group(1).split(", ")
  aliased = operands[int(m.group(1))]
  # the aliased operand is `o` (parameter 3) or a copy of it
  comps = hlo_computations(text)
  entry = comps[comps["ENTRY"]]
  defn = [l for l in entry.splitlines()
          if re.match(rf"\s*(ROOT\s+)?{re.escape(aliased)} = ", l)]
  assert defn and "f32[2,8,7]" in defn[0], (aliased, entry)


def test_compiled_donated_out_is_written_in_place():
  def f(a, b, o, s):
    return dyn.gemm(dyn.window(a, (s, 0), (4, 6)), b,
                    out=dyn.window(o, (s, 1), (4, 3)))
  text = compiled(f, np.zeros((9, 6), np.float32),
                  np.zeros((6, 3), np.float32), np.zeros((10, 5), np.float32),
                  np.int32(1), donate=(2,))
  assert "input_output_alias" in text, text
  comps = hlo_computations(text)
  assert copies(comps[comps["ENTRY"]]) == [], comps[comps["ENTRY"]]


def _while_bodies(text: str) -> list:
  comps = hlo_computations(text)
  names = re.findall(r"\swhile\(.*body=%?([\w.\-]+)", text)
  assert names, text
  return [comps[n] for n in names]


def _reachable(text: str, body: str) -> str:
  """The body plus every computation it calls (fusions, calls, branches)."""
  comps = hlo_computations(text)
  seen, todo, out = set(), [body], []
  while todo:
    b = todo.pop()
    out.append(b)
    for n in re.findall(r"(?:calls|to_apply|branch_computations|"
                        r"true_computation|false_computation|body|"
                        r"condition)=\{?%?([\w.\-]+(?:, %[\w.\-]+)*)", b):
      for nm in re.split(r",\s*%?", n):
        if nm in comps and nm not in seen:
          seen.add(nm)
          todo.append(comps[nm])
  return "\n".join(out)


@pytest.mark.parametrize("accumulate", [False, True])
@pytest.mark.parametrize("dtype", [F32, BF16], ids=str)
def test_fori_loop_carry_is_not_copied(accumulate, dtype):
  """GEMMs into row slices of the loop-carried out buffer: the custom call
  in the while body aliases the carry and the body copies nothing."""
  t, mb, k, n = 4, 8, 16, 8

  def f(a, b, out):
    def body(i, out):
      w = dyn.window(out, (i * mb, 0), (mb, n))
      return dyn.gemm(dyn.window(a, (i * mb, 0), (mb, k)), b,
                      w if accumulate else None, out=w)
    return lax.fori_loop(0, t, body, out)

  args = (np.zeros((t * mb, k), dtype), np.zeros((k, n), dtype),
          np.zeros((t * mb, n), dtype))
  for donate in ((), (2,)):
    text = compiled(f, *args, donate=donate)
    bodies = _while_bodies(text)
    assert len(bodies) == 1
    body = _reachable(text, bodies[0])
    (line,) = custom_call_lines(body)
    assert "output_to_operand_aliasing" in line, line
    assert copies(body) == [], body


def test_fori_loop_with_device_table_and_stacked_weights_no_copy():
  def f(x, w, table, out):
    def body(i, out):
      return dyn.gemm(dyn.window(x, (4 * i, 0), (4, 8)),
                      dyn.window(w, (table[i], 0, 0), (8, 8)),
                      out=dyn.window(out, (4 * table[i], 0), (4, 8)))
    return lax.fori_loop(0, 3, body, out)
  text = compiled(f, np.zeros((12, 8), np.float32),
                  np.zeros((3, 8, 8), np.float32),
                  np.zeros((3,), np.int32), np.zeros((12, 8), np.float32),
                  donate=(3,))
  body = _reachable(text, _while_bodies(text)[0])
  (line,) = custom_call_lines(body)
  assert "output_to_operand_aliasing" in line
  assert copies(body) == [], body
  # nothing windowed is materialised in the loop (reading table[i] is fine)
  assert not re.search(r"= (f32|bf16|f16)\[[\d,]*\]\S* (dynamic-slice|"
                       r"dynamic-update-slice|gather|slice)\(", body), body


def _offsets_definition(text: str) -> tuple[str, str]:
  """(name, defining line or "") of the offsets operand (the last) of the
  one jax_dynoff_gemm call in `text`, and the text of its function."""
  func = next(chunk for chunk in text.split("func.func")
              if f"@{TARGET}(" in chunk)
  (line, ins, _), = custom_calls(func)
  names = re.search(rf"@{TARGET}\(([^)]*)\)", line).group(1).split(", ")
  define = re.search(rf"^\s*{re.escape(names[-1])}(:\d+)? = (.*)$", func,
                     re.M)
  return names[-1], (define.group(2) if define else ""), func


@pytest.mark.parametrize("platform", PLATFORMS)
def test_computed_starts_reach_the_call_through_a_clamp(platform):
  """A start computed from a look-up (`table[i] // 2`) must not reach the
  custom call straight from the look-up: XLA would turn that into an
  asynchronous dynamic-slice copy that keeps the loop out of one CUDA graph
  (tests/test_gpu_graphs.py).  The lowering packs computed starts into the
  offsets vector through a clamp (starts.start_operands), which XLA fuses
  with the look-up."""
  def f(x, buf, rows):
    def body(i, buf):
      return dyn.gemm(x, np.ones((8, 4), np.float32),
                      out=dyn.window(buf, (rows[i] // 2, 0), (4, 4)))
    return lax.fori_loop(0, 3, body, buf)
  text = lower(f, np.ones((4, 8), np.float32), np.ones((12, 4), np.float32),
               np.arange(3, dtype=np.int32), platform=platform)
  name, op, func = _offsets_definition(text)
  assert op and "dynamic_slice" not in op, (name, func)
  assert re.search(r"stablehlo\.(clamp|minimum)|call @clip", func), func


@pytest.mark.parametrize("platform", PLATFORMS)
@pytest.mark.parametrize("index", ["rows[i]", "dynamic_index_in_dim"])
def test_table_lookup_start_passes_the_table_and_the_index(platform, index):
  """`rows[i]` at the loop counter reaches the call as `rows` and `i`
  themselves (both block arguments): the kernels look the table up on the
  device, so the loop body needs no XLA op for its starts."""
  def f(x, w, buf, rows):
    def body(i, buf):
      r = (rows[i] if index == "rows[i]" else
           lax.dynamic_index_in_dim(rows, i, keepdims=False))
      return dyn.gemm(x, dyn.window(w, (i, 0, 0), (8, 4)),
                      out=dyn.window(buf, (r, 0), (4, 4)))
    return lax.fori_loop(0, 3, body, buf)
  text = lower(f, np.ones((4, 8), np.float32), np.ones((3, 8, 4), np.float32),
               np.ones((12, 4), np.float32), np.arange(3, dtype=np.int32),
               platform=platform)
  func = next(chunk for chunk in text.split("func.func")
              if f"@{TARGET}(" in chunk)
  (line, ins, _), = custom_calls(func)
  assert ins[3:] == ["tensor<i32>", "tensor<3xi32>"], ins  # i, then rows
  names = re.search(rf"@{TARGET}\(([^)]*)\)", line).group(1).split(", ")
  for name in names[3:]:
    # Block arguments: of the body's function, or (newer jax, the body
    # inlined into the while) of the while's region.
    assert re.match(r"%(arg|iterArg)", name), (name, func)


def test_table_lookup_loop_body_is_the_call_and_the_counter():
  """Compiled (CPU): the loop body of `gemm` at `(i, 0, 0)` and `rows[i]`
  holds the custom call and the counter's add (and, on CPU, a copy of the
  counter), and no look-up, slice or offsets fusion."""
  def f(x, w, buf, rows):
    def body(i, buf):
      return dyn.gemm(x, dyn.window(w, (i, 0, 0), (8, 4)),
                      out=dyn.window(buf, (rows[i], 0), (4, 4)))
    return lax.fori_loop(0, 3, body, buf)
  text = compiled(f, np.ones((4, 8), np.float32),
                  np.ones((3, 8, 4), np.float32), np.ones((12, 4), np.float32),
                  np.arange(3, dtype=np.int32), donate=(2,))
  body = _reachable(text, _while_bodies(text)[0])
  assert len(custom_call_lines(body)) == 1, body
  assert not re.search(r"(dynamic-slice|concatenate|gather)\(", body), body
  fusions = re.findall(r"= (\S+) fusion\(", body)
  assert fusions == ["s32[]"], body  # the counter's add


# Starts affine in a plain value or a look-up, with constant coefficients:
# the kernels map them on the device (SlotSource's mul, add and bits).
AFFINE_STARTS = {
    "rows[i]*4": lambda rows, i: rows[i] * 4,
    "4*rows[i]+1": lambda rows, i: 4 * rows[i] + 1,
    "i*4-3": lambda rows, i: i * 4 - 3,
    "7-rows[i]": lambda rows, i: 7 - rows[i],
    "-(i*2)": lambda rows, i: -(i * 2),
    "(rows[i]+1)*2": lambda rows, i: (rows[i] + 1) * 2,
}


# Starts whose plain value, or whose look-up's index, is divided by a
# constant (SlotSource's div_op and divisor), then possibly mapped.
DIVIDED_STARTS = {
    "i%3": lambda rows, i: i % 3,
    "i//2": lambda rows, i: i // 2,
    "(i%3)*4+1": lambda rows, i: (i % 3) * 4 + 1,
    "lax.rem(i,3)": lambda rows, i: lax.rem(i, np.int32(3)),
    "lax.div(i,2)": lambda rows, i: lax.div(i, np.int32(2)),
    "rows[i//2]": lambda rows, i: rows[i // 2],
    "rows[i%3]*4": lambda rows, i: rows[i % 3] * 4,
    "index_in_dim(rows,i//2)": lambda rows, i: lax.dynamic_index_in_dim(
        rows, i // 2, keepdims=False),
}


DIRECT_STARTS = {**AFFINE_STARTS, **DIVIDED_STARTS}


@pytest.mark.parametrize("platform", PLATFORMS)
@pytest.mark.parametrize("form", DIRECT_STARTS)
def test_mapped_and_divided_starts_reach_the_call_as_they_are(platform, form):
  """`table[i] * m + c`, `i * m + c`, `i % L`, `i // c`, `table[i // c]`
  and maps of them reach the call as the table and the index (or the
  index alone), with no XLA op for the start: the kernels divide, look
  up and map on the device."""
  def f(x, buf, rows, i):
    return dyn.gemm(x, np.ones((8, 4), np.float32),
                    out=dyn.window(buf, (DIRECT_STARTS[form](rows, i), 0),
                                   (4, 4)))
  text = lower(f, np.ones((4, 8), np.float32), np.ones((12, 4), np.float32),
               np.arange(3, dtype=np.int32), np.int32(1), platform=platform)
  (_, ins, _), = custom_calls(text)
  want = (["tensor<12x4xf32>", "tensor<i32>"] if "rows" not in form else
          ["tensor<12x4xf32>", "tensor<i32>", "tensor<3xi32>"])
  assert ins[2:] == want, (form, ins)


@pytest.mark.parametrize("platform", PLATFORMS)
def test_non_affine_starts_take_the_offsets_vector(platform):
  """A product of two traced values, a division, a map computed in int32
  and then widened before more arithmetic in int64 (two widths: no one
  map), or an int64 map whose coefficient leaves the int32 range (the
  handler holds int32 maps) is computed by XLA (one fusion)."""
  forms = [lambda rows, i: rows[i] * i, lambda rows, i: rows[i] // 2,
           lambda rows, i: (rows[i] * 4).astype(np.int64) + 1,
           lambda rows, i: rows[i].astype(np.int64) * 2 ** 40]
  for form in forms:
    with jax.enable_x64(True):
      def f(x, buf, rows, i):
        return dyn.gemm(x, np.ones((8, 4), np.float32),
                        out=dyn.window(buf, (form(rows, i), 0), (4, 4)))
      text = lower(f, np.ones((4, 8), np.float32),
                   np.ones((12, 4), np.float32),
                   np.arange(3, dtype=np.int32), np.int32(1),
                   platform=platform)
    (_, ins, _), = custom_calls(text)
    assert len(ins) == 4 and re.match(r"tensor<1xi(32|64)>", ins[3]), ins


def test_affine_lookup_loop_body_is_the_call_and_the_counter():
  """Compiled (CPU): a body writing at `rows[i] * m` and reading at
  `i * m` holds the custom call and the counter's add, and no offsets
  fusion."""
  def f(b, a, buf, rows):
    def body(i, buf):
      return dyn.gemm(dyn.window(a, (i * 4, 0), (4, 8)), b,
                      out=dyn.window(buf, (rows[i] * 4, 0), (4, 4)))
    return lax.fori_loop(0, 3, body, buf)
  text = compiled(f, np.ones((8, 4), np.float32),
                  np.ones((12, 8), np.float32), np.ones((12, 4), np.float32),
                  np.arange(3, dtype=np.int32), donate=(2,))
  body = _reachable(text, _while_bodies(text)[0])
  assert len(custom_call_lines(body)) == 1, body
  assert not re.search(r"(dynamic-slice|concatenate|gather)\(", body), body
  fusions = re.findall(r"= (\S+) fusion\(", body)
  assert fusions == ["s32[]"], body  # the counter's add


@pytest.mark.parametrize("platform", PLATFORMS)
def test_lookup_lookalikes_take_the_offsets_vector(platform):
  """Look-ups at a computed index, or through a gather, are computed by
  XLA (one fusion), not read by the kernels."""
  def f(x, buf, rows, i):
    return dyn.gemm(x, np.ones((8, 4), np.float32),
                    out=dyn.window(buf, (rows[i + 1], 0), (4, 4)))
  text = lower(f, np.ones((4, 8), np.float32), np.ones((12, 4), np.float32),
               np.arange(3, dtype=np.int32), np.int32(0), platform=platform)
  (line, ins, _), = custom_calls(text)
  assert ins[2:] == ["tensor<12x4xf32>", "tensor<1xi32>"], ins


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_scalar_eval_runs_jnp_division_bodies(dtype):
  """The private functions jnp's `//` and `%` lower to, run on host ints
  (what tells starts.py that a call is the operator), give Python's
  floor division and remainder for positive and negative dividends, at
  the integer range's ends too."""
  from jax_dynoff import scalar_eval  # pylint: disable=g-import-not-at-top
  with jax.enable_x64(dtype == np.int64):
    lowered = jax.jit(lambda x, c: (x // c, x % c)).lower(dtype(7), dtype(3))
    module = lowered.compiler_ir("stablehlo")
  bits = np.iinfo(dtype).bits
  xs = list(range(-20, 21)) + [-(2 ** (bits - 1)), 2 ** (bits - 1) - 1]
  with module.context:
    for name, op in (("floor_divide", lambda x, c: x // c),
                     ("remainder", lambda x, c: x % c)):
      func = scalar_eval.find_func(module, name)
      assert func is not None, name
      for c in (1, 3, 8):
        got = [scalar_eval.call_function(func, [x, c], module) for x in xs]
        assert got == [op(x, c) for x in xs], (name, c)
    # A division by zero is unknown (None), never a made-up value.
    func = scalar_eval.find_func(module, "floor_divide")
    assert scalar_eval.call_function(func, [5, 0], module) is None


@pytest.mark.parametrize("platform", PLATFORMS)
def test_division_lookalikes_take_the_offsets_vector(platform):
  """A division by a traced value, by zero or a negative constant, of a
  computed value (`(i + 1) % 3`), of a looked-up value (`rows[i] % 3`),
  twice (`i // 2 % 3`), or a function named like jnp's that is not it, is
  computed by XLA (one fusion)."""
  @jax.jit
  def floor_divide(a, b):  # not jnp's: a + b
    return a + b

  forms = [lambda rows, i, j: i // j, lambda rows, i, j: i % 0,
           lambda rows, i, j: i // -2, lambda rows, i, j: (i + 1) % 3,
           lambda rows, i, j: rows[i] % 3, lambda rows, i, j: i // 2 % 3,
           lambda rows, i, j: floor_divide(i, np.int32(2))]
  for form in forms:
    def f(x, buf, rows, i, j):
      return dyn.gemm(x, np.ones((8, 4), np.float32),
                      out=dyn.window(buf, (form(rows, i, j), 0), (4, 4)))
    text = lower(f, np.ones((4, 8), np.float32), np.ones((12, 4), np.float32),
                 np.arange(3, dtype=np.int32), np.int32(1), np.int32(2),
                 platform=platform)
    (_, ins, _), = custom_calls(text)
    assert ins[2:] == ["tensor<12x4xf32>", "tensor<1xi32>"], ins


def test_kv_cache_loop_body_is_the_call_and_the_counter():
  """Compiled (CPU): a KV-cache loop writing layer `s % L` at row
  `pos[s // L]` holds the custom call and the counter's add, and no
  offsets fusion."""
  L = 2
  def f(x, w, cache, pos):
    def body(s, cache):
      layer, p = s % L, pos[s // L]
      return dyn.gemm(x, dyn.window(w, (layer, 0, 0), (8, 4)),
                      out=dyn.window(cache, (layer, p, 0), (4, 4)))
    return lax.fori_loop(0, 2 * L, body, cache)
  text = compiled(f, np.ones((4, 8), np.float32),
                  np.ones((L, 8, 4), np.float32),
                  np.ones((L, 8, 4), np.float32),
                  np.array([0, 4], np.int32), donate=(2,))
  body = _reachable(text, _while_bodies(text)[0])
  assert len(custom_call_lines(body)) == 1, body
  assert not re.search(r"(dynamic-slice|concatenate|gather)\(", body), body
  fusions = re.findall(r"= (\S+) fusion\(", body)
  assert fusions == ["s32[]"], body  # the counter's add


@pytest.mark.parametrize("platform", PLATFORMS)
def test_loop_counter_start_reaches_the_call_as_it_is(platform):
  """A lone start that is a plain value (the loop counter) needs no XLA op
  before the call: no kernel, no launch per iteration."""
  def f(x, w, buf):
    def body(i, buf):
      return dyn.gemm(x, dyn.window(w, (i, 0, 0), (8, 4)),
                      out=dyn.window(buf, (0, 0), (4, 4)))
    return lax.fori_loop(0, 3, body, buf)
  text = lower(f, np.ones((4, 8), np.float32), np.ones((3, 8, 4), np.float32),
               np.ones((4, 4), np.float32), platform=platform)
  name, op, func = _offsets_definition(text)
  assert op == "", (name, op, func)  # a block argument: defined by nothing


def test_explain_names_each_calls_kernel_and_why():
  """jax_dynoff.explain: one line per call, the planned path and why."""
  def f(x, w, a, b):
    y = dyn.gemm(x, dyn.window(w, (1, 0, 0), (4096, 4096)))      # m = 16
    z = dyn.gemm(a, b, opts=dyn.KernelOptions(tile="tiny"))
    return y, z, dyn.gemm(a.astype(np.float32), b.astype(np.float32),
                          precision=lax.Precision.HIGHEST)
  lines = dyn.explain(f, np.ones((16, 4096), BF16),
                      np.ones((2, 4096, 4096), BF16),
                      np.ones((512, 512), BF16), np.ones((512, 512), BF16))
  assert len(lines) == 3, lines
  assert lines[0].startswith("sm90_skinny"), lines
  assert lines[1].startswith("sm90_tiny (direct kernel, cluster_k tile: "
                             "64x64 output tiles"), lines
  assert lines[2].startswith("sm90_medium (3xTF32 wgmma"), lines


def test_explain_asks_the_build_for_its_sm90_kernels(monkeypatch):
  """explain names the kernel this build launches: a CUDA build without
  its sm_90a kernels runs the generic one (launch_choice), and the build
  info says which build this is."""
  ext = plan_lib._ext  # pylint: disable=protected-access
  built, info = ext.cuda_sm90_built(), ext.cuda_build_info()
  assert (built is None) == (info is None), (built, info)
  if info is not None:  # the flag and the build info's words agree
    assert ("; sm90=yes" if built else "; sm90=no") in info, (built, info)
    assert plan_lib.sm90_kernels_built() is built
  x, w = np.ones((2048, 2048), BF16), np.ones((2048, 2048), BF16)
  line = lambda: dyn.explain(lambda x, w: dyn.gemm(x, w), x, w)[0]
  monkeypatch.setattr(plan_lib, "sm90_kernels_built", lambda: True)
  assert line().endswith("; launches kSm90DirectWideBf16NN"), line()
  monkeypatch.setattr(plan_lib, "sm90_kernels_built", lambda: False)
  assert line().endswith("; launches kGenericBf16Bf16"), line()


def test_explain_names_the_kernel_the_options_launch():
  """Each line ends with the catalogue kernel the CUDA handler launches
  (the choice function, on an SM90 device with aligned buffers), so the
  KernelOptions that act at run time show: skinny=False keeps the skinny
  plan but launches its cluster-K fallback, sm90=False the generic kernel,
  direct=False the ptr-array one, tf32=False float32's exact kernel."""
  def lines(x, w, precision=None, **opts):
    o = dyn.KernelOptions(**opts) if opts else None
    line, = dyn.explain(
        lambda x, w: dyn.gemm(x, w, precision=precision, opts=o), x, w)
    return line
  x16, w = np.ones((16, 4096), BF16), np.ones((4096, 4096), BF16)
  on, off = lines(x16, w), lines(x16, w, skinny=False)
  assert on.startswith("sm90_skinny (wide tile, split "), on
  assert on.endswith("; launches kSm90Skinny16Bf16NN"), on
  # The plan (workspace, fallback) is the same: only the kernel differs.
  assert off == on.replace("kSm90Skinny16Bf16NN",
                           "kSm90DirectClusterKBf16NN"), (on, off)
  assert lines(x16, w, sm90=False).endswith("; launches kGenericBf16Bf16")
  x, w2 = np.ones((2048, 2048), BF16), np.ones((2048, 2048), BF16)
  assert lines(x, w2).endswith("; launches kSm90DirectWideBf16NN")
  assert lines(x, w2, direct=False).endswith(
      "; launches kSm90LargeBf16Bf16NN")
  # float32 at DEFAULT precision (TF32) whatever the config says (on a GPU
  # this module's tests run under jax.default_matmul_precision("highest")).
  f, tf32 = np.ones((64, 64), np.float32), lax.Precision.DEFAULT
  assert lines(f, f, tf32).endswith("; launches kSm90DirectMediumF32NN")
  assert lines(f, f, tf32, tf32=False).endswith("; launches kGenericF32F32")
  # A composed ragged call (float32: no grouped kernel) names none: its
  # plain gemm is planned when the call is lowered.
  gs = np.array([10, 20, 30, 4], np.int32)
  composed, = dyn.explain(dyn.ragged_dot, f, np.ones((4, 64, 32), F32), gs)
  assert composed.startswith("composed") and "launches" not in composed
  grouped, = dyn.explain(dyn.ragged_dot, f.astype(BF16),
                         np.ones((4, 64, 32), BF16), gs)
  assert grouped.startswith("sm90_grouped") and "; launches kSm90" in grouped
  # Every line names a kernel of the catalogue.
  for line in (on, off, lines(f, f, sm90=False)):
    name = line.rsplit("; launches ", 1)[1]
    assert name in {c.name for c in plan_lib.CATALOGUE}, line


def test_cpu_handler_multiplies_with_openblas():
  """With the scipy-openblas32 wheel installed (a dependency), the CPU
  handler runs the product on its sgemm; results are the reference's
  (tests/test_semantics.py)."""
  pytest.importorskip("scipy_openblas32")
  from jax_dynoff import lowering
  assert "sgemm" in lowering.cpu_blas(), lowering.cpu_blas()


@pytest.mark.parametrize("platform", PLATFORMS)
def test_lookup_index_conversions(platform):
  """A widening conversion of a plain index keeps every value: the table
  and the plain index reach the call.  A narrowing one may not: the start
  goes through the offsets vector."""
  with jax.enable_x64(True):
    def f(x, buf, rows, i):
      return dyn.gemm(x, np.ones((8, 4), np.float32),
                      out=dyn.window(buf, (rows[i], 0), (4, 4)))
    args = (np.ones((4, 8), np.float32), np.ones((12, 4), np.float32),
            np.arange(3, dtype=np.int32))
    wide = lower(lambda x, b, r, i: f(x, b, r, i.astype(np.int64)),
                 *args, np.int32(1), platform=platform)
    narrow = lower(lambda x, b, r, i: f(x, b, r, i.astype(np.int32)),
                   *args, np.int64(1), platform=platform)
  (_, ins, _), = custom_calls(wide)
  assert ins[2:] == ["tensor<12x4xf32>", "tensor<i32>", "tensor<3xi32>"], ins
  (_, ins, _), = custom_calls(narrow)
  assert ins[2:] == ["tensor<12x4xf32>", "tensor<1xi32>"], ins


@pytest.mark.parametrize("platform", PLATFORMS)
def test_lookup_index_clamps(platform):
  """A clamp into the table after jnp's wrap is the same look-up (the table
  and the plain index reach the call); a clamp before it, or a bare index
  (allow_negative_indices=False), is not lax.dynamic_slice's rule for the
  plain index (-1 clamps to 0 instead of wrapping): the offsets vector."""
  def call(r):
    return lambda x, buf: dyn.gemm(x, np.ones((8, 4), np.float32),
                                   out=dyn.window(buf, (r, 0), (4, 4)))

  def ins_of(index_fn):
    def f(x, buf, rows, i):
      return call(index_fn(rows, i))(x, buf)
    text = lower(f, np.ones((4, 8), np.float32), np.ones((12, 4), np.float32),
                 np.arange(3, dtype=np.int32), np.int32(1), platform=platform)
    (_, ins, _), = custom_calls(text)
    return ins[2:]

  lookup = ["tensor<12x4xf32>", "tensor<i32>", "tensor<3xi32>"]
  vector = ["tensor<12x4xf32>", "tensor<1xi32>"]
  def wrap(rows, i):  # what jnp's indexing writes before dynamic_slice
    return lax.select(i < 0, i + 3, i)
  assert ins_of(lambda rows, i: lax.dynamic_slice(
      rows, (lax.clamp(0, wrap(rows, i), 2),), (1,),
      allow_negative_indices=False)[0]) == lookup
  assert ins_of(lambda rows, i: rows[lax.clamp(0, i, 2)]) == vector
  assert ins_of(lambda rows, i: lax.dynamic_slice(
      rows, (i,), (1,), allow_negative_indices=False)[0]) == vector
