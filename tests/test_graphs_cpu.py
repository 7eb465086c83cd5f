"""jax_dynoff.graphs on any backend: the flags, and the dump parser."""

import jax
import jax.numpy as jnp
import pytest

import jax_dynoff as dyn
from jax_dynoff import graphs


def test_flags_capture_bodies_or_whole_loops():
  # By default body graphs only: the loop stays on the host, XLA's command
  # kinds as they are.
  assert dyn.cuda_graph_flags().split() == ["--xla_gpu_graph_min_graph_size=1"]
  flags = dyn.cuda_graph_flags(whole_loops=True).split()
  assert "--xla_gpu_enable_command_buffer=+WHILE" in flags
  assert "--xla_gpu_graph_min_graph_size=1" in flags
  opts = dyn.cuda_graph_options(3)
  kinds = set(opts["xla_gpu_enable_command_buffer"].split(","))
  assert {"CONDITIONAL", "CUSTOM_CALL", "FUSION"} <= kinds
  assert "WHILE" not in kinds
  assert opts["xla_gpu_graph_min_graph_size"] == "3"
  whole = set(dyn.cuda_graph_options(whole_loops=True)[
      "xla_gpu_enable_command_buffer"].split(","))
  assert whole == kinds | {"WHILE"}
  assert graphs.BODY_GRAPHS == dyn.cuda_graph_options()
  assert graphs.WHOLE_LOOP_GRAPHS == dyn.cuda_graph_options(whole_loops=True)


def test_options_are_accepted_by_the_compiler():
  # XLA rejects unknown command kinds at compile time, on any backend.
  f = jax.jit(lambda a: a + 1).lower(jnp.ones(3))
  f.compile(compiler_options=dyn.cuda_graph_options())
  f.compile(compiler_options=dyn.cuda_graph_options(whole_loops=True))
  f.compile(compiler_options=graphs.NO_GRAPHS)


@pytest.mark.skipif(jax.default_backend() == "gpu", reason="CPU behaviour")
def test_check_capture_says_it_needs_a_gpu():
  a = jnp.ones((8, 8))
  with pytest.raises(RuntimeError, match="needs a CUDA device"):
    dyn.check_capture(lambda a: dyn.gemm(a, a), a)


SAMPLE = """\
000: kCommandBuffer
  000: kWhile
    000: kKernel
    001: kCustomCall jax_dynoff_gemm.4
001: kCustomCall jax_dynoff_gemm.5
"""


def test_parser_counts_calls_inside_and_outside_command_buffers():
  rep = graphs._parse(SAMPLE)
  assert (rep.captured, rep.uncaptured) == (1, 1)
  assert not rep.whole_program and not rep.all_captured
  rep = graphs._parse("000: kCommandBuffer\n  000: kCustomCall jax_dynoff_gemm\n")
  assert rep.all_captured and rep.whole_program


def test_parser_counts_a_calls_graph_pads_with_it():
  """A named dump: the call and its pads are its custom-call thunks."""
  rep = graphs._parse("000: kWhile\n  000: kCommandBuffer\n"
                      "    000: kCustomCall jax_dynoff_gemm.1\n"
                      "    001: kCustomCall jax_dynoff_graph_pad.2\n"
                      "    002: kCustomCall jax_dynoff_graph_pad.3\n"
                      "    003: kKernel\n")
  assert (rep.captured, rep.uncaptured) == (3, 0)


# What XLA (jax 0.11.2, H200) dumped for a loop with lax.cond, captured whole:
# the "condition:" / "body:" / branch labels sit at odd indents.
DUMP_COND = """\
000: kCommandBuffer [source | sink] 
    001: kCopy  [source       | next=003 (2)] kCopy
    003: kWhile [prev=002 (1) | sink        ]       
condition:
        004: kCustomKernel [source | sink] loop_compare_fusion grid: [1, 1, 1]
      body:
        005: kCustomKernel [source       | next=010 (1)] loop_compare_fusion_1
        010: kConditional  [prev=005 (1) | next=011 (1)]           
          false_branch:
            007: kCustomCall   [prev=006 (1) | sink        ] kCustomCall
          true_branch:
            009: kCustomCall   [prev=008 (1) | sink        ] kCustomCall
        011: kCustomKernel [prev=010 (1) | sink        ] loop_add_fusion
"""

