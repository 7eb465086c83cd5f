"""jax_dynoff.graphs on any backend: the flags, and the dump parser."""

import jax
import jax.numpy as jnp
import pytest

import jax_dynoff as dyn
from jax_dynoff import graphs


def test_flags_turn_on_whole_loop_capture():
  flags = dyn.cuda_graph_flags()
  assert "--xla_gpu_enable_command_buffer=" in flags
  kinds = flags.split("--xla_gpu_enable_command_buffer=")[1].split()[0]
  assert {"WHILE", "CONDITIONAL", "CUSTOM_CALL"} <= set(kinds.split(","))
  assert "--xla_gpu_graph_min_graph_size=1" in flags
  assert dyn.cuda_graph_options(3)["xla_gpu_graph_min_graph_size"] == "3"


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
