"""One side of one bench case under a kernel profiler (`ncu`): compiled,
autotuned and run first, then one call exactly between cuProfilerStart /
cuProfilerStop, so that `ncu --profile-from-start off` reports that call's
kernels and none of XLA's autotuning candidates:

    XLA_PYTHON_CLIENT_PREALLOCATE=false ncu --profile-from-start off \\
        --kernel-name regex:"gemm|nvjet|device_kernel" \\
        python benchmarks/ncu_case.py stacked 32 16 4096 ours

Cases: `plain M N K` and `stacked L M N` (bf16, or the dtype of a leading
`--dtype D`; float32 at default precision), side `ours` or `xla`; one loop
iteration per call (a stacked call is L GEMMs).  Without XLA's
preallocation, or ncu saves and restores the whole preallocated device
memory around every replay pass.  First it prints the compiled program's
GEMM configurations (`gemm_configs`: a Triton fusion's tile, stages, warps
and split of K, as XLA's autotuner chose them), no profiler needed."""
import contextlib
import ctypes
import re
import sys

import jax
import jax.numpy as jnp

import bench  # benchmarks/bench.py, beside this script


def cuda_driver():
  """The CUDA driver, device 0's primary context (XLA's) made current on
  this thread, for cuProfilerStart / Stop."""
  cu = ctypes.CDLL("libcuda.so.1")
  dev, ctx = ctypes.c_int(), ctypes.c_void_p()
  if (cu.cuDeviceGet(ctypes.byref(dev), 0) or
      cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev) or
      cu.cuCtxSetCurrent(ctx)):
    raise RuntimeError("no current CUDA context for the profiler")
  return cu


# A Triton GEMM fusion's config object, a cuBLAS call's algorithm number.
_GEMM_CONFIG = re.compile(
    r'triton_gemm_config":\{[^}]*\}|selected_algorithm":"[^"]*"')


def gemm_configs(hlo_text: str) -> list[str]:
  """The GEMM configurations in a compiled program's HLO text: each Triton
  GEMM fusion's `triton_gemm_config` and each cuBLAS call's algorithm, one
  line each, with the instruction's name."""
  return [f"{line.strip().split(' ', 1)[0]} {m}"
          for line in hlo_text.splitlines()
          for m in _GEMM_CONFIG.findall(line)]


@contextlib.contextmanager
def profiled(cu):
  """The profiler on for the block (`cu` from cuda_driver())."""
  if cu.cuProfilerStart():
    raise RuntimeError("cuProfilerStart failed")
  try:
    yield
  finally:
    if cu.cuProfilerStop():
      raise RuntimeError("cuProfilerStop failed")


def main(argv):
  dtype = jnp.bfloat16
  if argv[0] == "--dtype":
    dtype = jnp.dtype(argv[1])
    argv = argv[2:]
  case, *dims, side = argv
  dims = [int(d) for d in dims]
  if case == "plain":
    loops = bench.plain_loops(*dims, dtype)
  elif case == "stacked":
    loops = bench.stacked_loops(*dims, dtype)
  else:
    raise SystemExit(f"unknown case {case!r}")
  f, args = bench.compile_loop(loops[side], 1)
  for line in gemm_configs(f.as_text()):
    print("GEMM", line, flush=True)
  for _ in range(3):
    jax.block_until_ready(f(*args))
  cu = cuda_driver()
  with profiled(cu):
    jax.block_until_ready(f(*args))


if __name__ == "__main__":
  main(sys.argv[1:])
