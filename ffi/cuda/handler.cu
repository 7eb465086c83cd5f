// The CUDA FFI handler of target "jax_dynoff_gemm": two stages.  The
// runners (ffi/cuda/runners.h, one per kernel family), the small kernels
// around the GEMMs (ffi/cuda/prep.h) and the kernel registry
// (ffi/cuda/registry.h) are beside it.
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
// ptr-array one where the options allow it; the tiny path's cluster-K tile
// (kernels/sm90_cluster_k.h, planned where ClusterKTileN gives it a width,
// or forced) at the planner's width, from the desc
// (PlannedKernel::cluster_k_tile_n).  The
// skinny path runs one launch of the skinny kernel (kernels/sm90_skinny.h)
// at its planned split; where KernelOptions.skinny is False or a base is
// not aligned it runs the tiny tile as if planned for it, direct twin
// (planned too) included.
// The TF32 path (float32 in and out, default precision; any alignment)
// runs on every GPU the build has code for; KernelOptions.tf32 = False
// sends it to the exact generic kernel instead.  A float32 SM90 tile runs
// its planned direct TF32 kernel (NN: B read in place, nothing staged)
// where the options allow it, else the ptr-array TF32 kernel after the
// staging of its MN-major operands (the plan reserved their copies where
// KernelOptions(direct=False) asks for it), else, having no staged copy,
// the CUTLASS 2.x TF32 kernel.
// The grouped path (ragged windows: jax_dynoff.ragged_dot, vmapped calls
// with valid extents) runs its grouped kernel (kernels/sm90_grouped.h)
// after one pointer kernel, or fails with an error: no other kernel takes
// valid extents.
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
#include "plan.h"
#include "planner.h"
#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

namespace jax_dynoff {
namespace cuda {
namespace {

constexpr int64_t kMaxSplitK = 1024;  // a sanity bound on desc's split_k

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
  PlannedKernel kernel;  // desc[kKernel], checked against the rules

  PreparedLaunchCache cache;  // the direct kernels' launches

  // Whole calls made ready: where a call was one prepared direct launch
  // and nothing else (a loop's small GEMM), that launch, keyed by the
  // call's device and the addresses of every argument and result (the
  // key's kernel field is a tag, RepeatKey).  A call with the same device
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
  const KernelEntry* generic = GenericKernel(p.in_dtype, p.out_dtype);
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

  // --- Ragged windows: the grouped kernel, which nothing stands in for
  // (the planner chose it for this device's kind, so only a program moved
  // to another GPU or unaligned buffers land here without it).
  if (p.path == Path::kSm90Grouped) {
    const GroupedKernelEntry* grouped =
        Sm90GroupedKernel(p.in_dtype, p.out_dtype, p.trans_a, p.trans_b,
                          static_cast<GroupedTile>(p.kernel));
    if (grouped == nullptr || dev.major != 9 || dev.minor != 0)
      return fail("ragged windows need the grouped SM90 kernel: a build "
                  "with sm_90a kernels and a compute capability 9.0 GPU");
    if (!Ptr16(P.base[kA]) || !Ptr16(P.base[kB]) || !Ptr16(P.base[kD]) ||
        !Ptr16(ws))
      return fail("ragged windows need 16-byte aligned buffers");
    LogCall(p, grouped->name, 1, stream);
    return RunGrouped(grouped, common, P, &state->cache);
  }

