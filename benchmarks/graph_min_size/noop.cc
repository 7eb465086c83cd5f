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
