"""Which ways of reading a loop's offsets keep a fori_loop in one CUDA graph.

Exploration (GPU, jax 0.11), not a test: prints one line per variant.  Run
with XLA_FLAGS set to jax_dynoff.cuda_graph_flags(whole_loops=True) (and any
extra flag).
"""
import jax.numpy as jnp
import numpy as np
from jax import lax

import jax_dynoff as dyn

M, N, K, L = 128, 256, 192, 8
x = jnp.ones((M, K), jnp.bfloat16)
w = jnp.ones((L, K, N), jnp.bfloat16)
buf = jnp.ones((L * M, N), jnp.bfloat16)
rows = jnp.asarray(np.random.default_rng(0).permutation(L) * M, jnp.int32)

READS = {
    "index": lambda r, i: r[i],
    "dynamic_index": lambda r, i: lax.dynamic_index_in_dim(r, i, keepdims=False),
    "clip": lambda r, i: jnp.clip(r[i], 0, (L - 1) * M),
    "take_clip": lambda r, i: jnp.take(r, i, mode="clip"),
    "affine": lambda r, i: (i * 3 % L) * M,
    "carry": None,
}

for name, read in READS.items():
  if read is None:  # the offset table rides in the carry, rotated each step
    def f(x, w, buf, rows):
      def body(i, c):
        buf, r = c
        buf = dyn.gemm(x, dyn.window(w, (i, 0, 0), (K, N)),
                       out=dyn.window(buf, (r[0], 0), (M, N)))
        return buf, jnp.roll(r, -1)
      return lax.fori_loop(0, L, body, (buf, rows))[0]
  else:
    def f(x, w, buf, rows, read=read):
      def body(i, buf):
        return dyn.gemm(x, dyn.window(w, (i, 0, 0), (K, N)),
                        out=dyn.window(buf, (read(rows, i), 0), (M, N)))
      return lax.fori_loop(0, L, body, buf)
  rep = dyn.check_capture(f, x, w, buf, rows)
  print(f"{name:<14} captured={rep.captured} uncaptured={rep.uncaptured} "
        f"whole_program={rep.whole_program}", flush=True)
