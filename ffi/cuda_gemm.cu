// The CUDA FFI handler of target "jax_dynoff_gemm": two stages.
//
// Instantiate (once per op instance, GemmInstantiate): decodes and
// validates the attributes (desc, alpha, beta) into a GemmState with the
// planner's decision (path, split_k and the kernel within the path, which
// jax_dynoff/plan.py asked the planner, ffi/planner.h, for and wrote into
// the desc; refused where the planner's rules reject it) and the workspace
// layout.  Execute (GemmExecute): checks the buffers against the state's
// problem, keeps or drops the planned kernel by what only the run can
// tell (the device, the buffer addresses' alignment, the options'
// switches), and launches.
//
// What runs: a direct SM90 kernel or the skinny kernel is one launch that
// locates its windows on the device from the offsets operand (its launch is
// made ready once per device and set of buffer addresses and replayed).
// Otherwise (1) a pointer kernel turns the buffer bases plus the clamped
// window offsets (read on the device) into per-batch-item pointer arrays in
// the workspace (ret 1), (2) when C is read from D's own buffer at a window
// that overlaps D's without being D's, a copy of that C window goes into
// the workspace, and (3) one CUTLASS GEMM in array / ptr-array mode reads
// those pointer arrays.  The split-K path's ptr-array slices run K in S
// slices as S items per batch item, writing float32 partials into the
// workspace, and (4) a reduction kernel sums them, applies alpha and beta *
// C and writes the D window.  Nothing is allocated, no offset is read on
// the host, nothing synchronises, nothing is read from the environment per
// call, and the kernels launched depend only on the attributes, the device
// and the buffer addresses: the handler is safe to capture into a CUDA
// graph (kCmdBufferCompatible).
//
// Fallback rule (documented in jax_dynoff/plan.py as well): the path
// planned at trace time is a request, made by the planner's static rules
// (kernels for the dtypes and transposes, the alignment proof, split-K's
// slices, the direct and skinny kernels' window rules).  An SM90 path runs
// its SM90 kernel only when the build has sm_90a kernels, the current
// device is compute capability 9.0, the buffer bases are 16-byte aligned,
// k > 0 and the call's options allow SM90 kernels (KernelOptions.sm90);
// otherwise the generic kernel runs (same result, slower).  The workspace
// layout always follows the planned path, so the fallback always fits.
// The split-K path runs its planned direct kernel where the options allow
// it (KernelOptions.direct) and every base is aligned, else its ptr-array
// slices (A, B and workspace bases aligned: C and D are only touched by
// the reduction kernel, which takes any alignment), else the generic
// kernel, unsplit.  The other SM90 tiles run their planned direct kernel
// (kernels/sm90_direct.h: one launch, no pointer kernel) instead of the
// ptr-array one where the options allow it.  The skinny path runs one
// launch of the skinny kernel (kernels/sm90_skinny.h) at its planned
// split; where KernelOptions.skinny is False or a base is not aligned it
// runs the tiny tile as if planned for it, direct twin (planned too)
// included.
// The TF32 path (float32 in and out, default precision; any alignment)
// runs on every GPU the build has code for; KernelOptions.tf32 = False
// sends it to the exact generic kernel instead.
// JAX_DYNOFF_LOG=1 (the one debug switch, read once) prints, per call, the
// planned path and the kernel run.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <type_traits>
#include <utility>

#include "ffi_problem.h"
#include "gemm_problem.h"
#include "handlers.h"
#include "kernels/launch.h"
#include "plan.h"
#include "planner.h"
#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

#define JAX_DYNOFF_STR2(x) #x
#define JAX_DYNOFF_STRINGIFY(x) JAX_DYNOFF_STR2(x)

