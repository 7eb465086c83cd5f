// The small kernels around the CUTLASS GEMMs (see prep.h).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "cuda/prep.h"
#include "kernels/pdl.h"
#include "plan.h"  // RoundUp

namespace jax_dynoff {
namespace cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kReduceThreads = 128;

__device__ int64_t Offset(const PrepParams& P, int o, int64_t t) {
  return WindowOffset(P.p, P.p.op[o], t, P.slots);
}

// Clamped start of operand o along dim i for batch item t.
__device__ int64_t Start(const PrepParams& P, int o, int i, int64_t t) {
  return WindowStart(P.p.op[o], i, t, P.slots);
}

// Whether item t's C window (read from D's buffer) must be copied first:
// it overlaps D's window without being it.  Same window: every element is
// read and then written by the same thread (in place is safe); disjoint
// windows: nothing C reads is written.
__device__ bool NeedsCopy(const PrepParams& P, int64_t t) {
  if (P.p.c_mode != CMode::kFromD || !P.c_read) return false;
  if (Offset(P, kC, t) == Offset(P, kD, t)) return false;
  const OperandDesc& C = P.p.op[kC];
  for (int i = 0; i < C.rank; ++i) {
    const int64_t c = Start(P, kC, i, t), d = Start(P, kD, i, t);
    const int64_t wc = C.win[i], wd = P.p.op[kD].win[i];
    if (c + wc <= d || d + wd <= c) return false;  // disjoint along dim i
  }
  return true;
}

// Item t's D window and the C it reads (its copy when it must be copied).
__device__ void CAndD(const PrepParams& P, int64_t t, const char** c,
                      const char** d) {
  *d = P.base[kD] + Offset(P, kD, t) * P.elt[kD];
  *c = *d;  // never read when !c_read, but a valid address
  if (P.c_read) {
    *c = NeedsCopy(P, t) ? P.scratch + t * P.scratch_item
                         : P.base[kC] + Offset(P, kC, t) * P.elt[kC];
  }
}

__global__ void PointerKernel(const __grid_constant__ PrepParams P) {
  const int64_t batch = P.p.batch;
  for (int64_t t = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; t < batch;
       t += int64_t{gridDim.x} * blockDim.x) {
    const char* a = P.base[kA] + Offset(P, kA, t) * P.elt[kA];
    const char* b = P.base[kB] + Offset(P, kB, t) * P.elt[kB];
    const char *c, *d;
    CAndD(P, t, &c, &d);
    P.ptrs[t] = a;
    P.ptrs[batch + t] = b;
    P.ptrs[2 * batch + t] = c;
    P.ptrs[3 * batch + t] = d;
  }
}

__global__ void PointerKernel1(const __grid_constant__ Prep1Params P) {
  __shared__ unsigned long long add[kNumOperands];  // byte offsets, mod 2^64
  if (threadIdx.x < kNumOperands) add[threadIdx.x] = 0;
  __syncthreads();
  if (threadIdx.x < P.terms) {
    const Prep1Params::Term& t = P.term[threadIdx.x];
    atomicAdd(&add[t.operand],
              static_cast<unsigned long long>(t.start.Scaled()));
  }
  __syncthreads();
  if (threadIdx.x != 0) return;
  const char* d = P.base[kD] + add[kD];
  P.ptrs[0] = P.base[kA] + add[kA];
  P.ptrs[1] = P.base[kB] + add[kB];
  P.ptrs[2] = P.c_read ? P.base[kC] + add[kC] : d;
  P.ptrs[3] = d;
}

// Split-K: item l = t * slices + s multiplies A's and B's K slice s of batch
// item t into partial l; the reduction reads C[t] and D[t] from the tail.
__global__ void SplitPointerKernel(const __grid_constant__ PrepParams P) {
  const int64_t batch = P.p.batch, S = P.slices, items = batch * S;
  for (int64_t l = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; l < items;
       l += int64_t{gridDim.x} * blockDim.x) {
    const int64_t t = l / S, s = l - t * S;
    P.ptrs[l] = P.base[kA] + Offset(P, kA, t) * P.elt[kA] + s * P.a_slice_bytes;
    P.ptrs[items + l] =
        P.base[kB] + Offset(P, kB, t) * P.elt[kB] + s * P.b_slice_bytes;
    const char* part = P.partials + l * P.partial_item;
    P.ptrs[2 * items + l] = part;  // the GEMM's C: sourceless, never read
    P.ptrs[3 * items + l] = part;
    if (s == 0) {
      const char *c, *d;
      CAndD(P, t, &c, &d);
      P.ptrs[4 * items + t] = c;
      P.ptrs[4 * items + batch + t] = d;
    }
  }
}

// The grouped path.  Item t's product, D's valid part and the zeros the
// product does not cover: plan.h GroupedItemOf.  Block (0, y) thread 0
// writes the item's pointers, shape and strides; every block of the item
// shares the zeros.
// Zeros over bytes [lo, hi) of one row (whole elements of `elt` bytes),
// by the `width` threads of which this is number `lane`: 16-byte stores
// over the aligned middle, the ends an element a thread.  (A weight
// gradient's expert without rows is a whole K x N of zeros: one element a
// thread, with a 64-bit division each, took milliseconds of a skewed
// decode backward.)
__device__ void ZeroSpan(char* lo, char* hi, int elt, int lane, int width) {
  const auto at = [](const char* x) { return reinterpret_cast<uintptr_t>(x); };
  char* lo16 = reinterpret_cast<char*>((at(lo) + 15) & ~uintptr_t{15});
  char* hi16 = reinterpret_cast<char*>(at(hi) & ~uintptr_t{15});
  const auto zero = [elt](char* e) {
    if (elt == 2)
      *reinterpret_cast<uint16_t*>(e) = 0;
    else
      *reinterpret_cast<uint32_t*>(e) = 0;
  };
  if (lo16 >= hi16) {  // no whole aligned 16 bytes
    for (char* e = lo + int64_t{lane} * elt; e < hi; e += int64_t{width} * elt)
      zero(e);
    return;
  }
  // The ends: fewer than 16 bytes each (16 is a multiple of elt).
  const int64_t head = (lo16 - lo) / elt, tail = (hi - hi16) / elt;
  if (lane < head) zero(lo + int64_t{lane} * elt);
  if (lane < tail) zero(hi16 + int64_t{lane} * elt);
  uint4* v = reinterpret_cast<uint4*>(lo16);
  const int64_t chunks = (hi16 - lo16) / 16;
  for (int64_t i = lane; i < chunks; i += width) v[i] = make_uint4(0, 0, 0, 0);
}

// A fresh D (PlannedKernel::fresh_out: the call has no `out`, ret 0 is
// uninitialised): its rows that no item's window covers, zeroed.  The
// windows are full-width row ranges of one 2-D D (FreshOutReasons), in any
// order, overlapping or not.  The grid's `blocks` zero blocks (block is
// this one's index among them) split D's rows into equal spans; each
// block marks, a bit a row, the rows of its span that some item's valid
// rows cover (every item read once, a thread an item: the items' extents
// and starts are on the device, so a graph replays this with new group
// sizes), then zeroes the unmarked rows, a row a warp, in spans of
// kMarkRows.  Stores only where rows are uncovered: groups that cover
// every row cost the marking alone.  Disjoint from every window, so the
// order against the item zeros and the GEMM does not matter.
constexpr int kMarkRows = 32 * kThreads;  // one bit a row: 1 KiB of marks

__device__ void ZeroUncoveredRows(const PrepParams& P, int64_t block,
                                  int64_t blocks) {
  __shared__ uint32_t marks[kMarkRows / 32];
  const GemmProblem& p = P.p;
  const OperandDesc& D = p.op[kD];
  const int64_t rows = D.dims[0];
  const int64_t per_block = (rows + blocks - 1) / blocks;
  const int64_t lo = block * per_block;
  const int64_t hi = std::min<int64_t>(rows, lo + per_block);
  const int elt = P.elt[kD];
  const int64_t row_bytes = D.ld() * elt;
  char* d = const_cast<char*>(P.base[kD]);
  const int warps = static_cast<int>(blockDim.x) / 32;
  const int warp = static_cast<int>(threadIdx.x) / 32;
  const int lane = static_cast<int>(threadIdx.x) % 32;
  for (int64_t r0 = lo; r0 < hi; r0 += kMarkRows) {
    const int64_t r1 = std::min<int64_t>(hi, r0 + kMarkRows);
    for (int i = threadIdx.x; i < kMarkRows / 32; i += blockDim.x)
      marks[i] = 0;
    __syncthreads();
    for (int64_t t = threadIdx.x; t < p.batch; t += blockDim.x) {
      const int64_t n = ValidExtent(D, 0, t, P.slots);
      if (n == 0) continue;
      const int64_t s = WindowStart(D, D.rank - 2, t, P.slots);
      // Rows [a, b) of this span, as bits of `marks`.
      int64_t a = std::max<int64_t>(s, r0) - r0;
      const int64_t b = std::min<int64_t>(s + n, r1) - r0;
      while (a < b) {
        const int64_t word = a / 32;
        const int64_t end = std::min<int64_t>(b, (word + 1) * 32);
        const int lo_bit = static_cast<int>(a - word * 32);
        const int bits = static_cast<int>(end - a);
        const uint32_t mask =
            (bits == 32 ? ~0u : ((1u << bits) - 1u)) << lo_bit;
        atomicOr(&marks[word], mask);
        a = end;
      }
    }
    __syncthreads();
    for (int64_t r = r0 + warp; r < r1; r += warps) {
      const int64_t i = r - r0;
      if ((marks[i / 32] >> (i % 32)) & 1u) continue;
      char* row = d + r * row_bytes;
      ZeroSpan(row, row + row_bytes, elt, lane, 32);
    }
    __syncthreads();  // the marks are read before the next span resets them
  }
}

// grid.y: `item_rows` rows of item blocks (grid.x a row's blocks), then,
// for a fresh D, rows of zero blocks (ZeroUncoveredRows).  Each block has
// one role, so its chain of dependent reads (the items' extents, then the
// rows' marks) is one of the two, not both.
__global__ void GroupedPointerKernel(const __grid_constant__ PrepParams P,
                                     int item_rows) {
  // The small-group kernels after it are programmatic dependents: they may
  // launch now and wait for this grid to finish (kernels/pdl.h).
  kernels::LetDependentsLaunch();
  const GemmProblem& p = P.p;
  if (static_cast<int>(blockIdx.y) >= item_rows) {  // a zero block
    const int64_t block =
        (int64_t{blockIdx.y} - item_rows) * gridDim.x + blockIdx.x;
    ZeroUncoveredRows(P, block,
                      (int64_t{gridDim.y} - item_rows) * gridDim.x);
    return;
  }
  const int64_t batch = p.batch;
  for (int64_t t = blockIdx.y; t < batch; t += item_rows) {
    const GroupedItem g = GroupedItemOf(p, t, P.slots);
    char* d = const_cast<char*>(P.base[kD]) +
              Offset(P, kD, t) * P.elt[kD];
    if (blockIdx.x == 0 && threadIdx.x == 0) {
      P.ptrs[t] = P.base[kA] + Offset(P, kA, t) * P.elt[kA];
      P.ptrs[batch + t] = P.base[kB] + Offset(P, kB, t) * P.elt[kB];
      P.ptrs[2 * batch + t] = d;  // C: none (a sourceless epilogue)
      P.ptrs[3 * batch + t] = d;
      P.shapes[3 * t] = static_cast<int32_t>(g.m);
      P.shapes[3 * t + 1] = static_cast<int32_t>(g.n);
      P.shapes[3 * t + 2] = static_cast<int32_t>(g.k);
      P.strides[t] = p.op[kA].ld();
      P.strides[batch + t] = p.op[kB].ld();
      P.strides[2 * batch + t] = p.op[kD].ld();
      P.strides[3 * batch + t] = p.op[kD].ld();
    }
    // Zeros, a row a warp (narrow rows keep a block's warps busy too):
    // columns [covered, dvc) of rows [0, m), then columns [0, dvc) of rows
    // [m, dvr).
    const int elt = P.elt[kD];
    const int64_t row_bytes = p.op[kD].ld() * elt;
    const int64_t first = g.covered < g.dvc ? 0 : g.m;
    const int warps = static_cast<int>(blockDim.x) / 32;
    const int lane = static_cast<int>(threadIdx.x) % 32;
    for (int64_t r = first + int64_t{blockIdx.x} * warps + threadIdx.x / 32;
         r < g.dvr; r += int64_t{gridDim.x} * warps) {
      char* row = d + r * row_bytes;
      ZeroSpan(row + (r < g.m ? g.covered : 0) * elt, row + g.dvc * elt, elt,
               lane, 32);
    }
  }
}

template <typename T>
__device__ void CopyWindow(const PrepParams& P, int64_t t) {
  const int64_t m = P.p.m, n = P.p.n, ld = P.p.op[kC].ld();
  const T* src = reinterpret_cast<const T*>(P.base[kC]) + Offset(P, kC, t);
  T* dst = reinterpret_cast<T*>(P.scratch + t * P.scratch_item);
  const int64_t total = m * n;
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < total;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t r = i / n, col = i - r * n;
    dst[r * ld + col] = src[r * ld + col];
  }
}

