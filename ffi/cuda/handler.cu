// The CUDA FFI handler of target "jax_dynoff_gemm": two stages.  The
// runners (ffi/cuda/runners.h, one per launch kind), the small kernels
// around the GEMMs (ffi/cuda/prep.h) and the kernel registry
// (ffi/cuda/registry.h) are beside it.
//
// Instantiate (once per op instance, GemmInstantiate): decodes and
// validates the call's named attributes (ffi/call_attrs.h) into a
// GemmState: the problem, the planner's decision (the `plan` attribute
// jax_dynoff/plan.py asked ffi/planner.h for; refused where the planner's
// rules reject it), the workspace layout, and the kernel each case a run
// can present launches: the choice function (ffi/launch_choice.h, where
// the fallback rule is written) for a device of compute capability 9.0 or
// not and for each alignment of the buffer bases.
//
// Execute (GemmExecute): checks the buffers against the problem, picks the
// case (the device's kind, the bases' alignment), fills in the addresses
// and launches.  A direct SM90 kernel or the skinny kernel is one launch
// that locates its windows on the device from the start operands (its
// launch is made ready once per device and set of buffer addresses and
// replayed).  Otherwise (1) a pointer kernel turns the buffer bases plus
// the clamped window offsets (read on the device) into per-batch-item
// pointer arrays in the workspace (ret 1), (2) when C is read from D's own
// buffer at a window that overlaps D's without being D's, a copy of that C
// window goes into the workspace, and (3) one CUTLASS GEMM in array /
// ptr-array mode reads those pointer arrays.  The split-K path's ptr-array
// slices run K in S slices as S items per batch item, writing float32
// partials into the workspace, and (4) a reduction kernel sums them,
// applies alpha and beta * C and writes the D window.  Nothing is
// allocated, no offset is read on the host, nothing synchronises, nothing
// is read from the environment per call, and the kernels launched depend
// only on the attributes, the device and the buffer addresses: the handler
// is safe to capture into a CUDA graph (kCmdBufferCompatible).
//
// D is always ret 0: the caller's `out` aliased to it, a fresh buffer the
// kernel writes whole, or (the grouped path's fresh out, PlannedKernel::
// fresh_out: a call whose out was all zeros, lowered without it) a fresh
// buffer whose rows outside every item's window the grouped pointer
// kernel zeroes before the GEMM (cuda/prep_kernels.cu ZeroUncoveredRows).
//
// JAX_DYNOFF_LOG=1 (the one debug switch, read once) prints, per call, the
// planned path and the kernel run.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "cuda/prep.h"
#include "cuda/registry.h"
#include "cuda/runners.h"
#include "ffi_problem.h"
#include "gemm_problem.h"
#include "handlers.h"
#include "kernels/launch.h"
#include "launch_choice.h"
#include "plan.h"
#include "planner.h"
#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

namespace jax_dynoff {
namespace cuda {
namespace {

constexpr int64_t kMaxSplitK = 1024;  // a sanity bound on the plan's split_k

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

// JAX_DYNOFF_LOG=1: one line per call on stderr, the planned path and the
// kernel run (a debug switch, read once per process; every other choice
// comes from the call's attributes).
bool LogEnabled() {
  static const bool on = EnvFlag("JAX_DYNOFF_LOG");
  return on;
}

// The kernel log's line for one call (tests and users read it: the
// planned path, the kernel that ran, its K split, and whether the launch
// was captured into a graph).
void LogCall(const GemmProblem& p, const char* kernel, long long split_k,
             cudaStream_t stream) {
  if (!LogEnabled()) return;
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  const bool captured =
      cudaStreamIsCapturing(stream, &status) == cudaSuccess &&
      status == cudaStreamCaptureStatusActive;
  std::fprintf(stderr,
               "jax_dynoff: gemm m=%lld n=%lld k=%lld batch=%lld planned=%s "
               "kernel=%s split_k=%lld%s\n",
               static_cast<long long>(p.m), static_cast<long long>(p.n),
               static_cast<long long>(p.k), static_cast<long long>(p.batch),
               PathName(p.path), kernel, split_k,
               captured ? " (captured)" : "");
}

bool Ptr16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// The state of one op instance (one call site of a compiled program): its
// problem, decoded from the attributes and validated once (instantiate
// stage), the planner's decision, the workspace layout, and the direct
// kernel launches made ready for the addresses seen last.
struct GemmState {
  static ffi::TypeId id;
  GemmProblem p;  // offsets_batched is per call (CheckCall)
  WorkspaceLayout w;
  // The kernel each case runs (ChooseLaunch), by [compute capability 9.0]
  // [AlignmentCase].
  LaunchChoice choice[2][kNumAlignmentCases];

  PreparedLaunchCache cache;  // the direct kernels' launches

