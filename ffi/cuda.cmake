# CUDA part of the build, included by CMakeLists.txt when nvcc is found.
#
# Adds to the nanobind target _jax_dynoff:
#   - ffi/cuda/ (the CUDA FFI handler, its runners, the small kernels around
#     the GEMMs and the kernel registry) and the catalogue's CUTLASS 2.x
#     kernels, compiled as SASS for every architecture in
#     JAX_DYNOFF_CUDA_ARCHS (by default the GPUs present, else 90a;80; an
#     "a" suffix is dropped for these: they use no
#     arch-specific feature) plus PTX of the lowest one for newer GPUs;
#   - the catalogue's SM90 CUTLASS 3.x kernels, compiled only for sm_90a,
#     and only when JAX_DYNOFF_CUDA_ARCHS lists 90a (then
#     JAX_DYNOFF_WITH_SM90 is defined for the handler).
# cudart is linked statically, so the module imports on a machine without a
# GPU driver (the CPU handler still works there).  CUTLASS comes from the
# nvidia-cutlass wheel; CCCL from <cuda>/include/cccl (CUDA 13 layout).

set(JAX_DYNOFF_CUDA_ARCHS "auto" CACHE STRING
    "CUDA architectures (e.g. 90a;80: 90a builds the SM90 TMA kernels, every entry the generic ones); auto: the GPUs this machine has, else portable; portable: 90a;80")

enable_language(CUDA)
find_package(CUDAToolkit REQUIRED)

# --- auto: the architectures of the GPUs present (nvidia-smi), where nvcc
# can build them all; else (no GPU, no driver, an architecture this nvcc
# does not know) the portable set.  A build for the machine it runs on
# skips the architectures it will never load.
set(_jd_portable "90a;80")
set(_jd_archs "${JAX_DYNOFF_CUDA_ARCHS}")
if(_jd_archs STREQUAL "portable")
  set(_jd_archs "${_jd_portable}")
elseif(_jd_archs STREQUAL "auto")
  set(_jd_archs "${_jd_portable}")
  set(_jd_why "no GPU found by nvidia-smi")
  execute_process(
    COMMAND nvidia-smi --query-gpu=compute_cap --format=csv,noheader
    OUTPUT_VARIABLE _jd_caps RESULT_VARIABLE _jd_rc ERROR_QUIET
    OUTPUT_STRIP_TRAILING_WHITESPACE)
  execute_process(
    COMMAND "${CMAKE_CUDA_COMPILER}" --list-gpu-arch
    OUTPUT_VARIABLE _jd_known RESULT_VARIABLE _jd_rc2 ERROR_QUIET)
  if(_jd_rc EQUAL 0 AND NOT _jd_caps STREQUAL "")
    string(REPLACE "\n" ";" _jd_caps "${_jd_caps}")
    set(_jd_found)
    set(_jd_ok ON)
    foreach(cap IN LISTS _jd_caps)
      string(STRIP "${cap}" cap)
      if(NOT cap MATCHES "^([0-9]+)\\.([0-9]+)$")
        set(_jd_ok OFF)
        set(_jd_why "nvidia-smi said '${cap}'")
        break()
      endif()
      set(_num "${CMAKE_MATCH_1}${CMAKE_MATCH_2}")
      if(NOT _jd_rc2 EQUAL 0 OR NOT _jd_known MATCHES "compute_${_num}")
        set(_jd_ok OFF)
        set(_jd_why "nvcc cannot build sm_${_num}")
        break()
      endif()
      # sm_90's TMA kernels need the arch-specific target.
      if(_num STREQUAL "90")
        set(_num "90a")
      endif()
      list(APPEND _jd_found "${_num}")
    endforeach()
    if(_jd_ok AND _jd_found)
      list(REMOVE_DUPLICATES _jd_found)
      set(_jd_archs "${_jd_found}")
      set(_jd_why "the GPUs present")
    endif()
  endif()
  message(STATUS "jax_dynoff: JAX_DYNOFF_CUDA_ARCHS=auto -> ${_jd_archs} (${_jd_why})")
endif()

execute_process(
  COMMAND "${Python_EXECUTABLE}" -c
          "import cutlass_library, os; print(cutlass_library.source_path)"
  OUTPUT_STRIP_TRAILING_WHITESPACE OUTPUT_VARIABLE JAX_DYNOFF_CUTLASS_DIR
  COMMAND_ERROR_IS_FATAL ANY)
set(JAX_DYNOFF_CUTLASS_INCLUDE_DIRS
    "${JAX_DYNOFF_CUTLASS_DIR}/include"
    "${JAX_DYNOFF_CUTLASS_DIR}/tools/util/include")
if(NOT EXISTS "${JAX_DYNOFF_CUTLASS_DIR}/include/cutlass/cutlass.h")
  message(FATAL_ERROR "CUTLASS headers not found under ${JAX_DYNOFF_CUTLASS_DIR}")
endif()
message(STATUS "jax_dynoff: CUTLASS headers: ${JAX_DYNOFF_CUTLASS_DIR}/include")