// grid.y strides over batch items, grid.x x threads over the C window.
__global__ void CopyCKernel(const __grid_constant__ PrepParams P) {
  for (int64_t t = blockIdx.y; t < P.p.batch; t += gridDim.y) {
    if (!NeedsCopy(P, t)) continue;
    if (P.elt[kC] == 4)
      CopyWindow<uint32_t>(P, t);
    else
      CopyWindow<uint16_t>(P, t);
  }
}

template <typename T>
__device__ __forceinline__ float ToFloat(T v) {
  return static_cast<float>(v);
}

// k == 0: D = cast(beta * C) (or 0 without C), through the pointer arrays.
template <typename TOut>
__global__ void ScaleKernel(const __grid_constant__ PrepParams P,
                            int64_t ldc, int64_t ldd, float beta) {
  const int64_t m = P.p.m, n = P.p.n, batch = P.p.batch;
  for (int64_t t = blockIdx.y; t < batch; t += gridDim.y) {
    const TOut* c = static_cast<const TOut*>(P.ptrs[2 * batch + t]);
    TOut* d = static_cast<TOut*>(const_cast<void*>(P.ptrs[3 * batch + t]));
    for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
         i < m * n; i += int64_t{gridDim.x} * blockDim.x) {
      const int64_t r = i / n, col = i - r * n;
      const float v = P.c_read ? beta * static_cast<float>(c[r * ldc + col])
                               : 0.f;
      d[r * ldd + col] = static_cast<TOut>(v);
    }
  }
}

