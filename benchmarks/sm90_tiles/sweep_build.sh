# Sourced by gen.sh, build.sh and build_grouped.sh: writing the candidates'
# translation units and registry, and compiling and linking a sweep.

# write_candidates HEADER PREFIX PATTERN "MACRO NAME ARG..." ...: one
# translation unit PREFIX_NAME.cu, `MACRO(NAME, ARG, ...)` after HEADER,
# per candidate whose NAME matches PATTERN (grep -E); their names in
# `names`.
write_candidates() {
  local header=$1 prefix=$2 pattern=$3 c macro name
  shift 3
  rm -f "${prefix}"_*.cu "${prefix}"_*.cu.o
  names=()
  for c in "$@"; do
    set -- $c
    macro=$1 name=$2
    shift 2
    echo "$name" | grep -qE "$pattern" || continue
    echo "#include \"$header\"
$macro($name, $(echo "$@" | sed 's/ /, /g'))" > "${prefix}_$name.cu"
    names+=("$name")
  done
}

# write_registry FILE HEADER ENTRY ARRAY COUNT: FILE declares the candidates
# in `names` (each a const ENTRY) and lists them in ARRAY, COUNT of them.
write_registry() {
  local file=$1 header=$2 entry=$3 array=$4 count=$5 n
  {
    echo "#include \"$header\""
    echo 'namespace sweep {'
    for n in "${names[@]}"; do echo "extern const $entry $n;"; done
    echo "const $entry* $array[] = {"
    for n in "${names[@]}"; do echo "  &$n,"; done
    echo '};'
    echo "const int $count = ${#names[@]};"
    echo '}'
  } > "$file"
}

# build_sweep PREFIX MAIN OUT: compiles PREFIX_*.cu (one nvcc each, in
# parallel) and MAIN (with the cuBLAS column where cublas_flags.sh finds
# cuBLAS, else without), and links them into OUT (no -lcuda: CUTLASS reaches
# the driver through cudart, so the sweeps link where no driver is installed).
build_sweep() {
  local prefix=$1 main=$2 out=$3
  source ./cublas_flags.sh
  local cut
  cut=$(python3 -c "import cutlass_library; print(cutlass_library.source_path)")
  local flags="-std=c++17 -O3 -DNDEBUG --expt-relaxed-constexpr \
    -diag-suppress=940,2473 -gencode=arch=compute_90a,code=sm_90a \
    -I../../ffi -I$cut/include -I$cut/tools/util/include \
    -I$(dirname "$(which nvcc)")/../include/cccl"
  rm -f "$main.o"
  ls "${prefix}"_*.cu | xargs -P "$(nproc)" -I{} sh -c "nvcc $flags -c {} -o {}.o"
  nvcc $flags $CUBLAS_CFLAGS -c "$main" -o "$main.o" || {
    echo "$main failed with the cuBLAS column: building without it"
    CUBLAS_LIBS=""; nvcc $flags -c "$main" -o "$main.o"; }
  nvcc -gencode=arch=compute_90a,code=sm_90a "${prefix}"_*.cu.o "$main.o" \
    -o "$out" $CUBLAS_LIBS
}
