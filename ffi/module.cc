// nanobind module: hands the FFI handlers to Python as capsules.
#include <nanobind/nanobind.h>

#include "handlers.h"

namespace nb = nanobind;

namespace {

nb::capsule Capsule(XLA_FFI_Handler* handler) {
  return nb::capsule(reinterpret_cast<void*>(handler));
}

}  // namespace

NB_MODULE(_jax_dynoff, m) {
  m.doc() = "jax_dynoff FFI handlers";
  // {platform: {target name: capsule, or {stage: capsule}}};
  // jax_dynoff/lowering.py registers each with jax.ffi.register_ffi_target.
  // The CUDA handler has two stages: instantiate (decode and plan once per
  // op instance, into a state) and execute.
  m.def("registrations", []() {
    nb::dict platforms;
    nb::dict cpu;
    cpu[jax_dynoff::kTargetName] = Capsule(jax_dynoff::CpuGemmHandler());
    platforms["cpu"] = cpu;
#ifdef JAX_DYNOFF_WITH_CUDA
    nb::dict stages;
    stages["instantiate"] = Capsule(jax_dynoff::CudaGemmInstantiate());
    stages["execute"] = Capsule(jax_dynoff::CudaGemmHandler());
    nb::dict cuda;
    cuda[jax_dynoff::kTargetName] = stages;
    platforms["CUDA"] = cuda;
#endif
    return platforms;
  });
  // {platform: {type name: {"type_id": capsule, "type_info": capsule}}}: the
  // FFI types XLA must know before a handler's state of that type is set.
  m.def("ffi_types", []() {
    nb::dict platforms;
#ifdef JAX_DYNOFF_WITH_CUDA
    nb::dict type;
    type["type_id"] = nb::capsule(jax_dynoff::CudaGemmStateTypeId());
    type["type_info"] = nb::capsule(jax_dynoff::CudaGemmStateTypeInfo());
    nb::dict cuda;
    cuda["jax_dynoff_gemm_state"] = type;
    platforms["CUDA"] = cuda;
#endif
    return platforms;
  });
  m.def("cuda_built", []() {
#ifdef JAX_DYNOFF_WITH_CUDA
    return true;
#else
    return false;
#endif
  });
  m.def("cuda_build_info", []() -> nb::object {
#ifdef JAX_DYNOFF_WITH_CUDA
    return nb::str(jax_dynoff::CudaBuildInfo());
#else
    return nb::none();
#endif
  });
}