template <typename T>
__device__ __forceinline__ void Store4(T* p, const float (&v)[4]) {
  if constexpr (std::is_same_v<T, float>) {
    if (reinterpret_cast<uintptr_t>(p) % 16 == 0) {
      *reinterpret_cast<float4*>(p) = make_float4(v[0], v[1], v[2], v[3]);
      return;
    }
  } else if constexpr (std::is_same_v<T, __half>) {
    if (reinterpret_cast<uintptr_t>(p) % 8 == 0) {
      const __half2 lo = __floats2half2_rn(v[0], v[1]);
      const __half2 hi = __floats2half2_rn(v[2], v[3]);
      uint2 u;
      u.x = *reinterpret_cast<const uint32_t*>(&lo);
      u.y = *reinterpret_cast<const uint32_t*>(&hi);
      *reinterpret_cast<uint2*>(p) = u;
      return;
    }
  } else {
    if (reinterpret_cast<uintptr_t>(p) % 8 == 0) {
      const __nv_bfloat162 lo = __floats2bfloat162_rn(v[0], v[1]);
      const __nv_bfloat162 hi = __floats2bfloat162_rn(v[2], v[3]);
      uint2 u;
      u.x = *reinterpret_cast<const uint32_t*>(&lo);
      u.y = *reinterpret_cast<const uint32_t*>(&hi);
      *reinterpret_cast<uint2*>(p) = u;
      return;
    }
  }
#pragma unroll
  for (int j = 0; j < 4; ++j) p[j] = static_cast<T>(v[j]);
}

