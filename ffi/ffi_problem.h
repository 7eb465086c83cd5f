// Bridges the XLA FFI call to GemmProblem: both handlers decode through here
// so the CPU and CUDA paths validate exactly the same way.
#ifndef JAX_DYNOFF_FFI_PROBLEM_H_
#define JAX_DYNOFF_FFI_PROBLEM_H_

#include <cstdint>
#include <string>

#include "desc_decode.h"
#include "gemm_problem.h"
#include "xla/ffi/api/ffi.h"

namespace jax_dynoff {

namespace ffi = xla::ffi;

inline int64_t DTypeCode(ffi::DataType t) {
  switch (t) {
    case ffi::DataType::F32: return static_cast<int64_t>(DType::kF32);
    case ffi::DataType::F16: return static_cast<int64_t>(DType::kF16);
    case ffi::DataType::BF16: return static_cast<int64_t>(DType::kBF16);
    default: return -1;
  }
}

inline BufferInfo Info(const ffi::AnyBuffer& b) {
  BufferInfo info;
  info.dtype_code = DTypeCode(b.element_type());
  info.rank = static_cast<int>(b.dimensions().size());
  info.dims = b.dimensions().begin();
  info.is_s32 = b.element_type() == ffi::DataType::S32;
  info.is_s64 = b.element_type() == ffi::DataType::S64;
  return info;
}

// Checks a decoded problem (DecodeDesc) against one call's buffers and sets
// what depends on them (p->offsets_batched).  After success, ret 0 is D and
// every arg is a buffer, so `*rets.get<ffi::AnyBuffer>(0)` and
// `*args.get<...>(i)` hold.
inline ffi::Error CheckCall(const ffi::RemainingArgs& args,
                            const ffi::RemainingRets& rets, GemmProblem* p) {
  if (rets.size() < 1)
    return ffi::Error::InvalidArgument("jax_dynoff_gemm: no result buffer");
  auto d = rets.get<ffi::AnyBuffer>(0);
  if (!d.has_value()) return d.error();
  const ffi::AnyBuffer d_buf = **d;
  // Every arg must be a buffer; fetch them once.
  const int64_t num_args = static_cast<int64_t>(args.size());
  for (int64_t i = 0; i < num_args; ++i)
    if (!args.get<ffi::AnyBuffer>(i).has_value())
      return ffi::Error::InvalidArgument("jax_dynoff_gemm: arg " +
                                         std::to_string(i) + " not a buffer");
  auto arg_info = [&](int64_t i) { return Info(*args.get<ffi::AnyBuffer>(i)); };
  std::string msg = CheckBuffers(p, num_args, arg_info, Info(d_buf));
  if (!msg.empty()) return ffi::Error::InvalidArgument(msg);
  return ffi::Error::Success();
}

// Decodes `desc` and validates one call against it (the CPU handler, which
// keeps no state between calls).
inline ffi::Error DecodeCall(const ffi::RemainingArgs& args,
                             const ffi::RemainingRets& rets,
                             ffi::Span<const int64_t> desc, double alpha,
                             double beta, GemmProblem* p) {
  std::string msg = DecodeDesc(desc.begin(), static_cast<int64_t>(desc.size()),
                               alpha, beta, p);
  if (!msg.empty()) return ffi::Error::InvalidArgument(msg);
  return CheckCall(args, rets, p);
}

// Each slot's SlotRef for one call, from its FFI args (after CheckCall):
// host addresses for the CPU handler, device addresses for the CUDA one.
inline void ResolveCallSlots(const GemmProblem& p,
                             const ffi::RemainingArgs& args, SlotRef* out) {
  ResolveSlots(
      p,
      [&](int64_t i) {
        const ffi::AnyBuffer b = *args.get<ffi::AnyBuffer>(i);
        return ArgData{b.untyped_data(),
                       b.element_type() == ffi::DataType::S64,
                       static_cast<int64_t>(b.element_count())};
      },
      out);
}

}  // namespace jax_dynoff

#endif  // JAX_DYNOFF_FFI_PROBLEM_H_
