// One runner per kernel family: each turns a call's PrepParams (its
// problem, buffers and start sources) into the launches of that family,
// enqueued on the call's stream.  The handler (ffi/cuda/handler.cu) picks
// the family and the kernel (ffi/cuda/registry.h); the small kernels
// around the GEMMs are in ffi/cuda/prep_kernels.cu.
#ifndef JAX_DYNOFF_CUDA_RUNNERS_H_
#define JAX_DYNOFF_CUDA_RUNNERS_H_

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <string>

#include "cuda/prep.h"
#include "kernels/launch.h"
#include "plan.h"  // WorkspaceLayout
#include "xla/ffi/api/ffi.h"

namespace jax_dynoff {
namespace cuda {

namespace ffi = xla::ffi;

inline ffi::Error CudaError(const char* what, cudaError_t e) {
  return ffi::Error::Internal(std::string("jax_dynoff_gemm: ") + what + ": " +
                              cudaGetErrorName(e) + ": " +
                              cudaGetErrorString(e));
}

// Checks the kernel's workspace against what the plan reserved, then
// enqueues it; errors name the kernel.  Entry: KernelEntry (GemmLaunch) or
// DirectKernelEntry (DirectLaunch).
template <typename Entry, typename Launch>
inline ffi::Error RunKernel(const Entry* kernel, const Launch& l) {
  if (kernel->workspace(l) > l.workspace_bytes)
    return ffi::Error::Internal(
        std::string("jax_dynoff_gemm: ") + kernel->name + " needs " +
        std::to_string(kernel->workspace(l)) + " workspace bytes, " +
        std::to_string(l.workspace_bytes) + " reserved");
  const std::string r = kernel->run(l);
  if (!r.empty())
    return ffi::Error::Internal(std::string("jax_dynoff_gemm: ") +
                                kernel->name + ": " + r);
  return ffi::Error::Success();
}

// Copies the part of a prepared launch in use: its parameters, not the
// whole 4 KiB buffer.
inline void CopyPrepared(kernels::PreparedLaunch* dst,
                         const kernels::PreparedLaunch& src) {
  std::memcpy(dst, &src,
              offsetof(kernels::PreparedLaunch, params) + src.param_bytes);
}

// Direct kernel launches made ready for the buffer and start addresses
// seen last (kernels::PreparedLaunch): the TMA descriptors cover the whole
// buffers and the windows are located on the device, so one launch serves
// every start value.  XLA instantiates a program once per process, not per
// device, and may run it on several devices (or streams) at once: the
// launches are keyed by kernel, device and addresses, and guarded by a
// mutex held only to look one up or store it.
struct PreparedLaunchCache {
  struct Key {
    const void* kernel = nullptr;
    int device = -1;
    // A, B, C, D, the workspace, then each slot's value and table.
    static constexpr int kMaxAddrs = 5 + 2 * kMaxSlots;
    const void* addr[kMaxAddrs] = {};
    int addrs = 0;
    bool operator==(const Key& o) const {
      if (kernel != o.kernel || device != o.device || addrs != o.addrs)
        return false;
      for (int i = 0; i < addrs; ++i)
        if (addr[i] != o.addr[i]) return false;
      return true;
    }
  };
  // A handful of address sets per instance: a loop body alternates between
  // at most a few (double-buffered carries), and more devices than slots
  // only cost a re-preparation.
  static constexpr int kSlots = 4;
  std::mutex mu;
  Key keys[kSlots];
  kernels::PreparedLaunch launches[kSlots];
  int next = 0;

