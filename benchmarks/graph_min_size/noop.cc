// An XLA FFI handler that does nothing, marked command-buffer compatible:
// a thunk with no kernel.  benchmarks/graph_min_size/pad_probe.py puts such
// calls beside each gemm of a loop body to lift the body over XLA's minimum
// command-buffer size, so that the cost of that threshold can be measured.
// Built by pad_probe.py with the host C++ compiler against
// jax.ffi.include_dir(); never part of the library.
#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

static ffi::Error Noop(ffi::RemainingArgs, ffi::RemainingRets) {
  return ffi::Error::Success();
}

XLA_FFI_DEFINE_HANDLER_SYMBOL(JaxDynoffProbeNoop, Noop,
                              ffi::Ffi::Bind().RemainingArgs().RemainingRets(),
                              {xla::ffi::Traits::kCmdBufferCompatible});

// The pure form (pad_probe.py --pure): its one result aliases its one
// operand, so it has nothing to do, and XLA keeps it because the result is
// used, with no side effect to take a jitted call off JAX's fast path.
static ffi::Error PassThrough(ffi::AnyBuffer, ffi::Result<ffi::AnyBuffer>) {
  return ffi::Error::Success();
}

XLA_FFI_DEFINE_HANDLER_SYMBOL(JaxDynoffProbePassThrough, PassThrough,
                              ffi::Ffi::Bind()
                                  .Arg<ffi::AnyBuffer>()
                                  .Ret<ffi::AnyBuffer>(),
                              {xla::ffi::Traits::kCmdBufferCompatible});
