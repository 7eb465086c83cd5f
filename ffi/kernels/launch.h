// The interface between the CUDA handler (ffi/cuda/) and the CUTLASS
// instantiations (translation units generated from the kernel catalogue,
// ffi/kernels/catalogue.py).
//
// Every kernel computes, for each batch item l < batch,
//   D_l = cast(alpha * op(A_l) @ op(B_l) + beta * C_l)     (f32 accumulation)
// with the operand addresses read from device pointer arrays (ptr_a[l], ...)
// that the handler's prep kernel wrote: the offsets never reach the host.
// D and C are row-major (m x n) with leading dimensions ldd / ldc.  beta == 0
// means C is not read (ptr_c must still be a valid array of pointers: the
// SM90 epilogue reads the pointer, not the data).
#ifndef JAX_DYNOFF_KERNELS_LAUNCH_H_
#define JAX_DYNOFF_KERNELS_LAUNCH_H_

#include <cuda_runtime_api.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>

#include "gemm_problem.h"  // ClampStart, kMaxRank, SlotRef
#include "plan.h"  // kSm90KernelWorkspace, DirectSplitKWorkspace, SkinnySplit

namespace jax_dynoff {
namespace kernels {

// What every GEMM launch of one call shares: the epilogue's scalars and
// where the kernel runs.
struct LaunchCommon {
  float alpha = 1.f, beta = 0.f;
  void* workspace = nullptr;  // the kernel's own scratch (SM90: descriptors)
  size_t workspace_bytes = 0;
  int device = 0;
  int sm_count = 0;
  cudaStream_t stream = nullptr;
};

struct GemmLaunch : LaunchCommon {
  int m = 0, n = 0, k = 0;  // op(A) is m x k, op(B) is k x n
  int batch = 0;            // items of this launch
  const void* const* ptr_a = nullptr;
  const void* const* ptr_b = nullptr;
  const void* const* ptr_c = nullptr;
  void* const* ptr_d = nullptr;
  // Strides in elements of op(A) (m x k) and op(B) (k x n): element (i, j)
  // of op(A) sits at i * a_row + j * a_col.  A kernel whose layout is fixed
  // reads the one stride that is not 1 (see the kernel's LayoutA/LayoutB).
  int64_t a_row = 0, a_col = 0, b_row = 0, b_col = 0;
  int64_t ldc = 0, ldd = 0;
};

// One dynamic start as the device uses it: read from its XLA buffer (one
// int32 or int64, or an entry of a table at one: SlotRef), clamped as
// lax.dynamic_slice does, times `scale` (bytes for the pointer kernel, rows
// for the direct kernels).
struct StartTerm {
  SlotRef slot;
  int64_t dim, win;           // the array's extent and the window's, there
  int64_t scale;
#if defined(__CUDACC__)
  __device__ __forceinline__ int64_t Scaled() const {
    return ClampStart(slot.Load(0), dim, win) * scale;
  }
#endif
};

// --- Direct SM90 kernels (kernels/sm90_direct.h): no pointer arrays.  The
// TMA descriptors, built on the host, describe each operand's whole buffer,
// seen as `layers` stacked row-major (rows x cols) matrices, from the
// window's first column on; the kernel computes the window's first row and
// layer on the device from the offset scalars, with the same clamping as
// everywhere else, and shifts its TMA tile coordinates by them.  Only row
// and layer offsets can be dynamic (a dynamic column start is never 16-byte
// aligned for a 16-bit type, so those windows never reach an SM90 path).
struct DirectWindow {
  int64_t row0 = 0;           // flat row (layer * rows + row) of the static
                              // starts
  StartTerm term[kMaxRank] = {};  // scale: flat rows per unit of the start
  int32_t terms = 0;
  int32_t rows = 0, cols = 0, layers = 0;  // TMA extents (see above)

#if defined(__CUDACC__)
  // (row, layer) of the window's first element.  Every start is clamped as
  // lax.dynamic_slice does, so the window lies inside the buffer.
  __device__ __forceinline__ int2 Locate() const {
    int64_t r = row0;
    for (int i = 0; i < terms; ++i) r += term[i].Scaled();
    const int64_t layer = r / rows;
    return make_int2(static_cast<int>(r - layer * rows),
                     static_cast<int>(layer));
  }
#endif
};

// One direct GEMM, batch 1: D = cast(alpha * A @ B + beta * C), A (m x k),
// B (k x n), C and D (m x n), all row-major windows.  `base` of each is the
// window's first column at row 0 of layer 0 of its buffer; `ld` the
// buffer's row stride (elements).  beta == 0: C is not read (c must still
// describe a valid buffer; D's does).
struct DirectLaunch : LaunchCommon {
  int m = 0, n = 0, k = 0;
  const void* base_a = nullptr;
  const void* base_b = nullptr;
  const void* base_c = nullptr;
  void* base_d = nullptr;
  int64_t lda = 0, ldb = 0, ldc = 0, ldd = 0;
  DirectWindow a, b, c, d;
  // CTAs per output tile along K: the split-K tile's slices, the
  // cluster-K tile's cluster size; 1 for the other tiles.
  int split_k = 1;
  // The cluster-K tile's output tile width (32 or 64, plan.h
  // ClusterKTileN); 0 for the other tiles.
  int tile_n = 0;
  // The split-K tile's reduction: in a fixed order (the same bits every
  // run), or as the CTAs arrive (KernelOptions(deterministic=False)).
  bool deterministic = true;
};

// --- Skinny kernels (kernels/sm90_skinny.h): m <= 16 * MFrags rows, any
// window (16-byte aligned), located on the device: `base` is the window's
// first element at its static starts, each term adds a clamped dynamic
// start times its stride in bytes.
struct SkinnyOperand {
  const char* base = nullptr;
  int64_t ld = 0;  // elements between the window's rows
  // The count ahead of the terms, and the launch's scalars ahead of its
  // operands: the kernel's first parameter reads then sit together at the
  // block's start (0.1 us a call faster in benchmarks/skinny/phases.cu's
  // stacked chain on an H100, the same elsewhere).
  int32_t terms = 0;
  StartTerm term[kMaxRank] = {};
#if defined(__CUDACC__)
  __device__ __forceinline__ const char* Locate() const {
    int64_t off = 0;
    for (int i = 0; i < terms; ++i) off += term[i].Scaled();
    return base + off;
  }
#endif
};

// One skinny GEMM, batch 1, row-major A (m x k), B (k x n), C and D
// (m x n); beta == 0: C is not read.
struct SkinnyLaunch : LaunchCommon {
  int m = 0, n = 0, k = 0;
  int split_k = 1;  // CTAs (one cluster) sharing each column tile's K
  SkinnyOperand a, b, c, d;
};

struct PreparedLaunch;  // below

struct SkinnyKernelEntry {
  const char* name;
  // Makes the launch (skinny::Prepare, which refuses an m past the rows
  // its fragments cover); the handler's runner launches it and keeps it
  // for a call at the same addresses.
  std::string (*prepare)(const SkinnyLaunch&, PreparedLaunch*);
};

// Runs `prepare` (it sets a kernel's function attributes, which live in the
// function's per-device state: dynamic shared memory above 48 KiB, cluster
// launches, the carveout) once per device, not on every call: those are
// driver calls on the host's critical path when a loop of small GEMMs is
// bound by the host.  One record per `Prepare` type: each call site's
// lambda, in each instantiation of the kernel template around it, has its
// own.  Racing first calls both run `prepare`: it sets the same values.
template <typename Prepare>
cudaError_t OncePerDevice(int device, Prepare prepare) {
  static std::atomic<uint64_t> done{0};  // bit d: device d is prepared
  const uint64_t bit = device >= 0 && device < 64 ? uint64_t{1} << device : 0;
  if (bit != 0 && (done.load(std::memory_order_acquire) & bit))
    return cudaSuccess;
  const cudaError_t e = prepare();
  if (e == cudaSuccess && bit != 0)
    done.fetch_or(bit, std::memory_order_release);
  return e;
}

// A kernel launch made ready on the host: the function, its launch shape
// and its parameters as bytes, so that a handler can keep it and launch it
// again (cudaLaunchKernelExC) for as long as the addresses it was made for
// stay the same, with no CUTLASS set-up in between.  4 KiB: CUDA's classic
// kernel parameter limit.
inline constexpr size_t kMaxParamBytes = 4096;
struct PreparedLaunch {
  const void* fn = nullptr;
  dim3 grid, block, cluster;
  unsigned smem = 0;
  // A programmatic dependent launch (PDL): the kernel may start while the
  // kernel before it on the stream finishes, because it runs
  // griddepcontrol.wait before its first global memory access.  The
  // small-group kernels set it: the grouped pointer kernel before them
  // lets them launch as soon as all its blocks have started
  // (griddepcontrol.launch_dependents), so their launch and prologue
  // overlap its tail.
  bool programmatic = false;
  size_t param_bytes = 0;
  alignas(64) unsigned char params[kMaxParamBytes];
};

// Launches `l` on `stream`; "" or an error.  A cluster of more than one
// CTA goes with the launch as its attribute.  A cluster of one goes
// without any: a plain launch, every CTA its own implicit cluster, as
// CUTLASS's adapter launches its static 1x1x1 kernels.  The attribute
// alone, cluster dimensions 1 x 1 x 1, made the narrow skinny tile at
// 8x4096x4096 (256 CTAs of 96 KiB, two an SM) take 17.2 us against 12.4
// without it; elsewhere it cost 0-0.2 us (benchmarks/skinny/probe.cu
// --launchform, H100, benchmarks/results/2026-12-06-h100-f38a9e2/).
inline std::string LaunchPrepared(const PreparedLaunch& l,
                                  cudaStream_t stream) {
  cudaLaunchAttribute attr[2];
  unsigned attrs = 0;
  if (l.cluster.x * l.cluster.y * l.cluster.z > 1) {
    attr[attrs].id = cudaLaunchAttributeClusterDimension;
    attr[attrs].val.clusterDim.x = l.cluster.x;
    attr[attrs].val.clusterDim.y = l.cluster.y;
    attr[attrs].val.clusterDim.z = l.cluster.z;
    ++attrs;
  }
  if (l.programmatic) {
    attr[attrs].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[attrs].val.programmaticStreamSerializationAllowed = 1;
    ++attrs;
  }
  cudaLaunchConfig_t config = {};
  config.gridDim = l.grid;
  config.blockDim = l.block;
  config.dynamicSmemBytes = l.smem;
  config.stream = stream;
  config.attrs = attr;
  config.numAttrs = attrs;
  void* params[] = {const_cast<unsigned char*>(l.params)};
  const cudaError_t e = cudaLaunchKernelExC(&config, l.fn, params);
  return e == cudaSuccess ? "" : std::string("launch: ") + cudaGetErrorString(e);
}

struct DirectKernelEntry {
  const char* name;
  size_t (*workspace)(const DirectLaunch&);
  std::string (*run)(const DirectLaunch&);
  // Makes the launch `run` would make, without launching it; nullptr where
  // every call needs device-side set-up first (the split-K tile's memset).
  std::string (*prepare)(const DirectLaunch&, PreparedLaunch*);
};

// --- Grouped SM90 kernel (kernels/sm90_grouped.h): one launch over
// `groups` items whose problem shapes (m, n, k: cute::Shape<int, int, int>,
// kGroupedShapeBytes each), operand addresses and strides (one int64 each,
// kGroupedStrideBytes) live in device memory, written by the handler's
// grouped pointer kernel; the kernel's scheduler reads the shapes there and
// never schedules a tile past an item's extents.
struct GroupedLaunch : LaunchCommon {
  int groups = 0;
  // Bounds of every item's m and n (the call's static m and n): the
  // small-group kernels size their grids by them (kernels/
  // small_group_grad.h, small_group_fwd.h); CUTLASS's scheduler reads the
  // shapes.
  int m = 0, n = 0;
  const void* shapes = nullptr;
  const void* const* ptr_a = nullptr;
  const void* const* ptr_b = nullptr;
  const void* const* ptr_c = nullptr;
  void* const* ptr_d = nullptr;
  const void* stride_a = nullptr;
  const void* stride_b = nullptr;
  const void* stride_c = nullptr;
  const void* stride_d = nullptr;
};

// A grouped launch's device arrays as the small-group kernels read them
// (kernels/small_group_grad.h, small_group_fwd.h), typed as the pointer
// kernel writes them (per item: m, n, k as int32; leading dimensions as
// int64), and alpha: the part of those kernels' parameters they share.
struct GroupedArrays {
  int groups = 0;
  const int32_t* shapes = nullptr;  // per item: m, n, k
  const void* const* ptr_a = nullptr;
  const void* const* ptr_b = nullptr;
  void* const* ptr_d = nullptr;
  const int64_t* stride_a = nullptr;  // per item: leading dimensions
  const int64_t* stride_b = nullptr;
  const int64_t* stride_d = nullptr;
  float alpha = 1.f;
};

inline GroupedArrays GroupedArraysOf(const GroupedLaunch& l) {
  GroupedArrays g;
  g.groups = l.groups;
  g.shapes = static_cast<const int32_t*>(l.shapes);
  g.ptr_a = l.ptr_a;
  g.ptr_b = l.ptr_b;
  g.ptr_d = l.ptr_d;
  g.stride_a = static_cast<const int64_t*>(l.stride_a);
  g.stride_b = static_cast<const int64_t*>(l.stride_b);
  g.stride_d = static_cast<const int64_t*>(l.stride_d);
  g.alpha = l.alpha;
  return g;
}

struct GroupedKernelEntry {
  const char* name;
  size_t (*workspace)(const GroupedLaunch&);
  std::string (*run)(const GroupedLaunch&);
  // Makes the launch `run` would make, without launching it: its
  // parameters hold only the device arrays' addresses, so one prepared
  // launch serves every call on the same workspace.
  std::string (*prepare)(const GroupedLaunch&, PreparedLaunch*);
};

// One compiled kernel.  `workspace` returns the bytes `run` needs in
// GemmLaunch::workspace for this launch (0 for the generic kernels); `run`
// enqueues the kernel on launch.stream and returns "" or an error message.
struct KernelEntry {
  const char* name;
  size_t (*workspace)(const GemmLaunch&);
  std::string (*run)(const GemmLaunch&);
};

// The kernels, entries of the types above, are the lines of the kernel
// catalogue (ffi/kernels/catalogue.py); kernels/catalogue_entries.h,
// generated from it, declares them for the registry.

}  // namespace kernels
}  // namespace jax_dynoff

#endif  // JAX_DYNOFF_KERNELS_LAUNCH_H_
