// The runners, one per kernel family (see runners.h).
#include "cuda/runners.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "kernels/sm90_tf32.h"

namespace jax_dynoff {
namespace cuda {
namespace {

using kernels::GemmLaunch;
using kernels::KernelEntry;

// The matrices an operand's array stacks (the product of its leading dims).
int64_t Layers(const OperandDesc& op) {
  int64_t layers = 1;
  for (int i = 0; i + 2 < op.rank; ++i) layers *= op.dims[i];
  return layers;
}

// Operand o's window as the direct kernel sees it; *base becomes the
// window's first column at row 0 of layer 0.
kernels::DirectWindow MakeDirectWindow(const PrepParams& P, int o,
                                       const char** base) {
  const OperandDesc& op = P.p.op[o];
  const int r = op.rank;
  const int64_t ld = op.strides[r - 2];
  kernels::DirectWindow w;
  const int64_t col0 = op.static_offset % ld;
  w.row0 = op.static_offset / ld;
  w.rows = static_cast<int32_t>(op.dims[r - 2]);
  w.cols = static_cast<int32_t>(op.dims[r - 1] - col0);
  w.layers = static_cast<int32_t>(Layers(op));
  for (int i = 0; i < r; ++i)
    if (op.start_arg[i] >= 0 && op.win[i] != op.dims[i])
      w.term[w.terms++] = DynamicStart(P, op, i, op.strides[i] / ld);
  *base = P.base[o] + col0 * P.elt[o];
  return w;
}

// Operand o's window as the skinny kernel locates it: its address at the
// static starts plus each dynamic start's clamped value times its stride.
kernels::SkinnyOperand MakeSkinnyOperand(const PrepParams& P, int o) {
  const OperandDesc& op = P.p.op[o];
  kernels::SkinnyOperand s;
  s.base = P.base[o] + op.static_offset * P.elt[o];
  s.ld = op.ld();
  for (int i = 0; i < op.rank; ++i)
    if (op.start_arg[i] >= 0)
      s.term[s.terms++] = DynamicStart(P, op, i, op.strides[i] * P.elt[o]);
  return s;
}

// (3) the slice GEMMs into the float32 partials, (4) the reduction into D.
ffi::Error SplitKGemm(const kernels::LaunchCommon& common,
                      const GemmProblem& p, const PrepParams& P,
                      const KernelEntry* kernel) {
  const cudaStream_t stream = common.stream;
  const int64_t S = P.slices, items = p.batch * S;
  GemmLaunch l;
  static_cast<kernels::LaunchCommon&>(l) = common;
  l.m = static_cast<int>(p.m);
  l.n = static_cast<int>(p.n);
  l.k = static_cast<int>(p.k / S);
  l.batch = static_cast<int>(items);
  l.a_row = p.op[kA].ld();  // A row-major m x k
  l.a_col = 1;
  l.b_row = p.op[kB].ld();  // B row-major k x n
  l.b_col = 1;
  l.ldc = l.ldd = p.n;      // the partials
  l.alpha = 1.f;
  l.beta = 0.f;             // sourceless epilogue
  l.ptr_a = P.ptrs;
  l.ptr_b = P.ptrs + items;
  l.ptr_c = P.ptrs + 2 * items;
  l.ptr_d = const_cast<void* const*>(P.ptrs + 3 * items);
  if (ffi::Error err = RunKernel(kernel, l); err.failure()) return err;
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) return CudaError("split-K GEMM launch", e);

  ReduceParams R;
  R.partials = P.partials;
  R.partial_item = P.partial_item;
  R.slices = S;
  R.m = p.m;
  R.n = p.n;
  R.batch = p.batch;
  R.ldd = p.op[kD].ld();
  R.ldc = p.op[kC].present ? p.op[kC].ld() : R.ldd;
  R.c = P.ptrs + 4 * items;
  R.d = P.ptrs + 4 * items + p.batch;
  R.alpha = common.alpha;
  R.beta = P.c_read ? static_cast<float>(p.beta) : 0.f;
  R.c_read = P.c_read;
  if ((e = LaunchSplitKReduce(R, p.out_dtype, stream)) != cudaSuccess)
    return CudaError("split-K reduction launch", e);
  return ffi::Error::Success();
}

}  // namespace

ffi::Error RunSkinny(const kernels::SkinnyKernelEntry* kernel,
                     const kernels::LaunchCommon& common,
                     const PrepParams& P, int split,
                     kernels::PreparedLaunch* launched) {
  const GemmProblem& p = P.p;
  kernels::SkinnyLaunch l;
  static_cast<kernels::LaunchCommon&>(l) = common;
  l.workspace = nullptr;
  l.workspace_bytes = 0;
  l.m = static_cast<int>(p.m);
  l.n = static_cast<int>(p.n);
  l.k = static_cast<int>(p.k);
  l.a = MakeSkinnyOperand(P, kA);
  l.b = MakeSkinnyOperand(P, kB);
  l.d = MakeSkinnyOperand(P, kD);
  // Without a C read, D stands in (beta = 0: never loaded).
  l.c = P.c_read ? MakeSkinnyOperand(P, kC) : l.d;
  l.split_k = split;
  kernels::PreparedLaunch ready;
  std::string r = kernel->prepare(l, &ready);
  if (r.empty()) r = kernels::LaunchPrepared(ready, common.stream);
  if (!r.empty())
    return ffi::Error::Internal(std::string("jax_dynoff_gemm: ") +
                                kernel->name + ": " + r);
  if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess)
    return CudaError("skinny GEMM launch", e);
  if (launched != nullptr) CopyPrepared(launched, ready);
  return ffi::Error::Success();
}

