// nanobind module: hands the FFI handlers to Python as capsules.
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "gemm_problem.h"
#include "handlers.h"
#include "plan.h"

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
  // The CUDA handler's workspace layout for a desc (jax_dynoff/plan.py
  // sizes the workspace result with it): the formula lives in plan.h.
  m.def("workspace_layout", [](const std::vector<int64_t>& desc, double alpha,
                               double beta) {
    jax_dynoff::GemmProblem p;
    const std::string msg = jax_dynoff::DecodeDesc(
        desc.data(), static_cast<int64_t>(desc.size()), alpha, beta, &p);
    if (!msg.empty()) throw std::invalid_argument(msg);
    const jax_dynoff::WorkspaceLayout w = jax_dynoff::Layout(p);
    nb::dict d;
    d["kernel_bytes"] = w.kernel_bytes;
    d["ptrs"] = w.ptrs;
    d["ptr_count"] = w.ptr_count;
    d["scratch"] = w.scratch;
    d["scratch_item"] = w.scratch_item;
    d["partials"] = w.partials;
    d["partial_item"] = w.partial_item;
    d["total"] = w.total;
    return d;
  });
  m.def("skinny_split", [](int64_t n, int64_t k, int sms) {
    return jax_dynoff::kernels::SkinnySplit(n, k, sms);
  });
  m.def("direct_split_k_workspace", [](int64_t m_, int64_t n) {
    return jax_dynoff::kernels::DirectSplitKWorkspace(m_, n);
  });
  m.attr("SM90_KERNEL_WORKSPACE") =
      static_cast<int64_t>(jax_dynoff::kernels::kSm90KernelWorkspace);
  m.attr("WORKSPACE_ALIGN") = jax_dynoff::kWorkspaceAlign;
  m.def("use_cpu_blas", [](const std::string& path) {
    return jax_dynoff::SetCpuBlas(path);
  });
  m.def("cpu_blas", []() { return std::string(jax_dynoff::CpuBlas()); });
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