template <typename TOut>
__global__ void __launch_bounds__(kReduceThreads)
    SplitKReduceKernel(const __grid_constant__ ReduceParams R) {
  const int64_t per_row = R.n / 4, vecs = R.m * per_row;
  const int64_t step = R.partial_item / 16;  // float4s between slices
  for (int64_t t = blockIdx.y; t < R.batch; t += gridDim.y) {
    const float4* part = reinterpret_cast<const float4*>(
        R.partials + t * R.slices * R.partial_item);
    const TOut* c = static_cast<const TOut*>(R.c[t]);
    TOut* d = static_cast<TOut*>(const_cast<void*>(R.d[t]));
    for (int64_t v = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; v < vecs;
         v += int64_t{gridDim.x} * blockDim.x) {
      const int64_t r = v / per_row, col = (v - r * per_row) * 4;
      const float4* src = part + v;
      float4 acc = src[0];
#pragma unroll 4
      for (int64_t s = 1; s < R.slices; ++s) {
        const float4 x = src[s * step];
        acc.x += x.x;
        acc.y += x.y;
        acc.z += x.z;
        acc.w += x.w;
      }
      float o[4] = {R.alpha * acc.x, R.alpha * acc.y, R.alpha * acc.z,
                    R.alpha * acc.w};
      if (R.c_read) {
        const TOut* cr = c + r * R.ldc + col;
#pragma unroll
        for (int j = 0; j < 4; ++j) o[j] += R.beta * static_cast<float>(cr[j]);
      }
      Store4(d + r * R.ldd + col, o);
    }
  }
}


