// The graph pad: an FFI call with nothing to do, so that a loop body of
// one or two jax_dynoff calls reaches XLA's minimum command-buffer size.
//
// At XLA's default flags a run of thunks becomes a CUDA graph only from
// xla_gpu_graph_min_graph_size (5) thunks up.  A `fori_loop` body of one
// gemm is two thunks, the call and XLA's counter, so XLA launches them one
// by one from the host every iteration while its own loop (five thunks
// with its slice copies) is one graph launch; a `lax.cond` outside a graph
// even copies its predicate to the host every step.  jax_dynoff/graph_pads.py
// puts a few of these after each call bound at a loop body's top level.
// Each passes the call's result through, aliased (its result is
// its operand's buffer), so XLA keeps it without a side effect (which
// would take a jitted function off JAX's fast dispatch path), it moves no
// byte and launches nothing: captured, it is an empty node.
#include "handlers.h"
#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

namespace jax_dynoff {
namespace {

ffi::Error GraphPad(ffi::AnyBuffer, ffi::Result<ffi::AnyBuffer>) {
  return ffi::Error::Success();  // the result is the operand's buffer
}

}  // namespace

XLA_FFI_DEFINE_HANDLER_SYMBOL(kGraphPad, GraphPad,
                              ffi::Ffi::Bind()
                                  .Arg<ffi::AnyBuffer>()
                                  .Ret<ffi::AnyBuffer>(),
                              {ffi::Traits::kCmdBufferCompatible});

XLA_FFI_Handler* GraphPadHandler() { return kGraphPad; }

}  // namespace jax_dynoff