set(JAX_DYNOFF_CCCL_INCLUDE_DIRS)
foreach(dir IN LISTS CUDAToolkit_INCLUDE_DIRS)
  if(EXISTS "${dir}/cccl")
    list(APPEND JAX_DYNOFF_CCCL_INCLUDE_DIRS "${dir}/cccl")
  endif()
endforeach()

# --- Architectures -> -gencode flags.
set(_jd_generic_gencode)
set(_jd_with_sm90 OFF)
set(_jd_lowest "")
foreach(arch IN LISTS _jd_archs)
  if(arch MATCHES "^([0-9]+)a?$")
    set(_num "${CMAKE_MATCH_1}")
  else()
    message(FATAL_ERROR "JAX_DYNOFF_CUDA_ARCHS: bad entry '${arch}' (want e.g. 90a;80)")
  endif()
  if(arch STREQUAL "90a")
    set(_jd_with_sm90 ON)
  endif()
  list(APPEND _jd_generic_gencode "-gencode=arch=compute_${_num},code=sm_${_num}")
  if(_jd_lowest STREQUAL "" OR _num LESS _jd_lowest)
    set(_jd_lowest "${_num}")
  endif()
endforeach()
if(_jd_lowest STREQUAL "")
  message(FATAL_ERROR "JAX_DYNOFF_CUDA_ARCHS is empty")
endif()
list(APPEND _jd_generic_gencode
     "-gencode=arch=compute_${_jd_lowest},code=compute_${_jd_lowest}")
list(REMOVE_DUPLICATES _jd_generic_gencode)
string(REPLACE ";" "," _jd_archs_str "${_jd_archs}")

set(_jd_cuda_flags
    --expt-relaxed-constexpr
    # Warnings from the XLA FFI headers (missing return after a switch).
    -diag-suppress=940,2473 -Xcompiler=-Wno-return-type)

function(_jd_cuda_object_library name)
  set_target_properties(${name} PROPERTIES
    CUDA_ARCHITECTURES OFF  # the -gencode flags below say it all
    CUDA_STANDARD 17
    CUDA_STANDARD_REQUIRED ON
    POSITION_INDEPENDENT_CODE ON
    CUDA_VISIBILITY_PRESET hidden)
  target_include_directories(${name} PRIVATE
    "${XLA_FFI_INCLUDE_DIR}" "${PROJECT_SOURCE_DIR}/ffi"
    "${JAX_DYNOFF_GENERATED_DIR}"
    ${JAX_DYNOFF_CUTLASS_INCLUDE_DIRS} ${JAX_DYNOFF_CCCL_INCLUDE_DIRS})
  if(_jd_with_sm90)
    target_compile_definitions(${name} PRIVATE JAX_DYNOFF_WITH_SM90)
  endif()
endfunction()

# --- Handler, generic (SIMT) and TF32 kernels: every architecture.
add_library(jax_dynoff_cuda_generic OBJECT
  ffi/cuda/handler.cu
  ffi/cuda/runners.cu
  ffi/cuda/prep_kernels.cu
  ffi/cuda/registry.cu
  # The catalogue's kernels for every architecture (ffi/kernels/catalogue.py).
  ${JAX_DYNOFF_EVERY_ARCH_UNITS}
  # The SM90 TF32 kernels' staging (plain CUDA: built with the handler,
  # which calls it, on every architecture).
  ffi/kernels/sm90_tf32_stage.cu)
_jd_cuda_object_library(jax_dynoff_cuda_generic)
target_compile_options(jax_dynoff_cuda_generic PRIVATE
  ${_jd_cuda_flags} ${_jd_generic_gencode})
target_compile_definitions(jax_dynoff_cuda_generic PRIVATE
  "JAX_DYNOFF_CUDA_ARCHS_STR=\"${_jd_archs_str}\"")
target_sources(_jax_dynoff PRIVATE $<TARGET_OBJECTS:jax_dynoff_cuda_generic>)

# --- SM90 TMA kernels: sm_90a only (wgmma / TMA need the arch-specific ISA).
if(_jd_with_sm90)
  # The catalogue's sm_90a kernels (ffi/kernels/catalogue.py), one
  # translation unit per kernel family and tile: nvcc's time goes to the
  # CUTLASS headers.
  add_library(jax_dynoff_cuda_sm90 OBJECT ${JAX_DYNOFF_SM90A_UNITS})
  _jd_cuda_object_library(jax_dynoff_cuda_sm90)
  target_compile_options(jax_dynoff_cuda_sm90 PRIVATE
    ${_jd_cuda_flags} "-gencode=arch=compute_90a,code=sm_90a")
  target_sources(_jax_dynoff PRIVATE $<TARGET_OBJECTS:jax_dynoff_cuda_sm90>)
endif()

# _jax_dynoff compiles no CUDA itself; it only links the objects above.
set_target_properties(_jax_dynoff PROPERTIES CUDA_ARCHITECTURES OFF)
target_compile_definitions(_jax_dynoff PRIVATE JAX_DYNOFF_WITH_CUDA)
target_link_libraries(_jax_dynoff PRIVATE CUDA::cudart_static)
message(STATUS "jax_dynoff: CUDA archs ${_jd_archs} "
               "(generic: ${_jd_generic_gencode}; sm90 kernels: ${_jd_with_sm90})")