// PointerKernel1's parameters for a one-item call (see Prep1Params).
Prep1Params Prep1(const PrepParams& P) {
  Prep1Params q{};
  q.terms = 0;
  for (int o = 0; o < kNumOperands; ++o) {
    const OperandDesc& op = P.p.op[o];
    q.base[o] = P.base[o] + op.static_offset * P.elt[o];
    for (int i = 0; i < op.rank; ++i) {
      if (op.start_arg[i] < 0) continue;
      Prep1Params::Term& t = q.term[q.terms++];
      t.start = DynamicStart(P, op, i, op.strides[i] * P.elt[o]);
      t.operand = o;
    }
  }
  q.c_read = P.c_read;
  q.ptrs = P.ptrs;
  return q;
}

}  // namespace

cudaError_t LaunchPointers(const PrepParams& P, bool split,
                           cudaStream_t stream) {
  const GemmProblem& p = P.p;
  const int64_t items = p.batch * (split ? P.slices : 1);
  const int64_t blocks =
      std::min<int64_t>(RoundUp(items, kThreads) / kThreads, 1024);
  if (split)
    SplitPointerKernel<<<static_cast<unsigned>(blocks), kThreads, 0,
                         stream>>>(P);
  else if (p.batch == 1 && !(p.c_mode == CMode::kFromD && P.c_read))
    PointerKernel1<<<1, kMaxTerms, 0, stream>>>(Prep1(P));
  else
    PointerKernel<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(P);
  return cudaGetLastError();
}

