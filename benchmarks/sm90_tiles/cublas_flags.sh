# Sourced by the build scripts: CUBLAS_FLAGS = the nvcc flags that build the
# cuBLAS column (-DWITH_CUBLAS, its header and library), from the CUDA
# toolkit or the nvidia-cublas wheel that jax's CUDA plugin installs; empty
# (column left out) when neither has cublas_v2.h.
CUBLAS_FLAGS=""
for inc in "$(dirname "$(which nvcc)")/../include" $(python3 -c "
import nvidia, glob, os
for p in nvidia.__path__:
    for h in glob.glob(os.path.join(p, '**', 'cublas_v2.h'), recursive=True):
        print(os.path.dirname(h))" 2>/dev/null); do
  [ -f "$inc/cublas_v2.h" ] || continue
  lib=""
  for l in "$inc"/../lib/libcublas.so* "$inc"/../lib64/libcublas.so*; do
    [ -e "$l" ] && { lib=$l; break; }
  done
  [ -n "$lib" ] || continue
  CUBLAS_FLAGS="-DWITH_CUBLAS -I$inc $lib -Xlinker -rpath=$(dirname "$lib")"
  break
done
echo "cuBLAS column: ${CUBLAS_FLAGS:-none (no cublas_v2.h found)}"