  bool Find(const Key& k, kernels::PreparedLaunch* out) {
    std::lock_guard<std::mutex> lock(mu);
    for (int i = 0; i < kSlots; ++i)
      if (keys[i].kernel != nullptr && keys[i] == k) {
        CopyPrepared(out, launches[i]);
        return true;
      }
    return false;
  }
  void Store(const Key& k, const kernels::PreparedLaunch& l) {
    std::lock_guard<std::mutex> lock(mu);
    keys[next] = k;
    CopyPrepared(&launches[next], l);
    next = (next + 1) % kSlots;
  }
};

// Launches `kernel` for `l` through the launch made ready for `key`: found
// in `cache`, or prepared (after RunKernel's workspace check) and stored.
// Entry: DirectKernelEntry or GroupedKernelEntry (a `prepare` member).
// `launched` (if not null) receives the launch made.
template <typename Entry, typename Launch>
inline ffi::Error RunPrepared(const Entry* kernel, const Launch& l,
                              const PreparedLaunchCache::Key& key,
                              PreparedLaunchCache* cache,
                              kernels::PreparedLaunch* launched = nullptr) {
  kernels::PreparedLaunch ready;
  if (!cache->Find(key, &ready)) {
    if (kernel->workspace(l) > l.workspace_bytes)
      return RunKernel(kernel, l);  // the error message
    const std::string r = kernel->prepare(l, &ready);
    if (!r.empty())
      return ffi::Error::Internal(std::string("jax_dynoff_gemm: ") +
                                  kernel->name + ": " + r);
    cache->Store(key, ready);
  }
  const std::string r = kernels::LaunchPrepared(ready, l.stream);
  if (!r.empty())
    return ffi::Error::Internal(std::string("jax_dynoff_gemm: ") +
                                kernel->name + ": " + r);
  if (launched != nullptr) CopyPrepared(launched, ready);
  return ffi::Error::Success();
}

// The skinny kernel: one launch, nothing before it, no workspace; `split`
// CTAs (one cluster) share each column tile's K.  `launched` (if not null)
// receives the launch made, for the handler's repeat cache.
ffi::Error RunSkinny(const kernels::SkinnyKernelEntry* kernel,
                     const kernels::LaunchCommon& common,
                     const PrepParams& P, int split,
                     kernels::PreparedLaunch* launched = nullptr);

// A direct SM90 kernel: one launch, nothing before it, made ready once per
// kernel, device and addresses where the kernel can be (`cache`);
// `split_k` CTAs per output tile along K (the split-K tile's slices, the
// cluster-K tile's cluster size, else 1), the cluster-K tile's width
// (`tile_n`, else 0), and the split-K tile's reduction order.  `launched`
// receives the launch where it was a prepared one (fn stays null else).
ffi::Error RunDirect(const kernels::DirectKernelEntry* kernel,
                     const kernels::LaunchCommon& common,
                     const PrepParams& P, int split_k, int tile_n,
                     bool deterministic, PreparedLaunchCache* cache,
                     kernels::PreparedLaunch* launched);

// The grouped path (ragged windows): (1g) the pointer kernel writes every
// item's pointers, problem shape and strides into the workspace (P.ptrs,
// P.shapes, P.strides) and the zeros of D's valid parts that no product
// covers, then one grouped GEMM reads them.  The GEMM's launch holds only
// workspace addresses: made ready once per kernel, device and workspace
// (`cache`) and replayed.
ffi::Error RunGrouped(const kernels::GroupedKernelEntry* kernel,
                      const kernels::LaunchCommon& common,
                      const PrepParams& P, PreparedLaunchCache* cache);

// The ptr-array path: (1) the pointer arrays, (2) the C copies, then (3a)
// D = beta * C where k == 0, or (3) the GEMM `kernel` over the pointer
// arrays, split-K's slices and (4) reduction where `split`.  The CUTLASS
// 2.x kernels (generic, TF32; `grid_z_batch`) take at most 65535 items a
// launch.  `staging` (the SM90 TF32 kernels, plan.h StagingOf; nullptr:
// none): the operands it names are staged K-major into the workspace
// (kernels/sm90_tf32.h) between (2) and (3), and the GEMM reads them there.
ffi::Error RunPtrArray(const kernels::KernelEntry* kernel, bool grid_z_batch,
                       bool split, const kernels::LaunchCommon& common,
                       const PrepParams& P, const WorkspaceLayout& w,
                       const Tf32Staging* staging = nullptr);

}  // namespace cuda
}  // namespace jax_dynoff

#endif  // JAX_DYNOFF_CUDA_RUNNERS_H_