cudaError_t LaunchGroupedPointers(const PrepParams& P, cudaStream_t stream) {
  // One wave up to ~400 items: about kItemBlocks blocks over all items (at
  // least one an item) and, for a fresh D (PlannedKernel::fresh_out),
  // about kZeroBlocks more that zero its uncovered rows (ZeroUncoveredRows):
  // no launch of its own.  The kernel's 56 registers a thread leave room
  // for 4 blocks of 256 threads an SM, 528 on an H100 or H200; its time is
  // its blocks' chains of dependent reads (the generic problem's constants
  // and the items' extents), so a second wave doubles it: with 1,024
  // blocks over 64 items, each block both kinds, it took 13 us in two
  // waves (ncu, H100).  An item's zeros, where it has any, are spread over
  // its grid.x blocks' warps a row each; every item may be all zeros (a
  // weight gradient's experts without rows, on the CUTLASS kernels), and
  // where none has any a block reads its item's extents and ends.
  constexpr int64_t kItemBlocks = 264, kZeroBlocks = 132;
  const int64_t batch = std::max<int64_t>(P.p.batch, 1);
  const int64_t per_item =
      std::max<int64_t>(1, (kItemBlocks + batch - 1) / batch);
  const int64_t zero_rows =
      P.p.planned.fresh_out ? (kZeroBlocks + per_item - 1) / per_item : 0;
  // grid.y's rows of item blocks (the blocks stride over more items).
  const int64_t item_rows = std::min<int64_t>(batch, 65535 - zero_rows);
  GroupedPointerKernel<<<dim3(static_cast<unsigned>(per_item),
                              static_cast<unsigned>(item_rows + zero_rows)),
                         kThreads, 0, stream>>>(P,
                                                static_cast<int>(item_rows));
  return cudaGetLastError();
}

// grid.x x threads over one item's m x n elements (4 each), grid.y over
// the batch items.
static dim3 ElementGrid(const GemmProblem& p) {
  const int64_t per_item = std::min<int64_t>(
      RoundUp(p.m * p.n, 4 * kThreads) / (4 * kThreads), 512);
  return dim3(static_cast<unsigned>(per_item),
              static_cast<unsigned>(std::min<int64_t>(p.batch, 65535)));
}

cudaError_t LaunchCopyC(const PrepParams& P, cudaStream_t stream) {
  CopyCKernel<<<ElementGrid(P.p), kThreads, 0, stream>>>(P);
  return cudaGetLastError();
}

cudaError_t LaunchScale(const PrepParams& P, int64_t ldc, int64_t ldd,
                        float beta, cudaStream_t stream) {
  const dim3 grid = ElementGrid(P.p);
  if (P.p.out_dtype == DType::kF32)
    ScaleKernel<float><<<grid, kThreads, 0, stream>>>(P, ldc, ldd, beta);
  else if (P.p.out_dtype == DType::kF16)
    ScaleKernel<__half><<<grid, kThreads, 0, stream>>>(P, ldc, ldd, beta);
  else
    ScaleKernel<__nv_bfloat16><<<grid, kThreads, 0, stream>>>(P, ldc, ldd,
                                                               beta);
  return cudaGetLastError();
}

cudaError_t LaunchSplitKReduce(const ReduceParams& R, DType out,
                               cudaStream_t stream) {
  const int64_t vecs = R.m * R.n / 4;
  dim3 grid(static_cast<unsigned>(std::min<int64_t>(
                RoundUp(vecs, kReduceThreads) / kReduceThreads, 2048)),
            static_cast<unsigned>(std::min<int64_t>(R.batch, 65535)));
  if (out == DType::kF32)
    SplitKReduceKernel<float><<<grid, kReduceThreads, 0, stream>>>(R);
  else if (out == DType::kF16)
    SplitKReduceKernel<__half><<<grid, kReduceThreads, 0, stream>>>(R);
  else
    SplitKReduceKernel<__nv_bfloat16><<<grid, kReduceThreads, 0, stream>>>(R);
  return cudaGetLastError();
}

}  // namespace cuda
}  // namespace jax_dynoff
