# Sourced by the build scripts: the nvcc flags of the cuBLAS column, from the
# CUDA toolkit or the nvidia-cublas wheel that jax's CUDA plugin installs:
# CUBLAS_CFLAGS to compile (-DWITH_CUBLAS, the header), CUBLAS_LIBS to link;
# both empty (column left out) when neither has cublas_v2.h and the library.
CUBLAS_CFLAGS=""
CUBLAS_LIBS=""
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
  CUBLAS_CFLAGS="-DWITH_CUBLAS -I$inc"
  # -l:NAME: the wheel ships only libcublas.so.13 (no .so link), and nvcc
  # does not take a versioned library as an input file.
  CUBLAS_LIBS="-L$(dirname "$lib") -l:$(basename "$lib") -Xlinker -rpath=$(dirname "$lib")"
  break
done
echo "cuBLAS column: ${CUBLAS_CFLAGS:-none (no cublas_v2.h found)} $CUBLAS_LIBS"