ffi::Error RunDirect(const kernels::DirectKernelEntry* kernel,
                     const kernels::LaunchCommon& common,
                     const PrepParams& P, int split_k, int tile_n,
                     bool deterministic, PreparedLaunchCache* cache,
                     kernels::PreparedLaunch* launched) {
  const GemmProblem& p = P.p;
  kernels::DirectLaunch l;
  static_cast<kernels::LaunchCommon&>(l) = common;
  l.m = static_cast<int>(p.m);
  l.n = static_cast<int>(p.n);
  l.k = static_cast<int>(p.k);
  const char *a, *b, *c, *d;
  l.a = MakeDirectWindow(P, kA, &a);
  l.b = MakeDirectWindow(P, kB, &b);
  l.d = MakeDirectWindow(P, kD, &d);
  // Without a C read, D's window stands in (beta = 0: never loaded).
  l.c = P.c_read ? MakeDirectWindow(P, kC, &c) : l.d;
  if (!P.c_read) c = d;
  l.base_a = a;
  l.base_b = b;
  l.base_c = c;
  l.base_d = const_cast<char*>(d);
  l.lda = p.op[kA].ld();
  l.ldb = p.op[kB].ld();
  l.ldd = p.op[kD].ld();
  l.ldc = P.c_read ? p.op[kC].ld() : l.ldd;
  l.split_k = split_k;
  l.tile_n = tile_n;
  l.deterministic = deterministic;
  if (kernel->prepare != nullptr) {
    PreparedLaunchCache::Key key;
    key.kernel = kernel;
    key.device = common.device;
    for (const void* x : {static_cast<const void*>(a),
                          static_cast<const void*>(b),
                          static_cast<const void*>(c),
                          static_cast<const void*>(d),
                          static_cast<const void*>(common.workspace)})
      key.addr[key.addrs++] = x;
    for (int64_t j = 0; j < p.num_slots; ++j) {
      key.addr[key.addrs++] = P.slots[j].value;
      key.addr[key.addrs++] = P.slots[j].table;
    }
    if (ffi::Error err = RunPrepared(kernel, l, key, cache, launched);
        err.failure())
      return err;
  } else if (ffi::Error err = RunKernel(kernel, l); err.failure()) {
    return err;
  }
  if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess)
    return CudaError("direct GEMM launch", e);
  return ffi::Error::Success();
}

ffi::Error RunGrouped(const kernels::GroupedKernelEntry* kernel,
                      const kernels::LaunchCommon& common,
                      const PrepParams& P, PreparedLaunchCache* cache) {
  const GemmProblem& p = P.p;
  cudaError_t e;
  if ((e = LaunchGroupedPointers(P, common.stream)) != cudaSuccess)
    return CudaError("grouped pointer kernel launch", e);
  kernels::GroupedLaunch l;
  static_cast<kernels::LaunchCommon&>(l) = common;
  l.groups = static_cast<int>(p.batch);
  l.m = static_cast<int>(p.m);
  l.n = static_cast<int>(p.n);
  l.shapes = P.shapes;
  l.ptr_a = P.ptrs;
  l.ptr_b = P.ptrs + p.batch;
  l.ptr_c = P.ptrs + 2 * p.batch;
  l.ptr_d = const_cast<void* const*>(P.ptrs + 3 * p.batch);
  l.stride_a = P.strides;
  l.stride_b = P.strides + p.batch;
  l.stride_c = P.strides + 2 * p.batch;
  l.stride_d = P.strides + 3 * p.batch;
  PreparedLaunchCache::Key key;
  key.kernel = kernel;
  key.device = common.device;
  key.addr[key.addrs++] = common.workspace;
  key.addr[key.addrs++] = P.ptrs;
  if (ffi::Error err = RunPrepared(kernel, l, key, cache); err.failure())
    return err;
  if ((e = cudaGetLastError()) != cudaSuccess)
    return CudaError("grouped GEMM launch", e);
  return ffi::Error::Success();
}

