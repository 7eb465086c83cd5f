// cuTensorMapEncodeTiled for the SM90 kernels, its driver entry point looked
// up once per process.  CUTLASS encodes every TMA descriptor through a
// wrapper that asks the runtime for the driver's entry point on each call
// (cuda_host_adapter.hpp), four times per GEMM; with
// CUTLASS_ENABLE_DIRECT_CUDA_DRIVER_CALL (set for every CUDA source,
// ffi/cuda.cmake) it calls cuTensorMapEncodeTiled by name instead, which
// this file defines.  The module does not link libcuda (it must import on a
// machine without a GPU driver), so the definition forwards to the entry
// point; its visibility is hidden (CUDA_VISIBILITY_PRESET), so no other
// library in the process binds to it.
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime_api.h>

namespace {

PFN_cuTensorMapEncodeTiled_v12000 LookUp() {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult found;
  if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000,
                                       cudaEnableDefault,
                                       &found) != cudaSuccess ||
      found != cudaDriverEntryPointSuccess)
    return nullptr;
  return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(fn);
}

}  // namespace

extern "C" CUresult CUDAAPI cuTensorMapEncodeTiled(
    CUtensorMap* tensor_map, CUtensorMapDataType data_type, cuuint32_t rank,
    void* global_address, const cuuint64_t* global_dim,
    const cuuint64_t* global_strides, const cuuint32_t* box_dim,
    const cuuint32_t* element_strides, CUtensorMapInterleave interleave,
    CUtensorMapSwizzle swizzle, CUtensorMapL2promotion l2_promotion,
    CUtensorMapFloatOOBfill oob_fill) {
  static const PFN_cuTensorMapEncodeTiled_v12000 encode = LookUp();
  if (encode == nullptr) return CUDA_ERROR_NOT_FOUND;
  return encode(tensor_map, data_type, rank, global_address, global_dim,
                global_strides, box_dim, element_strides, interleave, swizzle,
                l2_promotion, oob_fill);
}