  // Whole calls made ready: where a call was one prepared launch and
  // nothing else (a direct or a skinny kernel: a loop's small GEMM), that
  // launch, keyed by the call's device and the addresses of every argument
  // and result (the key's kernel field is a tag, RepeatKey).  A call with the same device
  // and addresses makes the same launch (everything else the execute stage
  // decides is static per op instance), so it launches this one and skips
  // validation, windows and kernel choice: the host time of a call in a
  // loop driven from the host.
  PreparedLaunchCache repeat;
};

// The repeat cache's key for a call: its device and the addresses of its
// arguments and results, in order; false where the key cannot hold them
// all or one is not a buffer.
bool RepeatKey(GemmState* state, int device, ffi::RemainingArgs& args,
               ffi::RemainingRets& rets, PreparedLaunchCache::Key* key) {
  using Key = PreparedLaunchCache::Key;
  if (args.size() + rets.size() > static_cast<size_t>(Key::kMaxAddrs))
    return false;
  key->kernel = &state->repeat;  // whole calls, not one kernel's launches
  key->device = device;
  key->addrs = 0;
  for (size_t i = 0; i < args.size(); ++i) {
    auto b = args.get<ffi::AnyBuffer>(i);
    if (!b.has_value()) return false;
    key->addr[key->addrs++] = b->untyped_data();
  }
  for (size_t i = 0; i < rets.size(); ++i) {
    auto b = rets.get<ffi::AnyBuffer>(i);
    if (!b.has_value()) return false;
    key->addr[key->addrs++] = (*b)->untyped_data();
  }
  return true;
}
ffi::TypeId GemmState::id = {};

// Instantiate stage: decode and validate the attributes once.
ffi::ErrorOr<std::unique_ptr<GemmState>> GemmInstantiate(
    ffi::Dictionary attrs) {
  auto Refuse = [](const std::string& m) {
    return ffi::Unexpected<ffi::Error>(ffi::Error::InvalidArgument(m));
  };
  auto state = std::make_unique<GemmState>();
  const std::string msg = DecodeCallAttrs(FfiAttrs(attrs), &state->p);
  if (!msg.empty()) return Refuse(msg);
  if (!attrs.contains("plan"))
    return Refuse("jax_dynoff_gemm: the CUDA handler needs the call's plan");
  const GemmProblem& p = state->p;
  // Ragged windows run only as one grouped launch (jax_dynoff/lowering.py
  // composes the others from XLA window ops and a plain call), and the
  // grouped path takes nothing else.
  if (HasRaggedWindow(p) != (p.path == Path::kSm90Grouped))
    return Refuse(
        "jax_dynoff_gemm: ragged windows (valid extents) run on the "
        "sm90_grouped path only, and it only them");
  const int64_t int_max = 0x7fffffff;
  if (p.m > int_max || p.n > int_max || p.k > int_max)
    return Refuse(
        "jax_dynoff_gemm: m, n and k must be < 2^31 on CUDA");
  if (p.path == Path::kSm90SplitK && p.split_k > kMaxSplitK)
    return Refuse(
        "jax_dynoff_gemm: split_k " + std::to_string(p.split_k) + " > " +
        std::to_string(kMaxSplitK));
  // The planner's decision (jax_dynoff/plan.py wrote it into the call's
  // plan), refused where its own rules reject it.
  if (const std::string why = CheckPlanned(p); !why.empty())
    return Refuse(why);
  state->w = Layout(p);
  // Which kernel runs, for every case a run can present: the device's kind
  // and the bases' alignment (the execute stage picks one).
  for (int sm90 = 0; sm90 < 2; ++sm90)
    for (int a = 0; a < kNumAlignmentCases; ++a) {
      RunFacts f;
      f.sm90_device = sm90 == 1;
      f.sm90_built = Sm90Built();
      LaunchChoice& c = state->choice[sm90][a] =
          ChooseLaunch(p, WithAlignmentCase(f, a));
      if (!c.error.empty()) continue;  // refused where a run presents it
      const kernels::BuiltKernel& b = BuiltLine(c.line);
      const bool built =
          c.kind == LaunchKind::kGrouped  ? b.grouped != nullptr
          : c.kind == LaunchKind::kSkinny ? b.skinny != nullptr
          : c.kind == LaunchKind::kDirect ? b.direct != nullptr
                                          : b.gemm != nullptr;
      if (!built)
        return Refuse(std::string("jax_dynoff_gemm: this build has no ") +
                      (c.line < 0 ? "CUDA kernel for these dtypes"
                                  : LineName(c.line)));
    }
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
  // The launch a call at these addresses made (not while the kernel log
  // is on: it prints every call's choice).
  int device = 0;
  cudaError_t e = cudaGetDevice(&device);
  if (e != cudaSuccess) return CudaError("cudaGetDevice", e);
  PreparedLaunchCache::Key repeat_key;
  const bool keyed = RepeatKey(state, device, args, rets, &repeat_key);
  if (keyed && !LogEnabled()) {
    kernels::PreparedLaunch launch;
    if (state->repeat.Find(repeat_key, &launch)) {
      const std::string why = kernels::LaunchPrepared(launch, stream);
      if (!why.empty()) return fail(why);
      return ffi::Error::Success();
    }
  }
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
  DeviceInfo dev;
  if ((e = GetDeviceInfo(device, &dev)) != cudaSuccess)
    return CudaError("cudaDeviceGetAttribute", e);

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

  P.shapes = reinterpret_cast<int32_t*>(ws + w.shapes);
  P.strides = reinterpret_cast<int64_t*>(ws + w.strides);

  kernels::LaunchCommon common;
  common.alpha = static_cast<float>(alpha);
  common.beta = P.c_read ? static_cast<float>(beta) : 0.f;
  common.workspace = ws;
  common.workspace_bytes = static_cast<size_t>(w.kernel_bytes);
  common.device = device;
  common.sm_count = std::min(dev.sms, kernels::kSm90MaxSms);
  common.stream = stream;

  // --- The kernel: the instantiate stage's choice for this device's kind
  // and these bases' alignment.
  const bool ab_ws_aligned =
      Ptr16(P.base[kA]) && Ptr16(P.base[kB]) && Ptr16(ws);
  const bool bases_aligned =
      ab_ws_aligned && Ptr16(P.base[kC]) && Ptr16(P.base[kD]);
  const LaunchChoice& c =
      state->choice[dev.major == 9 && dev.minor == 0]
                   [AlignmentCase(bases_aligned, ab_ws_aligned)];
  if (!c.error.empty()) return fail(c.error);
  const kernels::BuiltKernel& built = BuiltLine(c.line);
  switch (c.kind) {
    case LaunchKind::kGrouped:
      LogCall(p, built.grouped->name, 1, stream);
      return RunGrouped(built.grouped, common, P, &state->cache);
    case LaunchKind::kSkinny: {
      LogCall(p, built.skinny->name, c.split, stream);
      kernels::PreparedLaunch launched;
      ffi::Error err =
          RunSkinny(built.skinny, common, P, c.split, &launched);
      if (!err.failure() && keyed) state->repeat.Store(repeat_key, launched);
      return err;
    }
    case LaunchKind::kDirect: {
      LogCall(p, built.direct->name, c.split, stream);
      kernels::PreparedLaunch launched;
      ffi::Error err = RunDirect(built.direct, common, P, c.split,
                                 c.cluster_k_tile_n, c.deterministic,
                                 &state->cache, &launched);
      if (!err.failure() && launched.fn != nullptr && keyed)
        state->repeat.Store(repeat_key, launched);
      return err;
    }
    case LaunchKind::kPtrArray:
      break;
  }
  if (c.slices) {
    const int64_t ks = p.k / c.split;
    P.slices = c.split;
    P.a_slice_bytes = ks * P.elt[kA];                 // A row-major: columns
    P.b_slice_bytes = ks * p.op[kB].ld() * P.elt[kB];  // B row-major: rows
  }
  LogCall(p, p.k == 0 ? "scale(k=0)" : built.gemm->name, c.split, stream);
  const Tf32Staging staging = StagingOf(p);
  return RunPtrArray(built.gemm, c.grid_z_batch, c.slices, common, P, w,
                     c.staged ? &staging : nullptr);
}

}  // namespace
}  // namespace cuda

XLA_FFI_DEFINE_HANDLER(kCudaGemmInstantiate, cuda::GemmInstantiate,
                       ffi::Ffi::BindInstantiate()
                           .Attrs<ffi::Dictionary>());

// The attributes were read by the instantiate stage: the execute stage
// binds none (attributes it does not name are not decoded).
XLA_FFI_DEFINE_HANDLER(kCudaGemm, cuda::GemmExecute,
                       ffi::Ffi::Bind()
                           .Ctx<ffi::PlatformStream<cudaStream_t>>()
                           .Ctx<ffi::State<cuda::GemmState>>()
                           .RemainingArgs()
                           .RemainingRets(),
                       {xla::ffi::Traits::kCmdBufferCompatible});

XLA_FFI_Handler* CudaGemmInstantiate() { return kCudaGemmInstantiate; }
XLA_FFI_Handler* CudaGemmHandler() { return kCudaGemm; }

void* CudaGemmStateTypeId() { return &cuda::GemmState::id; }

void* CudaGemmStateTypeInfo() {
  static XLA_FFI_TypeInfo info = ffi::MakeTypeInfo<cuda::GemmState>();
  return &info;
}

const char* CudaBuildInfo() { return cuda::BuildInfo(); }
bool CudaSm90Built() { return cuda::Sm90Built(); }

}  // namespace jax_dynoff