# ... and for a fori_loop whose table look-up became an async copy: the loop
# itself stays outside, only its body is a command buffer.
DUMP_SPLIT = """\
000: kCommandBuffer [source       | next=003 (1)] 
    001: kCopy [source | sink] kCopy
003: kWhile         [prev=000 (1) | sink        ]   
condition:
    004: kCustomKernel [source | sink] loop_compare_fusion grid: [1, 1, 1]
  body:
    000: kCommandBuffer [source | sink] 
        005: kAsyncStart   [source       | next=009 (2)] stream=computation_stream[0]
            007: kDynamicSliceFusion [source | sink] params=1, results=1
        008: kAsyncDone    [source       | sink        ] async_id=5
        009: kCustomCall   [prev=005 (2) | next=010 (1)] kCustomCall
"""


def test_parser_reads_real_dumps():
  rep = graphs._parse(DUMP_COND)
  assert (rep.captured, rep.uncaptured, rep.whole_program) == (2, 0, True)
  rep = graphs._parse(DUMP_SPLIT)
  assert (rep.captured, rep.uncaptured, rep.whole_program) == (1, 0, False)


def test_parser_says_why_a_loop_is_split():
  assert graphs._parse(DUMP_COND).hints == []
  (hint,) = graphs._parse(DUMP_SPLIT).hints
  assert "kDynamicSliceFusion" in hint and "scan" in hint
  # A host loop without a copy in its body: body graphs (WHILE not among
  # the command kinds), and how to make the loop whole.
  no_while = DUMP_SPLIT.replace(
      "        005: kAsyncStart   [source       | next=009 (2)] "
      "stream=computation_stream[0]\n"
      "            007: kDynamicSliceFusion [source | sink] params=1, "
      "results=1\n"
      "        008: kAsyncDone    [source       | sink        ] async_id=5\n",
      "")
  assert "kAsyncStart" not in no_while
  (hint,) = graphs._parse(no_while).hints
  assert "WHILE" in hint
  hints = graphs._parse(SAMPLE).hints
  assert any("min_graph_size" in h for h in hints), hints


# What XLA (jax 0.11.2, H200, default flags) dumped for the bench's cond
# loop: the body (3 top-level thunks, the calls inside the branches) runs
# thunk by thunk.
DUMP_SHORT_BODY = """\
001: kCopy  [source       | next=003 (2)] kCopy
003: kWhile [prev=002 (1) | sink        ]   
condition:
    004: kCustomKernel [source | sink] loop_compare_fusion grid: [1, 1, 1]
  body:
    009: kCustomKernel [source       | next=014 (1)] loop_compare_fusion_2
    014: kConditional  [prev=009 (1) | next=015 (1)]           
      false_branch:
        010: kCustomKernel [source       | next=011 (1)] input_concatenate_fusion_1
        011: kCustomCall   [prev=010 (1) | sink        ] kCustomCall
      true_branch:
        012: kCustomKernel [source       | next=013 (1)] input_concatenate_fusion_1
        013: kCustomCall   [prev=012 (1) | sink        ] kCustomCall
    015: kCustomKernel [prev=014 (1) | sink        ] loop_add_fusion_1
"""


def test_parser_counts_the_thunks_around_an_uncaptured_call():
  """The hint names the size XLA compares with min_graph_size: the loop
  body's top-level thunks (a cond's branches do not count)."""
  rep = graphs._parse(DUMP_SHORT_BODY)
  assert (rep.captured, rep.uncaptured) == (0, 2)
  assert graphs._uncaptured_run_sizes(DUMP_SHORT_BODY) == [3, 3]
  assert any("3 top-level thunk" in h and "unroll" in h for h in rep.hints), (
      rep.hints)
  # At the program's top level: the program's own thunks.
  top = "000: kCopy [source] kCopy\n001: kCustomCall [sink] kCustomCall\n"
  assert graphs._uncaptured_run_sizes(top) == [2]
  # Captured calls are not counted.
  assert graphs._uncaptured_run_sizes(DUMP_COND) == []


@pytest.mark.parametrize("case", ["plain", "fori", "cond", "scan_switch",
                                  "scan_xs_switch"])
def test_graph_case_programs_match_the_reference(case):
  """The programs whose capture the GPU tests check compute what the
  reference does (on any backend), with fresh data and tables."""
  import numpy as np
  import graph_cases as gc
  build, _ = gc.cases()[case]
  for seed in range(2):
    args = gc.fresh_args(case, seed)
    got = np.asarray(jax.jit(build(dyn))(*args), np.float32)
    want = np.asarray(jax.jit(build(dyn.reference))(*args), np.float32)
    np.testing.assert_allclose(got, want, rtol=2e-2, atol=2e-2)