namespace jax_dynoff {
namespace {

using kernels::DirectKernelEntry;
using kernels::GemmLaunch;
using kernels::KernelEntry;
using kernels::SkinnyKernelEntry;
using kernels::StartTerm;

constexpr int kThreads = 256;
constexpr int kReduceThreads = 128;
constexpr int64_t kMaxSplitK = 1024;  // a sanity bound on desc's split_k

// ---------------------------------------------------------------------------
// Device side: pointer arrays, C copies, the k == 0 epilogue.

struct PrepParams {
  GemmProblem p;
  SlotRef slots[kMaxSlots];  // the dynamic starts (ResolveCallSlots)
  const char* base[kNumOperands];  // bytes; C's is D's for kFromD / kNone
  int elt[kNumOperands];           // element bytes
  const void** ptrs;               // WorkspaceLayout::ptr_count entries
  char* scratch;
  int64_t scratch_item;
  bool c_read;  // C present and beta != 0
  // Split-K (SplitPointerKernel only).
  int64_t slices;          // K slices per batch item
  int64_t a_slice_bytes;   // address step between consecutive slices of A
  int64_t b_slice_bytes;   // ... of B
  char* partials;
  int64_t partial_item;    // bytes per partial
};

__device__ int64_t Offset(const PrepParams& P, int o, int64_t t) {
  return WindowOffset(P.p, P.p.op[o], t, P.slots);
}

// Clamped start of operand o along dim i for batch item t.
__device__ int64_t Start(const PrepParams& P, int o, int i, int64_t t) {
  const OperandDesc& op = P.p.op[o];
  if (op.start_arg[i] < 0) return op.start[i];
  return ClampStart(P.slots[op.start_arg[i]].Load(t), op.dims[i],
                    op.win[i]);
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

// One batch item whose C cannot overlap D (the common case): the host
// reduces the problem to "address of operand o = base[o] + sum of clamped
// dynamic starts x stride in bytes", one term per dynamic start, so the
// device work is one load and one multiply per start in parallel.  The
// general PointerKernel walks the whole GemmProblem from one thread: 12k
// cycles on an H200 (ncu, benchmarks/results/2026-11-30-h200-s3).
constexpr int kMaxTerms = kNumOperands * kMaxRank;

struct Prep1Params {
  struct Term {
    StartTerm start;  // scale: the dim's stride in bytes
    int32_t operand;
  };
  const char* base[kNumOperands];  // array base + static starts, bytes
  Term term[kMaxTerms];
  int terms;
  bool c_read;  // C is read (else the C pointer is D's, never read)
  const void** ptrs;
};

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

// Split-K reduction: for every batch item t,
//   D_t = cast(alpha * sum_s partial[t * slices + s] + beta * C_t),
// one pass, each thread owning 4 consecutive columns of one row (n % 4 == 0):
// float4 loads of the partials (summed in slice order: deterministic), C
// read before D is written by the same thread (same window: in place is
// safe; a partly overlapping C was copied to scratch first), vector stores
// when D's address allows them.  grid.y strides over batch items.
struct ReduceParams {
  const char* partials;
  int64_t partial_item;  // bytes
  int64_t slices;
  int64_t m, n, batch, ldc, ldd;
  const void* const* c;  // batch entries
  const void* const* d;  // batch entries
  float alpha, beta;
  bool c_read;
};

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

// ---------------------------------------------------------------------------
// Host side.

struct DeviceInfo {
  int major = 0, minor = 0, sms = 0;
};

cudaError_t GetDeviceInfo(int device, DeviceInfo* out) {
  static std::mutex mu;
  static DeviceInfo cache[64];
  static bool known[64] = {};
  if (device < 0 || device >= 64) return cudaErrorInvalidDevice;
  std::lock_guard<std::mutex> lock(mu);
  if (!known[device]) {
    DeviceInfo d;
    cudaError_t e;
    if ((e = cudaDeviceGetAttribute(&d.major, cudaDevAttrComputeCapabilityMajor,
                                    device)) != cudaSuccess ||
        (e = cudaDeviceGetAttribute(&d.minor, cudaDevAttrComputeCapabilityMinor,
                                    device)) != cudaSuccess ||
        (e = cudaDeviceGetAttribute(&d.sms, cudaDevAttrMultiProcessorCount,
                                    device)) != cudaSuccess)
      return e;
    cache[device] = d;
    known[device] = true;
  }
  *out = cache[device];
  return cudaSuccess;
}

bool EnvFlag(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && v[0] != '\0' && !(v[0] == '0' && v[1] == '\0');
}

bool Opt(const GemmProblem& p, int64_t bit) { return (p.options & bit) != 0; }

// JAX_DYNOFF_LOG=1: one line per call on stderr, the planned path and the
// kernel run (a debug switch, read once per process; every other choice
// comes from the call's desc).
bool LogEnabled() {
  static const bool on = EnvFlag("JAX_DYNOFF_LOG");
  return on;
}

const KernelEntry* GenericKernel(DType in, DType out) {
  using namespace kernels;
  if (in == DType::kF32 && out == DType::kF32) return &kGenericF32F32;
  if (in == DType::kBF16 && out == DType::kBF16) return &kGenericBf16Bf16;
  if (in == DType::kBF16 && out == DType::kF32) return &kGenericBf16F32;
  if (in == DType::kF16 && out == DType::kF16) return &kGenericF16F16;
  if (in == DType::kF16 && out == DType::kF32) return &kGenericF16F32;
  return nullptr;
}

// The SM90 kernel for an unsplit SM90 path (one tile configuration each),
// or nullptr when none is built for the dtypes and transposes.
const KernelEntry* Sm90Kernel(Path path, DType in, DType out, bool ta,
                              bool tb) {
#ifdef JAX_DYNOFF_WITH_SM90
  using namespace kernels;
  // Per tile: bf16 NN, NT, TN, f16 NN (the planner's HasSm90Kernel).
  struct Set { const KernelEntry *bf16_nn, *bf16_nt, *bf16_tn, *f16_nn; };
  static const Set kLarge{&kSm90LargeBf16Bf16NN, &kSm90LargeBf16Bf16NT,
                          &kSm90LargeBf16Bf16TN, &kSm90LargeF16F16NN};
  static const Set kMedium{&kSm90MediumBf16Bf16NN, &kSm90MediumBf16Bf16NT,
                           &kSm90MediumBf16Bf16TN, &kSm90MediumF16F16NN};
  static const Set kSmall{&kSm90SmallBf16Bf16NN, &kSm90SmallBf16Bf16NT,
                          &kSm90SmallBf16Bf16TN, &kSm90SmallF16F16NN};
  static const Set kTiny{&kSm90TinyBf16Bf16NN, &kSm90TinyBf16Bf16NT,
                         &kSm90TinyBf16Bf16TN, &kSm90TinyF16F16NN};
  const Set* set = nullptr;
  switch (path) {
    case Path::kSm90Large: set = &kLarge; break;
    case Path::kSm90Medium: set = &kMedium; break;
    case Path::kSm90SmallM: set = &kSmall; break;
    case Path::kSm90Tiny: set = &kTiny; break;
    default: return nullptr;
  }
  if (in == DType::kBF16 && out == DType::kBF16) {
    if (!ta && !tb) return set->bf16_nn;
    if (!ta && tb) return set->bf16_nt;
    if (ta && !tb) return set->bf16_tn;
  }
  if (in == DType::kF16 && out == DType::kF16 && !ta && !tb)
    return set->f16_nn;
#endif
  (void)path; (void)in; (void)out; (void)ta; (void)tb;
  return nullptr;
}

// The direct kernel of `tile`, or nullptr when none is built for the dtypes
// and transposes.
const DirectKernelEntry* Sm90DirectKernel(DType in, DType out, bool ta,
                                          bool tb, DirectTile tile) {
#ifdef JAX_DYNOFF_WITH_SM90
  using namespace kernels;
  if (ta || tb || in != out || (in != DType::kBF16 && in != DType::kF16))
    return nullptr;
  const bool bf16 = in == DType::kBF16;
  switch (tile) {
    case DirectTile::kLarge:
      return bf16 ? &kSm90DirectLargeBf16NN : &kSm90DirectLargeF16NN;
    case DirectTile::kWide:
      return bf16 ? &kSm90DirectWideBf16NN : &kSm90DirectWideF16NN;
    case DirectTile::kMedium:
      return bf16 ? &kSm90DirectMediumBf16NN : &kSm90DirectMediumF16NN;
    case DirectTile::kSmall:
      return bf16 ? &kSm90DirectSmallBf16NN : &kSm90DirectSmallF16NN;
    case DirectTile::kTiny:
      return bf16 ? &kSm90DirectTinyBf16NN : &kSm90DirectTinyF16NN;
    case DirectTile::kSplitK:
      return bf16 ? &kSm90DirectSplitKBf16NN : &kSm90DirectSplitKF16NN;
    case DirectTile::kNone:
      return nullptr;
  }
#endif
  (void)in; (void)out; (void)ta; (void)tb; (void)tile;
  return nullptr;
}

// The skinny kernel (kernels/sm90_skinny.h) for the input dtype, or nullptr
// when none is built for it (the planner chose the path by its rules).
const SkinnyKernelEntry* SkinnyKernel(DType in) {
#ifdef JAX_DYNOFF_WITH_SM90
  using namespace kernels;
  if (in == DType::kBF16) return &kSm90Skinny16Bf16NN;
  if (in == DType::kF16) return &kSm90Skinny16F16NN;
#endif
  (void)in;
  return nullptr;
}

// The TF32 kernel for the transposes (float32 in and out only).
const KernelEntry* Tf32Kernel(DType in, DType out, bool ta, bool tb) {
  using namespace kernels;
  if (in != DType::kF32 || out != DType::kF32) return nullptr;
  if (!ta) return tb ? &kTf32NT : &kTf32NN;
  return tb ? &kTf32TT : &kTf32TN;
}

// The split-K slice kernel (float32 partials, any output dtype: the
// reduction casts), or nullptr when none is built for it.
const KernelEntry* Sm90SplitKKernel(DType in, bool ta, bool tb) {
#ifdef JAX_DYNOFF_WITH_SM90
  using namespace kernels;
  if (ta || tb) return nullptr;
  if (in == DType::kBF16) return &kSm90SplitKBf16NN;
  if (in == DType::kF16) return &kSm90SplitKF16NN;
#endif
  (void)in; (void)ta; (void)tb;
  return nullptr;
}

// The matrices an operand's array stacks (the product of its leading dims).
int64_t Layers(const OperandDesc& op) {
  int64_t layers = 1;
  for (int i = 0; i + 2 < op.rank; ++i) layers *= op.dims[i];
  return layers;
}

// Dynamic start i of operand o, its clamped value to be scaled by `scale`.
StartTerm DynamicStart(const PrepParams& P, const OperandDesc& op, int i,
                       int64_t scale) {
  StartTerm t;
  t.slot = P.slots[op.start_arg[i]];  // one-item calls only: item 0
  t.dim = op.dims[i];
  t.win = op.win[i];
  t.scale = scale;
  return t;
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

bool Ptr16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

ffi::Error CudaError(const char* what, cudaError_t e) {
  return ffi::Error::Internal(std::string("jax_dynoff_gemm: ") + what + ": " +
                              cudaGetErrorName(e) + ": " +
                              cudaGetErrorString(e));
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

// Checks the kernel's workspace against what the plan reserved, then
// enqueues it; errors name the kernel.  Entry: KernelEntry (GemmLaunch) or
// DirectKernelEntry (DirectLaunch).
template <typename Entry, typename Launch>
ffi::Error RunKernel(const Entry* kernel, const Launch& l) {
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
  const int64_t vecs = p.m * p.n / 4;
  dim3 grid(static_cast<unsigned>(std::min<int64_t>(
                RoundUp(vecs, kReduceThreads) / kReduceThreads, 2048)),
            static_cast<unsigned>(std::min<int64_t>(p.batch, 65535)));
  if (p.out_dtype == DType::kF32)
    SplitKReduceKernel<float><<<grid, kReduceThreads, 0, stream>>>(R);
  else if (p.out_dtype == DType::kF16)
    SplitKReduceKernel<__half><<<grid, kReduceThreads, 0, stream>>>(R);
  else
    SplitKReduceKernel<__nv_bfloat16><<<grid, kReduceThreads, 0, stream>>>(R);
  if ((e = cudaGetLastError()) != cudaSuccess)
    return CudaError("split-K reduction launch", e);
  return ffi::Error::Success();
}

// The state of one op instance (one call site of a compiled program): its
// problem, decoded from the attributes and validated once (instantiate
// stage), the workspace layout, and the direct kernel launches made ready
// for the buffer addresses seen last.  XLA instantiates a program once per
// process, not per device, and may run it on several devices (or streams)
// at once: the launches are keyed by device and addresses and guarded by a
// mutex, held only to look one up or store it.
struct GemmState {
  static ffi::TypeId id;
  GemmProblem p;  // offsets_batched is per call (CheckCall)
  WorkspaceLayout w;
  PlannedKernel kernel;  // desc[kKernel], checked against the rules

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
        // The parameters in use, not the whole 4 KiB buffer.
        std::memcpy(out, &launches[i],
                    offsetof(kernels::PreparedLaunch, params) +
                        launches[i].param_bytes);
        return true;
      }
    return false;
  }
  void Store(const Key& k, const kernels::PreparedLaunch& l) {
    std::lock_guard<std::mutex> lock(mu);
    keys[next] = k;
    std::memcpy(&launches[next], &l, sizeof(l));
    next = (next + 1) % kSlots;
  }
};
ffi::TypeId GemmState::id = {};

// Instantiate stage: decode and validate the attributes once.
ffi::ErrorOr<std::unique_ptr<GemmState>> GemmInstantiate(
    ffi::Span<const int64_t> desc, double alpha, double beta) {
  auto Refuse = [](const std::string& m) {
    return ffi::Unexpected<ffi::Error>(ffi::Error::InvalidArgument(m));
  };
  auto state = std::make_unique<GemmState>();
  const std::string msg =
      DecodeDesc(desc.begin(), static_cast<int64_t>(desc.size()), alpha, beta,
                 &state->p);
  if (!msg.empty()) return Refuse(msg);
  const GemmProblem& p = state->p;
  const int64_t int_max = 0x7fffffff;
  if (p.m > int_max || p.n > int_max || p.k > int_max)
    return Refuse(
        "jax_dynoff_gemm: m, n and k must be < 2^31 on CUDA");
  if (p.path == Path::kSm90SplitK && p.split_k > kMaxSplitK)
    return Refuse(
        "jax_dynoff_gemm: split_k " + std::to_string(p.split_k) + " > " +
        std::to_string(kMaxSplitK));
  if (GenericKernel(p.in_dtype, p.out_dtype) == nullptr)
    return Refuse(
        "jax_dynoff_gemm: no CUDA kernel for this input/output dtype pair");
  // The planner's decision (jax_dynoff/plan.py wrote it into the desc),
  // refused where its own rules reject it.
  if (const std::string why = DecodeKernel(p, &state->kernel); !why.empty())
    return Refuse(why);
  state->w = Layout(p);
  return std::move(state);  // a conversion: no implicit move
}

// Execute stage: the buffers' addresses, the kernel choice that depends on
// the device and on them, and the launches.
ffi::Error GemmExecute(cudaStream_t stream, GemmState* state,
                       ffi::RemainingArgs args, ffi::RemainingRets rets) {
  auto fail = [](const std::string& m) {
    return ffi::Error::InvalidArgument("jax_dynoff_gemm: " + m);
  };
  // --- Buffers.
  if (rets.size() != 2)
    return fail("expected 2 results (D, workspace), got " +
                std::to_string(rets.size()));
  GemmProblem p = state->p;
  if (ffi::Error err = CheckCall(args, rets, &p); err.failure()) return err;
  const ffi::AnyBuffer d_buf = **rets.get<ffi::AnyBuffer>(0);
  auto ws_ret = rets.get<ffi::AnyBuffer>(1);
  if (!ws_ret.has_value()) return ws_ret.error();
  const ffi::AnyBuffer ws_buf = **ws_ret;
  const double alpha = p.alpha, beta = p.beta;
  auto arg_data = [&](int64_t i) {
    return static_cast<const char*>((*args.get<ffi::AnyBuffer>(i)).untyped_data());
  };
  const WorkspaceLayout& w = state->w;
  if (ws_buf.element_type() != ffi::DataType::U8 ||
      static_cast<int64_t>(ws_buf.size_bytes()) < w.total)
    return fail("workspace (ret 1) has " + std::to_string(ws_buf.size_bytes()) +
                " bytes, this call needs " + std::to_string(w.total) +
                " (plan.py and the handler disagree)");
  if (p.batch == 0 || p.m == 0 || p.n == 0) return ffi::Error::Success();
  const KernelEntry* generic = GenericKernel(p.in_dtype, p.out_dtype);

  // --- Prep parameters.
  PrepParams P;
  P.p = p;
  ResolveCallSlots(p, args, P.slots);
  char* d_base = static_cast<char*>(d_buf.untyped_data());
  char* ws = static_cast<char*>(ws_buf.untyped_data());
  P.base[kA] = arg_data(p.op[kA].arg);
  P.base[kB] = arg_data(p.op[kB].arg);
  P.base[kD] = d_base;
  P.base[kC] = p.c_mode == CMode::kOwn ? arg_data(p.op[kC].arg) : d_base;
  P.elt[kA] = P.elt[kB] = static_cast<int>(ElementBytes(p.in_dtype));
  P.elt[kC] = P.elt[kD] = static_cast<int>(ElementBytes(p.out_dtype));
  P.ptrs = reinterpret_cast<const void**>(ws + w.ptrs);
  P.scratch = ws + w.scratch;
  P.scratch_item = w.scratch_item;
  P.c_read = p.c_mode != CMode::kNone && beta != 0.0;
  P.slices = 1;
  P.a_slice_bytes = P.b_slice_bytes = 0;
  P.partials = ws + w.partials;
  P.partial_item = w.partial_item;

  // --- Which kernel (host-only facts: attributes, device, addresses).
  int device = 0;
  cudaError_t e = cudaGetDevice(&device);
  if (e != cudaSuccess) return CudaError("cudaGetDevice", e);
  DeviceInfo dev;
  if ((e = GetDeviceInfo(device, &dev)) != cudaSuccess)
    return CudaError("cudaDeviceGetAttribute", e);
  // The planner chose path, split_k and the kernel within the path (the
  // direct tile, the skinny split) at lowering time; what is left here is
  // what only the run can tell: the device, the build's kernels, the
  // buffer addresses, and the options' switches.
  const PlannedKernel& planned = state->kernel;
  const KernelEntry* kernel = generic;
  bool split = false;  // run the split-K kernel + reduction
  // A direct kernel stands in for the planned ptr-array kernel where the
  // call got that far (SM90 device, alignment) and the planner chose one.
  const DirectKernelEntry* direct = nullptr;
  DirectTile direct_tile = DirectTile::kNone;
  // The skinny kernel (one launch, nothing before it) for its path.
  const SkinnyKernelEntry* skinny = nullptr;
  if (p.path == Path::kTf32 && !Opt(p, opt::kNoTf32)) {
    if (const KernelEntry* kt =
            Tf32Kernel(p.in_dtype, p.out_dtype, p.trans_a, p.trans_b))
      kernel = kt;
  }
  if (IsSm90Path(p.path) && !Opt(p, opt::kNoSm90) && dev.major == 9 &&
      dev.minor == 0 && p.k > 0) {
    const bool bases_ok = Ptr16(P.base[kA]) && Ptr16(P.base[kB]) &&
                          Ptr16(P.base[kC]) && Ptr16(P.base[kD]) && Ptr16(ws);
    const bool direct_ok = !Opt(p, opt::kNoDirect) && bases_ok;
    // The skinny path's fallback is the tiny tile (its workspace is the
    // tiny tile's, its direct twin the planned direct tile): where the
    // bases are not aligned or the options disable the skinny kernel.
    Path tile_path = p.path;
    if (p.path == Path::kSm90Skinny) {
      const SkinnyKernelEntry* ks = SkinnyKernel(p.in_dtype);
      if (ks != nullptr && !Opt(p, opt::kNoSkinny) && bases_ok)
        skinny = ks;
      else
        tile_path = Path::kSm90Tiny;
    }
    if (skinny != nullptr) {
      // (one launch below)
    } else if (p.path == Path::kSm90SplitK) {
      // First choice: the direct split-K kernel, one launch, K reduced in
      // the workspace.  Else the ptr-array slices and the reduction kernel,
      // where C and D are only touched by the reduction (no alignment).
      if (direct_ok) {
        direct_tile = planned.direct;
        direct = Sm90DirectKernel(p.in_dtype, p.out_dtype, p.trans_a,
                                  p.trans_b, direct_tile);
      }
      const KernelEntry* ks =
          Sm90SplitKKernel(p.in_dtype, p.trans_a, p.trans_b);
      if (direct == nullptr && ks != nullptr && Ptr16(P.base[kA]) &&
          Ptr16(P.base[kB]) && Ptr16(ws)) {
        kernel = ks;
        split = true;
      }
    } else if (const KernelEntry* k90 = Sm90Kernel(
                   tile_path, p.in_dtype, p.out_dtype, p.trans_a, p.trans_b);
               k90 != nullptr && bases_ok) {
      kernel = k90;
      if (direct_ok) {
        direct_tile = planned.direct;
        direct = Sm90DirectKernel(p.in_dtype, p.out_dtype, p.trans_a,
                                  p.trans_b, direct_tile);
      }
    }
  }
  const int64_t slices = split ? p.split_k : 1;
  const int64_t items = p.batch * slices;
  const int skinny_split = skinny != nullptr ? planned.skinny_split : 1;
  if (split) {
    const int64_t ks = p.k / slices;
    P.slices = slices;
    P.a_slice_bytes = ks * P.elt[kA];                 // A row-major: columns
    P.b_slice_bytes = ks * p.op[kB].ld() * P.elt[kB];  // B row-major: rows
  }
  if (LogEnabled())
    std::fprintf(stderr,
                 "jax_dynoff: gemm m=%lld n=%lld k=%lld batch=%lld planned=%s "
                 "kernel=%s split_k=%lld\n",
                 static_cast<long long>(p.m), static_cast<long long>(p.n),
                 static_cast<long long>(p.k), static_cast<long long>(p.batch),
                 PathName(p.path),
                 p.k == 0   ? "scale(k=0)"
                 : skinny ? skinny->name
                 : direct ? direct->name
                          : kernel->name,
                 static_cast<long long>(
                     skinny ? skinny_split
                     : direct_tile == DirectTile::kSplitK ? p.split_k
                                                          : slices));

  kernels::LaunchCommon common;
  common.alpha = static_cast<float>(alpha);
  common.beta = P.c_read ? static_cast<float>(beta) : 0.f;
  common.workspace = ws;
  common.workspace_bytes = static_cast<size_t>(w.kernel_bytes);
  common.device = device;
  common.sm_count = std::min(dev.sms, kernels::kSm90MaxSms);
  common.stream = stream;

  // --- The skinny kernel: one launch, nothing before it, no workspace.
  if (skinny != nullptr) {
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
    l.split_k = skinny_split;
    const std::string r = skinny->run(l);
    if (!r.empty())
      return ffi::Error::Internal(std::string("jax_dynoff_gemm: ") +
                                  skinny->name + ": " + r);
    if ((e = cudaGetLastError()) != cudaSuccess)
      return CudaError("skinny GEMM launch", e);
    return ffi::Error::Success();
  }

  // --- The direct kernel: one launch, nothing before it.
  if (direct != nullptr && p.k > 0) {
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
    if (direct_tile == DirectTile::kSplitK) {
      l.split_k = static_cast<int>(p.split_k);
      l.deterministic = !Opt(p, opt::kNondeterministic);
    }
    if (direct->prepare != nullptr) {
      // Made ready once per kernel, device and buffer addresses: the TMA
      // descriptors cover the whole buffers and the windows are located on
      // the device, so the same launch serves every offset value.
      GemmState::Key key;
      key.kernel = direct;
      key.device = device;
      for (const void* x : {static_cast<const void*>(a),
                            static_cast<const void*>(b),
                            static_cast<const void*>(c),
                            static_cast<const void*>(d),
                            static_cast<const void*>(ws)})
        key.addr[key.addrs++] = x;
      for (int64_t j = 0; j < p.num_slots; ++j) {
        key.addr[key.addrs++] = P.slots[j].value;
        key.addr[key.addrs++] = P.slots[j].table;
      }
      kernels::PreparedLaunch ready;
      if (!state->Find(key, &ready)) {
        if (direct->workspace(l) > l.workspace_bytes)
          return RunKernel(direct, l);  // the error message
        const std::string r = direct->prepare(l, &ready);
        if (!r.empty())
          return ffi::Error::Internal(std::string("jax_dynoff_gemm: ") +
                                      direct->name + ": " + r);
        state->Store(key, ready);
      }
      const std::string r = kernels::LaunchPrepared(ready, stream);
      if (!r.empty())
        return ffi::Error::Internal(std::string("jax_dynoff_gemm: ") +
                                    direct->name + ": " + r);
    } else if (ffi::Error err = RunKernel(direct, l); err.failure()) {
      return err;
    }
    if ((e = cudaGetLastError()) != cudaSuccess)
      return CudaError("direct GEMM launch", e);
    return ffi::Error::Success();
  }

  // --- (1) pointer arrays, (2) C copies.
  {
    const int64_t blocks = std::min<int64_t>(RoundUp(items, kThreads) /
                                             kThreads, 1024);
    if (split)
      SplitPointerKernel<<<static_cast<unsigned>(blocks), kThreads, 0,
                           stream>>>(P);
    else if (p.batch == 1 && !(p.c_mode == CMode::kFromD && P.c_read))
      PointerKernel1<<<1, kMaxTerms, 0, stream>>>(Prep1(P));
    else
      PointerKernel<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(P);
    if ((e = cudaGetLastError()) != cudaSuccess)
      return CudaError("pointer kernel launch", e);
  }
  if (w.scratch_item > 0) {
    const int64_t per_item =
        std::min<int64_t>(RoundUp(p.m * p.n, 4 * kThreads) / (4 * kThreads),
                          512);
    dim3 grid(static_cast<unsigned>(per_item),
              static_cast<unsigned>(std::min<int64_t>(p.batch, 65535)));
    CopyCKernel<<<grid, kThreads, 0, stream>>>(P);
    if ((e = cudaGetLastError()) != cudaSuccess)
      return CudaError("C copy kernel launch", e);
  }

  const int64_t ldd = p.op[kD].ld();
  const int64_t ldc = p.op[kC].present ? p.op[kC].ld() : ldd;

  // --- (3a) k == 0: no product, D = beta * C.
  if (p.k == 0) {
    const int64_t per_item =
        std::min<int64_t>(RoundUp(p.m * p.n, 4 * kThreads) / (4 * kThreads),
                          512);
    dim3 grid(static_cast<unsigned>(per_item),
              static_cast<unsigned>(std::min<int64_t>(p.batch, 65535)));
    const float b = static_cast<float>(beta);
    if (p.out_dtype == DType::kF32)
      ScaleKernel<float><<<grid, kThreads, 0, stream>>>(P, ldc, ldd, b);
    else if (p.out_dtype == DType::kF16)
      ScaleKernel<__half><<<grid, kThreads, 0, stream>>>(P, ldc, ldd, b);
    else
      ScaleKernel<__nv_bfloat16><<<grid, kThreads, 0, stream>>>(P, ldc, ldd, b);
    if ((e = cudaGetLastError()) != cudaSuccess)
      return CudaError("k=0 kernel launch", e);
    return ffi::Error::Success();
  }

  // --- (3b) the GEMM.
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
  // The CUTLASS 2.x kernels (generic, TF32) index batch items with grid z
  // (<= 65535); the SM90 kernels take the whole batch.
  const bool grid_z_batch =
      kernel == generic ||
      kernel == Tf32Kernel(p.in_dtype, p.out_dtype, p.trans_a, p.trans_b);
  const int64_t chunk = grid_z_batch ? 65535 : p.batch;
  for (int64_t t0 = 0; t0 < p.batch; t0 += chunk) {
    const int64_t nb = std::min(chunk, p.batch - t0);
    l.batch = static_cast<int>(nb);
    l.ptr_a = ptrs + t0;
    l.ptr_b = ptrs + p.batch + t0;
    l.ptr_c = ptrs + 2 * p.batch + t0;
    l.ptr_d = const_cast<void* const*>(ptrs + 3 * p.batch + t0);
    if (ffi::Error err = RunKernel(kernel, l); err.failure()) return err;
  }
  if ((e = cudaGetLastError()) != cudaSuccess)
    return CudaError("GEMM launch", e);
  return ffi::Error::Success();
}

}  // namespace

XLA_FFI_DEFINE_HANDLER(kCudaGemmInstantiate, GemmInstantiate,
                       ffi::Ffi::BindInstantiate()
                           .Attr<ffi::Span<const int64_t>>("desc")
                           .Attr<double>("alpha")
                           .Attr<double>("beta"));

// The attributes were read by the instantiate stage: the execute stage
// binds none (attributes it does not name are not decoded).
XLA_FFI_DEFINE_HANDLER(kCudaGemm, GemmExecute,
                       ffi::Ffi::Bind()
                           .Ctx<ffi::PlatformStream<cudaStream_t>>()
                           .Ctx<ffi::State<GemmState>>()
                           .RemainingArgs()
                           .RemainingRets(),
                       {xla::ffi::Traits::kCmdBufferCompatible});

XLA_FFI_Handler* CudaGemmInstantiate() { return kCudaGemmInstantiate; }
XLA_FFI_Handler* CudaGemmHandler() { return kCudaGemm; }

void* CudaGemmStateTypeId() { return &GemmState::id; }

void* CudaGemmStateTypeInfo() {
  static XLA_FFI_TypeInfo info = ffi::MakeTypeInfo<GemmState>();
  return &info;
}

#ifndef JAX_DYNOFF_CUDA_ARCHS_STR
#define JAX_DYNOFF_CUDA_ARCHS_STR "unknown"
#endif

const char* CudaBuildInfo() {
  return "jax_dynoff CUDA build; archs=" JAX_DYNOFF_CUDA_ARCHS_STR
         "; cuda=" JAX_DYNOFF_STRINGIFY(CUDART_VERSION)
#ifdef JAX_DYNOFF_WITH_SM90
         "; sm90=yes (ptr-array TMA: large 256x128x64 cooperative 1x2, "
         "medium 128x128x64, small_m 64x128x64, tiny 64x64x64 pingpong; "
         "bf16->bf16 NN/NT/TN, f16->f16 NN; split_k "
         "64x128x64 pingpong f32 partials + reduction, bf16/f16 NN, "
         "opt-in: planned only with KernelOptions(split_k=True); direct (non-array) "
         "twins of each tile, bf16/f16 NN: large 256x128 cooperative 1x2 "
         "and wide 128x256 cooperative 2x1 for the large path, medium, "
         "small_m and tiny ping-pong, and for split_k 128x128 cooperative "
         "on the stream-K scheduler in split-K mode, for one-item calls "
         "whose windows suit them, KernelOptions(direct=False) keeps "
         "ptr-array); skinny m <= 16 bf16/f16 NN: mma.sync 16x128 CTAs "
         "sharing K in a cluster, one launch (KernelOptions(skinny=False) "
         "runs the tiny tile)"
#else
         "; sm90=no"
#endif
         "; generic=CUTLASS 2.x SIMT kArray, alignment 1, any transpose "
         "(f32, bf16->bf16, bf16->f32, f16->f16, f16->f32)"
         "; tf32=CUTLASS 2.x tensor-op kArray, alignment 1, f32 NN/NT/TN/TT "
         "(default precision; KernelOptions(tf32=False) sends it to generic)"
         "; rule: an sm90 path falls back to generic unless the device is "
         "sm_90, the kernel exists, alignment holds and "
         "the options allow SM90 kernels";
}

}  // namespace jax_dynoff
