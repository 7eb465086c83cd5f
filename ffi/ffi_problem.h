// Bridges the XLA FFI call to GemmProblem: both handlers decode through here
// so the CPU and CUDA paths validate exactly the same way.
#ifndef JAX_DYNOFF_FFI_PROBLEM_H_
#define JAX_DYNOFF_FFI_PROBLEM_H_

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "call_attrs.h"
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

// The call's attributes as XLA's FFI hands them (a dictionary, nested
// dictionaries for the operands, options, plan and slots), for
// DecodeCallAttrs.
class FfiAttrs : public AttrReader {
 public:
  explicit FfiAttrs(ffi::Dictionary d) : d_(d) {}
  bool Has(std::string_view name) const override { return d_.contains(name); }
  std::string Int(std::string_view name, int64_t* v) const override {
    return Get(name, v);
  }
  std::string Bool(std::string_view name, bool* v) const override {
    return Get(name, v);
  }
  std::string Float(std::string_view name, double* v) const override {
    return Get(name, v);
  }
  std::string Str(std::string_view name, std::string* v) const override {
    std::string_view s;
    std::string why = Get(name, &s);
    if (why.empty()) *v = std::string(s);
    return why;
  }
  std::string Ints(std::string_view name,
                   std::vector<int64_t>* v) const override {
    ffi::Span<const int64_t> s;
    std::string why = Get(name, &s);
    if (why.empty()) v->assign(s.begin(), s.end());
    return why;
  }
  std::string Dict(std::string_view name,
                   std::unique_ptr<AttrReader>* v) const override {
    ffi::Dictionary d(nullptr);
    std::string why = Get(name, &d);
    if (why.empty()) *v = std::make_unique<FfiAttrs>(d);
    return why;
  }

 private:
  template <typename T>
  std::string Get(std::string_view name, T* v) const {
    if (!d_.contains(name)) return "missing";
    ffi::ErrorOr<T> got = d_.get<T>(name);
    if (!got.has_value()) return got.error().message();
    *v = *got;
    return "";
  }
  ffi::Dictionary d_;
};

inline BufferInfo Info(const ffi::AnyBuffer& b) {
  BufferInfo info;
  info.dtype_code = DTypeCode(b.element_type());
  info.rank = static_cast<int>(b.dimensions().size());
  info.dims = b.dimensions().begin();
  info.is_s32 = b.element_type() == ffi::DataType::S32;
  info.is_s64 = b.element_type() == ffi::DataType::S64;
  return info;
}

// Checks a decoded problem (DecodeCallAttrs) against one call's buffers and sets
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

// Decodes the call's attributes and validates one call against them (the
// CPU handler, which keeps no state between calls).
inline ffi::Error DecodeCall(const ffi::RemainingArgs& args,
                             const ffi::RemainingRets& rets,
                             ffi::Dictionary attrs, GemmProblem* p) {
  std::string msg = DecodeCallAttrs(FfiAttrs(attrs), p);
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