  // --- Which kernel (host-only facts: attributes, device, addresses).
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
  // float32 at default precision: the CUTLASS 2.x TF32 kernel (any
  // alignment) for its path, and as the fallback of an SM90 tile (the SM90
  // TF32 kernels); KernelOptions(tf32=False) runs the exact generic kernel.
  // At HIGHEST an SM90 tile's fallback is the generic kernel.
  const bool f32_default = p.in_dtype == DType::kF32 &&
                           p.out_dtype == DType::kF32 &&
                           p.precision == Precision::kDefault;
  const bool no_tf32 = f32_default && Opt(p, opt::kNoTf32);
  const KernelEntry* const tf32 =
      Tf32Kernel(p.in_dtype, p.out_dtype, p.trans_a, p.trans_b);
  if ((p.path == Path::kTf32 || IsSm90Path(p.path)) && f32_default &&
      !no_tf32 && tf32 != nullptr)
    kernel = tf32;
  // The SM90 TF32 kernels' staging, where one runs (plan.h StagingOf).
  const Tf32Staging staging = StagingOf(p);
  bool staged = false;
  if (IsSm90Path(p.path) && !Opt(p, opt::kNoSm90) && !no_tf32 &&
      dev.major == 9 && dev.minor == 0 && p.k > 0) {
    const bool bases_ok = Ptr16(P.base[kA]) && Ptr16(P.base[kB]) &&
                          Ptr16(P.base[kC]) && Ptr16(P.base[kD]) && Ptr16(ws);
    const bool direct_ok = !Opt(p, opt::kNoDirect) && bases_ok;
    // The skinny path's fallback is the tiny tile (its workspace is the
    // tiny tile's, its direct twin the planned direct tile): where the
    // bases are not aligned or the options disable the skinny kernel.
    Path tile_path = p.path;
    if (p.path == Path::kSm90Skinny) {
      const SkinnyKernelEntry* ks = SkinnyKernel(p.in_dtype, p.trans_b);
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
    } else if (const KernelEntry* k90 =
                   p.in_dtype == DType::kF32 &&
                           p.precision == Precision::kHighest
                       ? Sm90Tf32HighestKernel(tile_path)
                       : Sm90Kernel(tile_path, p.in_dtype, p.out_dtype,
                                    p.trans_a, p.trans_b);
               k90 != nullptr && bases_ok) {
      kernel = k90;
      staged = p.in_dtype == DType::kF32;
      if (direct_ok) {
        direct_tile = planned.direct;
        direct = Sm90DirectKernel(p.in_dtype, p.out_dtype, p.trans_a,
                                  p.trans_b, direct_tile);
      }
      // A float32 call planned for the direct TF32 kernel has no staged
      // copy of its MN-major B in the workspace (plan.h StagingOf), which
      // the ptr-array TF32 kernel would need: where the direct kernel does
      // not run after all, the CUTLASS 2.x TF32 kernel (any layout, in
      // place) does.
      const bool k_major =
          (!p.trans_a || staging.a) && (p.trans_b || staging.b);
      if (direct == nullptr && staged && !k_major) {
        kernel = tf32;
        staged = false;
      }
    }
  }
  const int64_t slices = split ? p.split_k : 1;
  const int skinny_split = skinny != nullptr ? planned.skinny_split : 1;
  // A direct kernel's CTAs per output tile along K.
  const int direct_split =
      direct_tile == DirectTile::kSplitK     ? static_cast<int>(p.split_k)
      : direct_tile == DirectTile::kClusterK ? kernels::kClusterKSplit
                                             : 1;
  if (split) {
    const int64_t ks = p.k / slices;
    P.slices = slices;
    P.a_slice_bytes = ks * P.elt[kA];                 // A row-major: columns
    P.b_slice_bytes = ks * p.op[kB].ld() * P.elt[kB];  // B row-major: rows
  }
  LogCall(p,
          p.k == 0   ? "scale(k=0)"
          : skinny ? skinny->name
          : direct ? direct->name
                   : kernel->name,
          skinny ? skinny_split : direct ? direct_split : slices, stream);

  if (skinny != nullptr) return RunSkinny(skinny, common, P, skinny_split);
  if (direct != nullptr && p.k > 0) {
    kernels::PreparedLaunch launched;
    ffi::Error err = RunDirect(
        direct, common, P, direct_split,
        direct_tile == DirectTile::kClusterK ? planned.cluster_k_tile_n : 0,
        !Opt(p, opt::kNondeterministic), &state->cache, &launched);
    if (!err.failure() && launched.fn != nullptr && keyed)
      state->repeat.Store(repeat_key, launched);
    return err;
  }
  // The CUTLASS 2.x kernels (generic, TF32) index batch items with grid z
  // (<= 65535); the SM90 kernels take the whole batch.
  const bool grid_z_batch = kernel == generic || kernel == tf32;
  return RunPtrArray(kernel, grid_z_batch, split, common, P, w,
                     staged ? &staging : nullptr);
}

}  // namespace
}  // namespace cuda

XLA_FFI_DEFINE_HANDLER(kCudaGemmInstantiate, cuda::GemmInstantiate,
                       ffi::Ffi::BindInstantiate()
                           .Attr<ffi::Span<const int64_t>>("desc")
                           .Attr<double>("alpha")
                           .Attr<double>("beta"));

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

}  // namespace jax_dynoff