ffi::Error RunPtrArray(const KernelEntry* kernel, bool grid_z_batch,
                       bool split, const kernels::LaunchCommon& common,
                       const PrepParams& P, const WorkspaceLayout& w,
                       const Tf32Staging* staging) {
  const GemmProblem& p = P.p;
  const cudaStream_t stream = common.stream;
  cudaError_t e;
  // (1) pointer arrays, (2) C copies.
  if ((e = LaunchPointers(P, split, stream)) != cudaSuccess)
    return CudaError("pointer kernel launch", e);
  if (w.scratch_item > 0 && (e = LaunchCopyC(P, stream)) != cudaSuccess)
    return CudaError("C copy kernel launch", e);

  const int64_t ldd = p.op[kD].ld();
  const int64_t ldc = p.op[kC].present ? p.op[kC].ld() : ldd;
  // (3a) k == 0: no product, D = beta * C.
  if (p.k == 0) {
    if ((e = LaunchScale(P, ldc, ldd, static_cast<float>(p.beta), stream)) !=
        cudaSuccess)
      return CudaError("k=0 kernel launch", e);
    return ffi::Error::Success();
  }

  // (3) the GEMM.
  if (split) return SplitKGemm(common, p, P, kernel);
  GemmLaunch l;
  static_cast<kernels::LaunchCommon&>(l) = common;
  l.m = static_cast<int>(p.m);
  l.n = static_cast<int>(p.n);
  l.k = static_cast<int>(p.k);
  const int64_t lda = p.op[kA].ld(), ldb = p.op[kB].ld();
  l.a_row = p.trans_a ? 1 : lda;
  l.a_col = p.trans_a ? lda : 1;
  l.b_row = p.trans_b ? 1 : ldb;
  l.b_col = p.trans_b ? ldb : 1;
  l.ldc = ldc;
  l.ldd = ldd;
  const void** ptrs = P.ptrs;
  // The pointer arrays the GEMM reads for A and B: the windows', or the
  // staged copies' (3b).
  const void* const* gemm_a = ptrs;
  const void* const* gemm_b = ptrs + p.batch;
  if (staging != nullptr && (staging->a || staging->b)) {
    // (3b) MN-major operands (every operand at HIGHEST, split into TF32
    // parts) copied K-major into the workspace.
    char* ws = static_cast<char*>(common.workspace);
    void** stage_ptrs = reinterpret_cast<void**>(ws + w.stage_ptrs);
    // One operand, `rows` x K read at (row_stride, k_stride), written as
    // rows x staging->k K-major; its pointer array follows at `slot`.
    // lo_part: which third of the staged K holds the low TF32 part (A's
    // [hi | lo | hi] against B's [hi | hi | lo] pairs hi*lo and lo*hi).
    const auto stage = [&](int slot, int64_t rows, int64_t row_stride,
                           int64_t k_stride, size_t offset, size_t item,
                           int lo_part) {
      kernels::Tf32StageParams s;
      s.k = p.k;
      s.ld = staging->k;
      s.batch = p.batch;
      s.parts = static_cast<int>(staging->parts);
      s.src = ptrs + slot * p.batch;
      s.dst_ptrs = stage_ptrs + slot * p.batch;
      s.dst = ws + offset;
      s.item_bytes = item;
      s.rows = rows;
      s.row_stride = row_stride;
      s.k_stride = k_stride;
      s.lo_part = lo_part;
      return kernels::LaunchTf32Stage(s, stream);
    };
    if (staging->a) {  // op(A) (i, q) at i * a_row + q * a_col
      if ((e = stage(0, p.m, l.a_row, l.a_col, w.stage_a, w.stage_a_item,
                     1)) != cudaSuccess)
        return CudaError("TF32 staging (A) launch", e);
      gemm_a = stage_ptrs;
      l.a_row = staging->k;
      l.a_col = 1;
    }
    if (staging->b) {  // op(B) (q, j) at q * b_row + j * b_col
      if ((e = stage(1, p.n, l.b_col, l.b_row, w.stage_b, w.stage_b_item,
                     2)) != cudaSuccess)
        return CudaError("TF32 staging (B) launch", e);
      gemm_b = stage_ptrs + p.batch;
      l.b_row = 1;  // stored n x K: K-major
      l.b_col = staging->k;
    }
    l.k = static_cast<int>(staging->k);
  }
  const int64_t chunk = grid_z_batch ? 65535 : p.batch;
  for (int64_t t0 = 0; t0 < p.batch; t0 += chunk) {
    const int64_t nb = std::min(chunk, p.batch - t0);
    l.batch = static_cast<int>(nb);
    l.ptr_a = gemm_a + t0;
    l.ptr_b = gemm_b + t0;
    l.ptr_c = ptrs + 2 * p.batch + t0;
    l.ptr_d = const_cast<void* const*>(ptrs + 3 * p.batch + t0);
    if (ffi::Error err = RunKernel(kernel, l); err.failure()) return err;
  }
  if ((e = cudaGetLastError()) != cudaSuccess)
    return CudaError("GEMM launch", e);
  return ffi::Error::Success();
}

}  // namespace cuda
}  // namespace jax_dynoff
