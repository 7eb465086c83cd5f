// The skinny kernel (ffi/kernels/sm90_skinny.h) on its own, without JAX:
// checks it against a naive float32 GEMM (windows inside larger, poisoned
// buffers; B's layer chosen on the device) and times it on stacked-weight
// shapes, B not transposed and transposed, each GEMM
// reading a different layer of B (cold: B streams from HBM, as in a layer
// loop) or the same one (hot: from L2, as a loop over rows of one weight),
// beside a plain streaming kernel over the same bytes (--launch: that
// kernel with the skinny kernel's launch shape, and the skinny kernel's
// cluster placement; benchmarks/results/2026-12-04-h200-3bc3d7b/;
// --nocluster: a variant whose CTAs add their partials through global
// memory instead of a cluster, checked, then timed beside it; --checks:
// the checks alone, for a run under compute-sanitizer; --slope: the
// library's narrow tile and candidates of other stage depths over growing
// K (what a K stage costs); --narrow: the narrow tile's configurations,
// checked, then timed beside the wide kernel; --nnnt M N K: the narrow
// tile NN, then NT, each launched twice, for ncu; --launchform: the narrow
// tile launched as the library does and with a cluster attribute of one,
// each at the driver's and the largest carveout; --stages: the
// shipped kernel with 6 and 8 pipeline stages, the same).  Build and run:
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I ffi \
//     benchmarks/skinny/probe.cu -o /tmp/skinny_probe && /tmp/skinny_probe
#include <cuda_bf16.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <cstdio>
#include <utility>
#include <vector>

#include "kernels/sm90_skinny_narrow.h"
#include "probe_common.h"

using jax_dynoff::kernels::SkinnyLaunch;
using jax_dynoff::kernels::SkinnySplit;

using RunFn = std::string (*)(const SkinnyLaunch&);
template <bool TB, int ST = jax_dynoff::kernels::skinny::kDefaultStages>
std::string RunV(const SkinnyLaunch& l) {
  return jax_dynoff::kernels::skinny::Run<T, 1, TB, ST>(l);
}
constexpr RunFn RunNN = &RunV<false>, RunNT = &RunV<true>;

// A prepared launch made with the cluster-dimension attribute 1 x 1 x 1,
// which LaunchPrepared set on every launch until it learnt to leave it
// out for a cluster of one (--launchform at f38a9e2: the narrow tile at
// 8x4096x4096, 256 CTAs, 17.2 us with it against 12.4 without; the same
// host time, 4.0-4.1 us a launch of its 2,200-byte parameter block;
// 2026-12-06-h100-f38a9e2).
cudaError_t LaunchWithClusterOfOne(const jax_dynoff::kernels::PreparedLaunch& l,
                                   cudaStream_t stream) {
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = attr[0].val.clusterDim.y =
      attr[0].val.clusterDim.z = 1;
  cudaLaunchConfig_t config = {};
  config.gridDim = l.grid;
  config.blockDim = l.block;
  config.dynamicSmemBytes = l.smem;
  config.stream = stream;
  config.attrs = attr;
  config.numAttrs = 1;
  void* params[] = {const_cast<unsigned char*>(l.params)};
  return cudaLaunchKernelExC(&config, l.fn, params);
}

// The library's narrow skinny tile (kernels/sm90_skinny_narrow.h), NN, at
// configuration Cfg (its shipped one by default), prepared as the handler
// does (split 1) and launched as it does (LaunchPrepared: a plain launch,
// its cluster being one CTA), or, kAttr, with the cluster attribute of one
// (LaunchWithClusterOfOne).  kCarve >= 0 also sets the function's
// preferred shared-memory carveout (percent) once: two CTAs of 96 KiB fit
// an SM only where the driver picks a carveout of 192 KiB or more.  A
// carveout is the function's for the process, so a candidate that sets
// one passes its own Cfg type (another instantiation of the kernel).
template <typename Cfg = jax_dynoff::kernels::skinny_narrow::ShippedConfig,
          bool kAttr = false, int kCarve = -1, bool kTransB = false>
std::string RunNarrow(const SkinnyLaunch& l) {
  SkinnyLaunch one = l;
  one.split_k = 1;
  jax_dynoff::kernels::PreparedLaunch ready;
  if (std::string r =
          jax_dynoff::kernels::skinny_narrow::Prepare<T, kTransB, T, Cfg>(
              one, &ready);
      !r.empty())
    return r;
  if (kCarve >= 0) {
    static const cudaError_t carved = cudaFuncSetAttribute(
        ready.fn, cudaFuncAttributePreferredSharedMemoryCarveout, kCarve);
    if (carved != cudaSuccess) return cudaGetErrorString(carved);
  }
  if (!kAttr) return jax_dynoff::kernels::LaunchPrepared(ready, one.stream);
  const cudaError_t e = LaunchWithClusterOfOne(ready, one.stream);
  return e == cudaSuccess ? "" : cudaGetErrorString(e);
}
// A candidate configuration: kBK-deep stages, kStages of them, kWarps warps.
template <int kBK, int kStages, int kWarps>
constexpr RunFn RunNarrowCfg = &RunNarrow<
    jax_dynoff::kernels::skinny_narrow::NarrowConfig<kBK, kStages, kWarps>>;
// The shipped configuration as distinct types (distinct kernel functions),
// for the candidates that set a carveout on their own function.
struct CarveCfg : jax_dynoff::kernels::skinny_narrow::ShippedConfig {};
struct AttrCarveCfg : jax_dynoff::kernels::skinny_narrow::ShippedConfig {};
RunFn g_check_run = nullptr;  // Check's kernel (nullptr: NN or NT)
bool g_check_dyn_a = false;   // Check: A's rows, not B's layer, on the device

int sms = 0;

// Correctness: A, C, D windows at offsets inside padded buffers, B layer 1
// of 3 picked through a device start (clamped: value 1).
bool Check(int m, int n, int k, int split, float beta, bool tb = false) {
  // B is k x n, or with tb n x k (K contiguous): kb_rows rows of ldb.
  const int pad = 8, rows_d = m + 3, ldd = n + 2 * pad, lda = k + pad,
            ldb = (tb ? k : n) + pad, kb_rows = tb ? n : k;
  T *a, *b, *c, *d;
  float* ref;
  int32_t* layer;
  CK(cudaMalloc(&a, size_t(m + 1) * lda * 2));
  CK(cudaMalloc(&b, size_t(3) * kb_rows * ldb * 2));
  CK(cudaMalloc(&c, size_t(rows_d) * ldd * 2));
  CK(cudaMalloc(&d, size_t(rows_d) * ldd * 2));
  CK(cudaMalloc(&ref, size_t(m) * n * 4));
  CK(cudaMalloc(&layer, 4));
  int32_t one = 1;
  CK(cudaMemcpy(layer, &one, 4, cudaMemcpyHostToDevice));
  Fill<<<256, 256>>>(a, size_t(m + 1) * lda, 1);
  Fill<<<256, 256>>>(b, size_t(3) * kb_rows * ldb, 2);
  // NaN (0xffff) in B's layers 0 and 2 and in layer 1's pad columns: a
  // kernel that lets an element outside the window into a sum fails.
  CK(cudaMemset(b, 0xff, size_t(kb_rows) * ldb * 2));
  CK(cudaMemset(b + size_t(2) * kb_rows * ldb, 0xff, size_t(kb_rows) * ldb * 2));
  CK(cudaMemset2D(b + size_t(kb_rows) * ldb + (ldb - pad), ldb * 2, 0xff,
                  pad * 2, kb_rows));
  Fill<<<256, 256>>>(c, size_t(rows_d) * ldd, 3);
  CK(cudaMemset(d, 0x7f, size_t(rows_d) * ldd * 2));  // poison
  const T* aw = a + lda + pad;          // row 1, column 8
  const T* bw = b;                      // + layer * k * ldb on the device
  const T* cw = c + 2 * ldd + pad;
  T* dw = d + 2 * ldd + pad;
  SkinnyLaunch l;
  l.m = m; l.n = n; l.k = k; l.alpha = 0.5f; l.beta = beta;
  l.a = Op(aw, lda);
  l.b = Op(bw, ldb);
  l.b.terms = 1;
  l.b.term[0].slot.value = layer;
  l.b.term[0].dim = 3;
  l.b.term[0].win = 1;
  l.b.term[0].scale = int64_t(kb_rows) * ldb * 2;
  if (g_check_dyn_a) {  // A's rows through the device start, B's layer fixed
    l.a = Op(a + pad, lda);
    l.a.terms = 1;
    l.a.term[0].slot.value = layer;
    l.a.term[0].dim = m + 1;
    l.a.term[0].win = m;
    l.a.term[0].scale = int64_t(lda) * 2;
    l.b = Op(bw + size_t(kb_rows) * ldb, ldb);
  }
  l.c = Op(cw, ldd);
  l.d = Op(dw, ldd);
  l.split_k = split;
  l.device = 0;
  l.sm_count = sms;
  std::string r = (g_check_run ? g_check_run : tb ? RunNT : RunNN)(l);
  if (!r.empty()) { std::printf("run: %s\n", r.c_str()); return false; }
  CK(cudaGetLastError());
  Ref<<<dim3((n + 127) / 128, m), 128>>>(aw, lda, bw + size_t(kb_rows) * ldb,
                                         tb ? 1 : ldb, tb ? ldb : 1, cw, ldd,
                                         ref, m, n, k, 0.5f, beta);
  CK(cudaDeviceSynchronize());
  std::vector<uint16_t> hd(size_t(rows_d) * ldd);
  std::vector<float> hr(size_t(m) * n);
  CK(cudaMemcpy(hd.data(), d, hd.size() * 2, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(hr.data(), ref, hr.size() * 4, cudaMemcpyDeviceToHost));
  double max_err = 0, max_ref = 0;
  long outside = 0;
  for (int i = 0; i < rows_d; ++i)
    for (int j = 0; j < ldd; ++j) {
      uint16_t v = hd[size_t(i) * ldd + j];
      int wi = i - 2, wj = j - pad;
      if (wi < 0 || wi >= m || wj < 0 || wj >= n) {
        outside += v != 0x7f7f;
        continue;
      }
      uint32_t bits = uint32_t(v) << 16;
      float f;
      std::memcpy(&f, &bits, 4);
      float want = hr[size_t(wi) * n + wj];
      max_err = std::max(max_err, double(std::fabs(f - want)));
      max_ref = std::max(max_ref, double(std::fabs(want)));
    }
  const bool ok = outside == 0 && max_err <= 1e-2 * max_ref + 1e-2;
  std::printf("check %s%s m=%d n=%d k=%d split=%d beta=%g: max err %.3g (max "
              "|ref| %.3g), %ld changed outside: %s\n", tb ? "NT" : "NN",
              g_check_dyn_a ? " dynA" : "", m, n,
              k, split, beta, max_err, max_ref, outside, ok ? "ok" : "FAIL");
  cudaFree(a); cudaFree(b); cudaFree(c); cudaFree(d); cudaFree(ref);
  cudaFree(layer);
  return ok;
}

// The skinny kernel launched as skinny::Run does, but with the cluster
// scheduling policy and the dynamic shared memory (at least the kernel's)
// given: whether the placement of its clusters costs.
int g_policy = 0, g_smem = 0;
int g_carveout = -1;  // RunPlaced: the preferred carveout (-1: the driver's)

// A launch of `grid` CTAs of `threads` in clusters of `cluster` along x,
// placed by g_policy; `attr` holds the attributes the config points to.
cudaLaunchConfig_t ClusterConfig(int grid, int threads, int smem,
                                 cudaStream_t st, int cluster,
                                 cudaLaunchAttribute (&attr)[2]) {
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = cluster;
  attr[0].val.clusterDim.y = attr[0].val.clusterDim.z = 1;
  attr[1].id = cudaLaunchAttributeClusterSchedulingPolicyPreference;
  attr[1].val.clusterSchedulingPolicyPreference =
      g_policy ? cudaClusterSchedulingPolicyLoadBalancing
               : cudaClusterSchedulingPolicySpread;
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(grid);
  config.blockDim = dim3(threads);
  config.dynamicSmemBytes = smem;
  config.stream = st;
  config.attrs = attr;
  config.numAttrs = 2;
  return config;
}

template <bool TB>
std::string RunPlaced(const SkinnyLaunch& l) {
  namespace sk = jax_dynoff::kernels::skinny;
  constexpr int kSmem = sk::Smem<1, sk::kDefaultStages>::kBytes;
  const int smem = std::max(kSmem, g_smem);
  auto* fn = &sk::SkinnyKernel<T, 1, sk::kDefaultStages, TB>;
  CK(cudaFuncSetAttribute(reinterpret_cast<const void*>(fn),
                          cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  CK(cudaFuncSetAttribute(reinterpret_cast<const void*>(fn),
                          cudaFuncAttributePreferredSharedMemoryCarveout,
                          g_carveout));
  cudaLaunchAttribute attr[2];
  const cudaLaunchConfig_t config = ClusterConfig(
      (l.n + 127) / 128 * l.split_k, 128, smem, l.stream, l.split_k, attr);
  const cudaError_t e = cudaLaunchKernelEx(&config, fn, l);
  return e == cudaSuccess ? "" : cudaGetErrorString(e);
}

// A variant without clusters, to weigh against the cluster's launch cost
// (README of benchmarks/results/2026-12-04-h200-3bc3d7b): the same CTAs
// and main loop, but the `split` CTAs of a column tile add their float32
// partials through global memory: each writes its partial, and the last
// to arrive (an atomic count per tile, which the launches keep a multiple
// of `split`) adds them in rank order and writes D.  Its counters start
// at zero (cudaMemset before a run) and serve one split value.
struct GlobalReduce {
  float* partials = nullptr;     // tiles x split x 16 x 128
  unsigned* counters = nullptr;  // one per column tile
};
GlobalReduce g_reduce;
constexpr int kMaxTiles = 1024, kMaxGlobalSplit = 16;

template <bool TB>
__global__ void __launch_bounds__(128, 1)
    SkinnyGlobal(const SkinnyLaunch L, const GlobalReduce R) {
  namespace sk = jax_dynoff::kernels::skinny;
  using sk::kTileK;
  using sk::kTileN;
  using sk::kThreads;
  constexpr int kStages = sk::kDefaultStages, kM = 16;
  using Sm = sk::Smem<1, kStages>;
  extern __shared__ __align__(128) unsigned char smem[];
  __shared__ unsigned s_last;
  const int split = L.split_k;
  const int tile = static_cast<int>(blockIdx.x) / split;
  const int rank = static_cast<int>(blockIdx.x) % split;
  const int n0 = tile * kTileN;
  const T* A = reinterpret_cast<const T*>(L.a.Locate());
  const T* B = reinterpret_cast<const T*>(L.b.Locate());
  const int64_t lda = L.a.ld, ldb = L.b.ld;
  const int k_tiles = (L.k + kTileK - 1) / kTileK;
  const int t_begin = static_cast<int>(int64_t{rank} * k_tiles / split);
  const int t_end = static_cast<int>(int64_t{rank + 1} * k_tiles / split);
  const int k_hi = min(L.k, t_end * kTileK);
  const int tid = static_cast<int>(threadIdx.x), warp = tid >> 5,
            lane = tid & 31;
  const uint32_t base = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  auto a_stage = [&](int s) { return base + s * Sm::kAStage; };
  auto b_stage = [&](int s) {
    return base + kStages * Sm::kAStage + s * Sm::kBStage;
  };
  auto load = [&](int t, int s) {
    const int k0 = t * kTileK;
    {
      const int row = tid >> 3, c = tid & 7, kk = k0 + c * 8;
      const bool ok = row < L.m && kk < k_hi;
      sk::CpAsync16(a_stage(s) + sk::Swz(row, c, kTileK * 2),
                    ok ? A + row * lda + kk : A, ok);
    }
    if constexpr (TB) {
#pragma unroll
      for (int i = 0; i < kTileN * 8 / kThreads; ++i) {
        const int q = tid + i * kThreads, row = q >> 3, c = q & 7;
        const int kk = k0 + c * 8, col = n0 + row;
        const bool ok = kk < k_hi && col < L.n;
        sk::CpAsync16(b_stage(s) + sk::Swz(row, c, kTileK * 2),
                      ok ? B + col * ldb + kk : B, ok);
      }
    } else {
#pragma unroll
      for (int i = 0; i < kTileK * 16 / kThreads; ++i) {
        const int q = tid + i * kThreads, row = q >> 4, c = q & 15;
        const int kk = k0 + row, col = n0 + c * 8;
        const bool ok = kk < k_hi && col < L.n;
        sk::CpAsync16(b_stage(s) + sk::Swz(row, c, kTileN * 2),
                      ok ? B + kk * ldb + col : B, ok);
      }
    }
  };
  float acc[4][4] = {};
  const int tiles = t_end - t_begin;
#pragma unroll
  for (int i = 0; i < kStages - 1; ++i) {
    if (i < tiles) load(t_begin + i, i);
    sk::CpAsyncCommit();
  }
  for (int i = 0; i < tiles; ++i) {
    sk::CpAsyncWait<kStages - 2>();
    __syncthreads();
    if (i + kStages - 1 < tiles)
      load(t_begin + i + kStages - 1, (i + kStages - 1) % kStages);
    sk::CpAsyncCommit();
    const int s = i % kStages;
#pragma unroll
    for (int kk = 0; kk < kTileK / 16; ++kk) {
      const int mrow = ((lane >> 3) & 1) * 8 + (lane & 7), half = lane >> 4;
      uint32_t af[4];
      sk::Ldsm4(a_stage(s) + sk::Swz(mrow, kk * 2 + half, kTileK * 2), af);
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        uint32_t bf[4];
        if constexpr (TB)
          sk::Ldsm4(b_stage(s) + sk::Swz(warp * 32 + j * 16 + half * 8 +
                                             (lane & 7),
                                         kk * 2 + ((lane >> 3) & 1),
                                         kTileK * 2),
                    bf);
        else
          sk::Ldsm4T(b_stage(s) + sk::Swz(kk * 16 + mrow,
                                          warp * 4 + j * 2 + half,
                                          kTileN * 2),
                     bf);
        sk::Mma<T>(acc[2 * j], af, bf[0], bf[1]);
        sk::Mma<T>(acc[2 * j + 1], af, bf[2], bf[3]);
      }
    }
  }
  sk::CpAsyncWait<0>();
  // This rank's partial, row-major 16 x 128, then the count.
  float* mine = R.partials + (size_t(tile) * split + rank) * kM * kTileN;
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const int row = lane >> 2, col = warp * 32 + j * 8 + (lane & 3) * 2;
    __stcg(reinterpret_cast<float2*>(&mine[row * kTileN + col]),
           make_float2(acc[j][0], acc[j][1]));
    __stcg(reinterpret_cast<float2*>(&mine[(row + 8) * kTileN + col]),
           make_float2(acc[j][2], acc[j][3]));
  }
  __threadfence();
  __syncthreads();
  if (tid == 0)
    s_last = (atomicAdd(&R.counters[tile], 1u) + 1) % unsigned(split) == 0;
  __syncthreads();
  if (!s_last) return;
  __threadfence();
  T* D = reinterpret_cast<T*>(const_cast<char*>(L.d.Locate()));
  const T* C = L.beta != 0.f ? reinterpret_cast<const T*>(L.c.Locate())
                             : nullptr;
  const float* all = R.partials + size_t(tile) * split * kM * kTileN;
  for (int q = tid; q < kM * (kTileN / 8); q += kThreads) {
    const int row = q / (kTileN / 8), col = (q % (kTileN / 8)) * 8;
    if (row >= L.m || n0 + col >= L.n) continue;
    float v[8] = {};
    SumRanks<kTileN>(all, split, row, col, v);
    alignas(16) T out[8];
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      const float cv = C != nullptr
                           ? __bfloat162float(C[row * L.c.ld + n0 + col + e])
                           : 0.f;
      out[e] = __float2bfloat16_rn(L.alpha * v[e] + L.beta * cv);
    }
    *reinterpret_cast<uint4*>(D + row * L.d.ld + n0 + col) =
        *reinterpret_cast<const uint4*>(out);
  }
}

template <bool TB>
std::string RunGlobal(const SkinnyLaunch& l) {
  namespace sk = jax_dynoff::kernels::skinny;
  constexpr int kSmem = sk::Smem<1, sk::kDefaultStages>::kBytes;
  const int tiles = (l.n + 127) / 128;
  if (l.m > 16 || tiles > kMaxTiles || l.split_k > kMaxGlobalSplit)
    return "RunGlobal: problem too large for the probe's buffers";
  auto* fn = &SkinnyGlobal<TB>;
  CK(cudaFuncSetAttribute(reinterpret_cast<const void*>(fn),
                          cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));
  fn<<<tiles * l.split_k, 128, kSmem, l.stream>>>(l, g_reduce);
  const cudaError_t e = cudaGetLastError();
  return e == cudaSuccess ? "" : cudaGetErrorString(e);
}

void ResetCounters() {
  CK(cudaMemset(g_reduce.counters, 0, kMaxTiles * sizeof(unsigned)));
  CK(cudaDeviceSynchronize());
}

// Reads `bytes` (16 B per load, 8 loads in flight per thread) and writes
// one word per CTA: the bandwidth a grid of this shape can pull.
__device__ __forceinline__ uint32_t StreamBody(const uint4* p, size_t n) {
  uint32_t acc = 0;
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += 8 * stride) {
    uint4 v[8];
#pragma unroll
    for (int u = 0; u < 8; ++u)
      v[u] = i + u * stride < n ? __ldcg(p + i + u * stride) : make_uint4(0, 0, 0, 0);
#pragma unroll
    for (int u = 0; u < 8; ++u) acc ^= v[u].x ^ v[u].w;
  }
  return acc;
}
__global__ void Stream(const uint4* p, size_t n, uint32_t* out) {
  const uint32_t acc = StreamBody(p, n);
  if (acc == 0x12345678u) out[blockIdx.x] = acc;
}
// The same with `kBytes` of static shared memory, used so that it stays.
template <int kBytes>
__global__ void StreamStatic(const uint4* p, size_t n, uint32_t* out) {
  __shared__ uint32_t buf[kBytes / 4];
  const uint32_t acc = StreamBody(p, n);
  buf[threadIdx.x * (kBytes / 4 / 128)] = acc;
  __syncthreads();
  if (buf[((threadIdx.x + 1) % blockDim.x) * (kBytes / 4 / 128)] ==
      0x12345678u)
    out[blockIdx.x] = acc;
}
// The same with its cluster of 8 in the kernel (__cluster_dims__), not in
// the launch's attributes.
__global__ void __cluster_dims__(8, 1, 1)
    StreamCluster8(const uint4* p, size_t n, uint32_t* out) {
  const uint32_t acc = StreamBody(p, n);
  if (acc == 0x12345678u) out[blockIdx.x] = acc;
}
using StreamFn = void (*)(const uint4*, size_t, uint32_t*);

// A's m rows of 4 * m (k wide) at table[i] * m, read on the device as in
// a loop over rows at table offsets: idx holds {i, table[0..3]}.
jax_dynoff::kernels::SkinnyOperand TableRows(const T* a, int32_t* idx, int m, int k) {
  jax_dynoff::kernels::SkinnyOperand o = Op(a, k);
  o.terms = 1;
  o.term[0].slot.value = idx;
  o.term[0].slot.table = idx + 1;
  o.term[0].slot.table_len = 4;
  o.term[0].slot.mul = m;
  o.term[0].dim = 4 * m;
  o.term[0].win = m;
  o.term[0].scale = int64_t(k) * 2;
  return o;
}

// us per GEMM: `L` GEMMs captured in one CUDA graph (GraphUsPerLaunch), each reading layer i % L of B (cold: B streams from HBM) or
// layer 0 every time (hot: B stays in L2), replayed `reps` times.
// dyn_a: A's rows start at table[i] * m, read on the device (as in a loop
// over rows at table offsets: two dependent reads before A's address).
// body: 0 the GEMMs alone; 1 each after the loop's counter kernel (it
// advances i, whose table entry clamps to the last), all captured as
// kernel nodes; 2 the same with each GEMM a child graph node, as XLA
// records a custom call inside a command buffer; 3 and 4 the same two
// bodies as one graph of one iteration, launched from the host every
// iteration (XLA's body graphs); 5 the child graph node updated before
// every launch.
void Time(int m, int n, int k, int split, bool tb, bool hot, RunFn run,
          const char* label, bool dyn_a = false, int body = 0) {
  const int L = 32, reps = 20;
  T *a, *b, *d;
  int32_t* idx;  // {i, table[0..3]}
  CK(cudaMalloc(&idx, 5 * 4));
  const int32_t h_idx[5] = {1, 2, 0, 3, 1};
  CK(cudaMemcpy(idx, h_idx, sizeof h_idx, cudaMemcpyHostToDevice));
  CK(cudaMalloc(&a, size_t(4 * m) * k * 2));
  CK(cudaMalloc(&b, size_t(L) * k * n * 2));
  CK(cudaMalloc(&d, size_t(m) * n * 2));
  Fill<<<1024, 256>>>(a, size_t(4 * m) * k, 5);
  Fill<<<1024, 256>>>(b, size_t(L) * k * n, 6);
  cudaStream_t st;
  CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  if (split == 0) split = SkinnySplit(n, k, sms);
  SkinnyLaunch l;
  l.m = m; l.n = n; l.k = k; l.alpha = 1.f; l.beta = 0.f;
  l.a = dyn_a ? TableRows(a, idx, m, k) : Op(a, k);
  l.c = l.d = Op(d, n);
  l.split_k = split;
  l.sm_count = sms;
  l.stream = st;
  auto gemm = [&](int i) {
    SkinnyLaunch li = l;
    li.b = Op(b + size_t(hot ? 0 : i) * k * n, tb ? k : n);
    std::string r = run(li);
    if (!r.empty()) { std::printf("%s\n", r.c_str()); std::exit(1); }
  };
  double us = 0, host_us = 0;
  if (body == 2) {
    us = ChildGraphUsPerLaunch(st, L, reps, idx, gemm);
  } else if (body >= 3) {
    // One iteration's graph, launched from the host every iteration: 3 the
    // counter and the GEMM as kernel nodes; 4 the GEMM a child graph node
    // after the counter's kernel node (XLA's recording of a custom call);
    // 5 that, its child node updated (the same graph) before every launch.
    cudaGraph_t g, gi = nullptr;
    cudaGraphNode_t child = nullptr;
    if (body == 3) {
      CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
      Counter<<<1, 1, 0, st>>>(idx);
      gemm(0);
      CK(cudaStreamEndCapture(st, &g));
    } else {
      CK(cudaGraphCreate(&g, 0));
      const cudaGraphNode_t ctr = AddCounterNode(g, nullptr, idx);
      CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
      gemm(0);
      CK(cudaStreamEndCapture(st, &gi));
      CK(cudaGraphAddChildGraphNode(&child, g, &ctr, 1, gi));
    }
    std::function<void(cudaGraphExec_t)> update;
    if (body == 5)
      update = [&](cudaGraphExec_t ge) {
        CK(cudaGraphExecChildGraphNodeSetParams(ge, child, gi));
      };
    us = PerIterationGraphUs(st, g, L, reps, &host_us, update);
    if (gi != nullptr) CK(cudaGraphDestroy(gi));
  } else {
    us = GraphUsPerLaunch(st, L, reps, [&](int i) {
      if (body == 1) Counter<<<1, 1, 0, st>>>(idx);
      gemm(i);
    });
  }
  const double bytes = double(k) * n * 2;
  std::printf("time %-12s %s %s%s%s m=%3d n=%5d k=%5d split=%d: %7.2f us  %5.2f TB/s\n",
              label, tb ? "NT" : "NN", hot ? "hot " : "cold", dyn_a ? " dynA" : "",
              body == 1 ? " +ctr" : body == 2 ? " +ctr child"
              : body == 3 ? " +ctr per-iteration graph"
              : body == 4 ? " +ctr child per-iteration graph"
              : body == 5 ? " +ctr child per-iteration graph updated" : "",
              m, n, k, split, us, bytes / us / 1e6);
  if (body >= 3) std::printf("  host %.2f us a launch\n", host_us);
  cudaFree(a); cudaFree(b); cudaFree(d); cudaFree(idx);
  cudaStreamDestroy(st);
}

// What locating its windows costs a kernel that has just started, in SM
// cycles (clock64) of thread 0 of each CTA: LocateChain reads the loop
// counter's address from the parameters, the counter, then its table
// entry, one step at a time; LocateWhole locates A (a table look-up) and
// B (the counter) as the skinny kernel does (SkinnyOperand::Locate).
__device__ __forceinline__ long long Clock() {
  long long t;
  asm volatile("mov.u64 %0, %%clock64;" : "=l"(t)::"memory");
  return t;
}
// Waits for v (its load) before the next clock read: a store of v cannot
// issue before v has landed, and instructions issue in order.  (An empty
// asm with v as its operand emits no instruction, so the clock read went
// ahead of the load: 2-6 cycles for three dependent reads.)
__device__ __forceinline__ void Use(int64_t v) {
  __shared__ volatile int64_t sink;
  sink = v;
}
__global__ void __launch_bounds__(128, 1)
    LocateChain(const SkinnyLaunch L, long long* out) {
  const long long t0 = Clock();
  const jax_dynoff::SlotRef& slot = L.a.term[0].slot;
  const int32_t* vp = static_cast<const int32_t*>(slot.value);
  const int32_t* tp = static_cast<const int32_t*>(slot.table);
  Use(reinterpret_cast<int64_t>(vp) ^ reinterpret_cast<int64_t>(tp));
  const long long t1 = Clock();
  const int32_t v = *vp;
  Use(v);
  const long long t2 = Clock();
  const int64_t j = v < 0 ? 0 : v >= slot.table_len ? slot.table_len - 1 : v;
  const int32_t w = tp[j];
  Use(w);
  const long long t3 = Clock();
  if (threadIdx.x == 0) {
    long long* o = out + blockIdx.x * 4;
    o[0] = t1 - t0;
    o[1] = t2 - t1;
    o[2] = t3 - t2;
    o[3] = t3 - t0;
  }
}
__global__ void __launch_bounds__(128, 1)
    LocateWhole(const SkinnyLaunch L, long long* out) {
  const long long t0 = Clock();
  const char* a = L.a.Locate();
  const char* b = L.b.Locate();
  Use(reinterpret_cast<int64_t>(a) ^ reinterpret_cast<int64_t>(b));
  const long long t1 = Clock();
  if (threadIdx.x == 0) out[blockIdx.x * 4 + 3] = t1 - t0;
}

// Each after the loop's counter kernel, 32 iterations in one graph of 32
// CTAs, replayed; medians of the last replay's CTAs and iterations.
void TimeLocate(int m, int n, int k) {
  const int L = 32, ctas = 32;
  int clock_khz = 0;
  CK(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0));
  int32_t* idx;  // {i, table[0..3]}
  CK(cudaMalloc(&idx, 5 * 4));
  const int32_t h_idx[5] = {1, 2, 0, 3, 1};
  T *a, *b;
  CK(cudaMalloc(&a, size_t(4 * m) * k * 2));
  CK(cudaMalloc(&b, size_t(L) * k * n * 2));
  long long* out;
  CK(cudaMalloc(&out, size_t(L) * ctas * 4 * sizeof(long long)));
  cudaStream_t st;
  CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  SkinnyLaunch l;
  l.m = m; l.n = n; l.k = k;
  l.a = TableRows(a, idx, m, k);
  l.b = Op(b, n);  // B's layer from the counter, as in the stacked chain
  l.b.terms = 1;
  l.b.term[0].slot.value = idx;
  l.b.term[0].dim = L;
  l.b.term[0].win = 1;
  l.b.term[0].scale = int64_t(k) * n * 2;
  for (int which = 0; which < 2; ++which) {
    CK(cudaMemcpy(idx, h_idx, sizeof h_idx, cudaMemcpyHostToDevice));
    GraphUsPerLaunch(st, L, 20, [&](int i) {
      Counter<<<1, 1, 0, st>>>(idx);
      if (which == 0)
        LocateChain<<<ctas, 128, 0, st>>>(l, out + size_t(i) * ctas * 4);
      else
        LocateWhole<<<ctas, 128, 0, st>>>(l, out + size_t(i) * ctas * 4);
    });
    std::vector<long long> h(size_t(L) * ctas * 4);
    CK(cudaMemcpy(h.data(), out, h.size() * sizeof(long long),
                  cudaMemcpyDeviceToHost));
    auto median = [&](int field) {
      std::vector<long long> v;
      for (size_t r = 0; r < h.size() / 4; ++r) v.push_back(h[r * 4 + field]);
      std::sort(v.begin(), v.end());
      return v[v.size() / 2];
    };
    auto ns = [&](long long cycles) { return cycles * 1e6 / clock_khz; };
    if (which == 0)
      std::printf("locate chain m=%d: parameters %lld, counter %lld, table "
                  "entry %lld, all %lld cycles (%.0f ns at %.2f GHz)\n", m,
                  median(0), median(1), median(2), median(3), ns(median(3)),
                  clock_khz / 1e6);
    else
      std::printf("locate whole m=%d (A by table, B by counter): %lld cycles "
                  "(%.0f ns at %.2f GHz)\n", m, median(3), ns(median(3)),
                  clock_khz / 1e6);
  }
  cudaFree(idx); cudaFree(a); cudaFree(b); cudaFree(out);
  cudaStreamDestroy(st);
}

// The same capture of `Stream` kernels over k x n bytes of B: the floor a
// kernel of `ctas` x `threads` sees, hot or cold.
// fn: Stream or a variant; cluster 0: no cluster attribute (the kernel's
// own); carveout: the kernel's preferred shared-memory carveout (percent,
// -1 the driver's choice), set before the capture.
// per_iteration: instead, one graph per iteration (the loop's counter
// kernel, then the streaming kernel), launched from the host every
// iteration as XLA's body graphs are.
void TimeStream(int n, int k, int ctas, int threads, bool hot, int cluster = 1,
                int smem = 0, StreamFn fn = &Stream, int carveout = -1,
                const char* label = "stream", bool per_iteration = false) {
  const int L = 32, reps = 20;
  const size_t elems = size_t(k) * n * 2 / 16;
  uint4* b;
  uint32_t* out;
  CK(cudaMalloc(&b, L * elems * 16));
  CK(cudaMalloc(&out, 4096 * 4));
  CK(cudaMemset(b, 1, L * elems * 16));
  cudaStream_t st;
  CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  if (smem > 48 * 1024)
    CK(cudaFuncSetAttribute(reinterpret_cast<const void*>(fn),
                            cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  CK(cudaFuncSetAttribute(reinterpret_cast<const void*>(fn),
                          cudaFuncAttributePreferredSharedMemoryCarveout,
                          carveout));
  auto launch = [&](int i) {
    cudaLaunchAttribute attr[2];
    cudaLaunchConfig_t config =
        ClusterConfig(ctas, threads, smem, st, cluster, attr);
    if (cluster == 0) config.numAttrs = 0;
    const uint4* bi = b + (hot ? 0 : i) * elems;
    CK(cudaLaunchKernelEx(&config, fn, bi, elems, out));
  };
  double us = 0, host_us = 0;
  if (per_iteration) {
    int32_t* ctr;
    CK(cudaMalloc(&ctr, 4));
    cudaGraph_t g;
    CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
    Counter<<<1, 1, 0, st>>>(ctr);
    launch(0);
    CK(cudaStreamEndCapture(st, &g));
    us = PerIterationGraphUs(st, g, L, reps, &host_us);
    cudaFree(ctr);
  } else {
    us = GraphUsPerLaunch(st, L, reps, launch);
  }
  const double bytes = double(k) * n * 2;
  std::printf("time %-14s %4dx%-4d c%d s%-3d v%-3d %s n=%5d k=%5d: %7.2f us  "
              "%5.2f TB/s\n", label, ctas, threads, cluster, smem / 1024,
              carveout, hot ? "hot " : "cold", n, k, us, bytes / us / 1e6);
  if (per_iteration)
    std::printf("  +ctr per-iteration graph, host %.2f us a launch\n",
                host_us);
  cudaFree(b); cudaFree(out);
  cudaStreamDestroy(st);
}

// A candidate kernel of --slope and --narrow.
struct Cand { RunFn run; const char* name; };

// Each unsplit candidate against the naive GEMM, A's rows or B's layer
// from the device: odd m and n, K tails, beta 0, 1, 1.5 and 2.
template <size_t N>
bool CheckUnsplit(const Cand (&cands)[N]) {
  bool ok = true;
  for (const Cand& c : cands) {
    g_check_run = c.run;
    for (bool dyn : {false, true}) {
      g_check_dyn_a = dyn;
      ok &= Check(16, 4096, 4096, 1, 0.f);
      ok &= Check(13, 1000, 1000, 1, 1.5f);
      ok &= Check(9, 136, 2056, 1, 1.f);
      ok &= Check(1, 256, 72, 1, 0.f);
      ok &= Check(7, 8, 8, 1, 2.f);
    }
  }
  g_check_run = nullptr;
  g_check_dyn_a = false;
  return ok;
}

int main(int argc, char** argv) {
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  CK(cudaMalloc(&g_reduce.partials,
                size_t(kMaxTiles) * kMaxGlobalSplit * 16 * 128 * 4));
  CK(cudaMalloc(&g_reduce.counters, kMaxTiles * sizeof(unsigned)));
  bool ok = true;
  if (argc > 1 && std::strcmp(argv[1], "--stages") == 0) {
    // Deeper pipelines: the shipped kernel at 6 and 8 stages (a CTA keeps
    // 96 or 128 KiB of B in flight, not 64), checked with split 1 and the
    // planner's split, then timed beside the shipped 4 where B streams
    // from HBM (the stacked chain, every GEMM a new layer) and from L2
    // (the table loop, A's rows from the device), 32 GEMMs and their
    // counters in one graph.
    const Cand cands[] = {{&RunV<false, 6>, "s6"}, {&RunV<false, 8>, "s8"}};
    bool ok = true;
    for (const Cand& c : cands) {
      g_check_run = c.run;
      for (int split : {1, 0}) {
        ok &= Check(16, 4096, 4096, split ? split : SkinnySplit(4096, 4096, sms), 0.f);
        ok &= Check(13, 1000, 1000, split ? split : SkinnySplit(1000, 1000, sms), 1.5f);
        ok &= Check(9, 136, 2056, split ? split : SkinnySplit(136, 2056, sms), 1.f);
        ok &= Check(1, 256, 72, 1, 0.f);
      }
    }
    g_check_run = nullptr;
    if (!ok) {
      std::printf("SOME CHECKS FAILED\n");
      return 1;
    }
    const int shapes[][3] = {{16, 4096, 4096}, {8, 4096, 4096},
                             {1, 4096, 4096},  {16, 2048, 4096},
                             {8, 2048, 2048},  {16, 512, 2048}};
    for (auto& sh : shapes)
      for (bool hot : {false, true})
        for (int rep = 0; rep < 2; ++rep) {
          Time(sh[0], sh[1], sh[2], 0, false, hot, RunNN, "shipped", hot);
          for (const Cand& c : cands)
            Time(sh[0], sh[1], sh[2], 0, false, hot, c.run, c.name, hot);
        }
    std::printf("ALL CHECKS OK\n");
    return 0;
  }
  if (argc > 1 && std::strcmp(argv[1], "--launchform") == 0) {
    // How the library launches the narrow tile: LaunchPrepared (a plain
    // launch) against one with the cluster attribute of 1, each with the driver's
    // carveout and with the largest one (100%), checked, then timed B hot
    // as the table loop runs them: 32 launches in one graph, the same after
    // the loop's counter, and one graph an iteration (counter + GEMM, what
    // XLA's body graphs launch).  The occupancy calculator's blocks and
    // clusters an SM first.
    const Cand cands[] = {
        {&RunNarrow<>, "lib_narrow"},
        {&RunNarrow<jax_dynoff::kernels::skinny_narrow::ShippedConfig, true>,
         "lib_narrow_attr1"},
        {&RunNarrow<CarveCfg, false, 100>, "lib_narrow_carve"},
        {&RunNarrow<AttrCarveCfg, true, 100>, "lib_narrow_attr1_carve"}};
    {
      namespace sn = jax_dynoff::kernels::skinny_narrow;
      using Cfg = sn::ShippedConfig;
      const void* fn =
          reinterpret_cast<const void*>(&sn::NarrowKernel<T, false, T, Cfg>);
      CK(cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize,
                              Cfg::kBytes));
      int blocks = 0, clusters = 0;
      CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, fn,
                                                       Cfg::kThreads,
                                                       Cfg::kBytes));
      cudaLaunchAttribute attr[1];
      attr[0].id = cudaLaunchAttributeClusterDimension;
      attr[0].val.clusterDim.x = attr[0].val.clusterDim.y =
          attr[0].val.clusterDim.z = 1;
      cudaLaunchConfig_t config = {};
      config.gridDim = dim3(256);
      config.blockDim = dim3(Cfg::kThreads);
      config.dynamicSmemBytes = Cfg::kBytes;
      config.attrs = attr;
      config.numAttrs = 1;
      CK(cudaOccupancyMaxActiveClusters(&clusters, fn, &config));
      std::printf("occupancy: %d blocks an SM, %d clusters of 1 on the GPU "
                  "(%d SMs), %d bytes of shared memory a CTA\n",
                  blocks, clusters, sms, Cfg::kBytes);
    }
    if (!CheckUnsplit(cands)) {
      std::printf("SOME CHECKS FAILED\n");
      return 1;
    }
    // Host microseconds a launch, each form (no graph; the stream drained
    // every 256 launches, so the queue never fills; 8x512x256, whose
    // device time is under a launch's host time): what a loop driven from
    // the host pays per call at XLA's default flags.
    {
      const int m = 8, n = 512, k = 256;
      T *a, *b, *d;
      CK(cudaMalloc(&a, size_t(m) * k * 2));
      CK(cudaMalloc(&b, size_t(k) * n * 2));
      CK(cudaMalloc(&d, size_t(m) * n * 2));
      cudaStream_t st;
      CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
      SkinnyLaunch l;
      l.m = m; l.n = n; l.k = k; l.alpha = 1.f; l.beta = 0.f;
      l.a = Op(a, k); l.b = Op(b, n); l.c = l.d = Op(d, n);
      l.split_k = 1; l.sm_count = sms; l.stream = st;
      namespace kk = jax_dynoff::kernels;
      kk::PreparedLaunch ready;
      if (std::string r = kk::skinny_narrow::Prepare<T, false, T>(l, &ready);
          !r.empty()) {
        std::printf("%s\n", r.c_str());
        return 1;
      }
      for (int plain = 0; plain < 2; ++plain) {
        // plain: as LaunchPrepared launches a cluster of one.
        auto launch = [&] {
          if (plain) {
            const std::string r = kk::LaunchPrepared(ready, st);
            if (!r.empty()) {
              std::printf("%s\n", r.c_str());
              std::exit(1);
            }
          } else {
            CK(LaunchWithClusterOfOne(ready, st));
          }
        };
        for (int rep = 0; rep < 2; ++rep) {
          double total = 0;
          const int chunks = 40;
          for (int c = 0; c < chunks; ++c) {
            CK(cudaStreamSynchronize(st));
            const auto t0 = std::chrono::steady_clock::now();
            for (int i = 0; i < 256; ++i) launch();
            total += std::chrono::duration<double, std::micro>(
                         std::chrono::steady_clock::now() - t0).count();
          }
          std::printf("host %-24s %zu-byte parameters: %.2f us a launch\n",
                      plain ? "LaunchPrepared (plain)" : "cluster attribute 1",
                      ready.param_bytes, total / (chunks * 256));
        }
      }
      CK(cudaStreamSynchronize(st));
      cudaFree(a); cudaFree(b); cudaFree(d);
      cudaStreamDestroy(st);
    }
    const int shapes[][3] = {{8, 512, 1024},  {8, 2048, 2048},
                             {8, 4096, 1024}, {8, 4096, 4096},
                             {16, 4096, 2048}, {8, 1536, 1536}};
    for (auto& sh : shapes)
      for (int body : {0, 1, 3})
        for (int rep = 0; rep < 2; ++rep)
          for (const Cand& c : cands)
            Time(sh[0], sh[1], sh[2], 0, false, true, c.run, c.name, true,
                 body);
    // The same tile reading B transposed (NT: n x k, K contiguous, a CTA's
    // 16 rows of B 1 KiB each a stage) beside NN (k x n: 512 rows of 32
    // bytes a stage, one 32-byte sector of each 128-byte line): whether
    // the narrow NN stage is bound by its many short rows.  (NT's results
    // are checked by the library's GPU tests, not here.)
    for (auto& sh : shapes)
      for (int rep = 0; rep < 2; ++rep)
        for (bool tb : {false, true})
          Time(sh[0], sh[1], sh[2], 0, tb, true,
               tb ? &RunNarrow<jax_dynoff::kernels::skinny_narrow::ShippedConfig,
                               false, -1, true>
                  : &RunNarrow<>,
               tb ? "lib_narrow_nt" : "lib_narrow_nn", true, 1);
    std::printf("ALL CHECKS OK\n");
    return 0;
  }
  if (argc > 1 && std::strcmp(argv[1], "--slope") == 0) {
    // What a K stage costs: the library's narrow tile (16 columns, 8 warps;
    // kernels/sm90_skinny_narrow.h) beside candidates of other stage depths
    // and counts or more warps (n16w8k256s4: the narrow tile as first
    // shipped, 256-deep stages, 4 of them), over K = 256 .. 4096 at n = 512
    // (32 CTAs) and at n = 2048 / 4096, checked first, then timed hot (the
    // table loop: A's rows from the device, B in L2) and cold.  The growth
    // per 256 of K against a plain stream of the same bytes (TimeStream)
    // tells a latency-bound pipeline from a bandwidth-bound one;
    // lib_narrow_attr1 is the library's launch with a cluster attribute of
    // 1, as it launched before f38a9e2's run.
    const Cand cands[] = {
        {&RunNarrow<>, "lib_narrow"},
        {&RunNarrow<jax_dynoff::kernels::skinny_narrow::ShippedConfig, true>,
         "lib_narrow_attr1"},
        {RunNarrowCfg<256, 4, 8>, "n16w8k256s4"},
        {RunNarrowCfg<512, 2, 8>, "n16w8k512s2"},
        {RunNarrowCfg<1024, 2, 8>, "n16w8k1024s2"},
        {RunNarrowCfg<512, 3, 16>, "n16w16k512s3"}};
    if (!CheckUnsplit(cands)) {
      std::printf("SOME CHECKS FAILED\n");
      return 1;
    }
    const int shapes[][3] = {{8, 512, 256},   {8, 512, 1024}, {8, 512, 2048},
                             {8, 512, 4096},  {8, 2048, 512}, {8, 2048, 2048},
                             {8, 4096, 1024}, {8, 4096, 4096}};
    for (auto& sh : shapes) {
      for (bool hot : {true, false}) {
        Time(sh[0], sh[1], sh[2], 0, false, hot, RunNN, "wide", hot, 1);
        for (const Cand& c : cands)
          Time(sh[0], sh[1], sh[2], 0, false, hot, c.run, c.name, hot, 1);
      }
      TimeStream(sh[1], sh[2], sh[1] / 16, 256, true);
      TimeStream(sh[1], sh[2], sh[1] / 16, 256, false);
    }
    std::printf("ALL CHECKS OK\n");
    return 0;
  }
  if (argc > 4 && std::strcmp(argv[1], "--nnnt") == 0) {
    // The narrow tile at one shape, NN then NT, each launched twice on its
    // own (the second with B in L2): for ncu, which profiles launches, not
    // the graphs Time replays (--cache-control none keeps B in L2).
    const int m = std::atoi(argv[2]), n = std::atoi(argv[3]),
              k = std::atoi(argv[4]);
    T *a, *b, *d;
    CK(cudaMalloc(&a, size_t(m) * k * 2));
    CK(cudaMalloc(&b, size_t(k) * n * 2));
    CK(cudaMalloc(&d, size_t(m) * n * 2));
    Fill<<<256, 256>>>(a, size_t(m) * k, 1);
    Fill<<<1024, 256>>>(b, size_t(k) * n, 2);
    SkinnyLaunch l;
    l.m = m; l.n = n; l.k = k; l.alpha = 1.f; l.beta = 0.f;
    l.a = Op(a, k);
    l.c = l.d = Op(d, n);
    l.sm_count = sms;
    for (bool tb : {false, true}) {
      l.b = Op(b, tb ? k : n);  // the same bytes, read as k x n or n x k
      for (int rep = 0; rep < 2; ++rep) {
        const std::string r =
            tb ? RunNarrow<jax_dynoff::kernels::skinny_narrow::ShippedConfig,
                           false, -1, true>(l)
               : RunNarrow<>(l);
        if (!r.empty()) { std::printf("%s\n", r.c_str()); return 1; }
        CK(cudaDeviceSynchronize());
      }
    }
    std::printf("NNNT DONE\n");
    return 0;
  }
  if (argc > 1 && std::strcmp(argv[1], "--narrow") == 0) {
    // The narrow tile's configurations (kernels/sm90_skinny_narrow.h
    // NarrowConfig: 16 columns a CTA over all of K, its warps splitting K,
    // no cluster; 32 columns a CTA lost everywhere, 2026-12-06-h100-eecdbf4)
    // and the shipped one: checked (A's rows or B's layer from
    // the device, odd m and n, beta 0, 1 and 1.5), then timed beside the
    // shipped kernel as the table loop runs them (A's rows at a table
    // entry, B hot, after the loop's counter; in one graph, then one graph
    // an iteration) and as a stacked loop does (B cold).
    const Cand cands[] = {
        {&RunNarrow<>, "lib_narrow"},
        {RunNarrowCfg<256, 4, 4>, "n16w4k256s4"},
        {RunNarrowCfg<128, 6, 4>, "n16w4k128s6"},
        {RunNarrowCfg<256, 4, 8>, "n16w8k256s4"},
        {RunNarrowCfg<128, 4, 2>, "n16w2k128s4"}};
    if (!CheckUnsplit(cands)) {
      std::printf("SOME CHECKS FAILED\n");
      return 1;
    }
    const int shapes[][3] = {{8, 2048, 2048}, {16, 512, 1536}, {8, 512, 512},
                             {1, 512, 1024},  {16, 4096, 4096}, {8, 4096, 512},
                             {16, 1536, 1536}, {16, 512, 2048}};
    for (auto& sh : shapes) {
      for (int body : {1, 3}) {
        Time(sh[0], sh[1], sh[2], 0, false, true, RunNN, "shipped", true, body);
        for (const Cand& c : cands)
          Time(sh[0], sh[1], sh[2], 0, false, true, c.run, c.name, true, body);
      }
      Time(sh[0], sh[1], sh[2], 0, false, false, RunNN, "shipped", false, 1);
      for (const Cand& c : cands)
        Time(sh[0], sh[1], sh[2], 0, false, false, c.run, c.name, false, 1);
    }
    std::printf("ALL CHECKS OK\n");
    return 0;
  }
  if (argc > 1 && std::strcmp(argv[1], "--nocluster") == 0) {
    // The variant without clusters: checked at every split (counters reset
    // between splits), then timed beside the cluster kernel at the same
    // split and at twice the split (no cluster-size limit of 8).
    for (bool tb : {false, true})
      for (int split : {1, 2, 4, 8, 16}) {
        ResetCounters();
        g_check_run = tb ? &RunGlobal<true> : &RunGlobal<false>;
        ok &= Check(16, 4096, 4096, split, 0.f, tb);
        ResetCounters();
        ok &= Check(13, 1000, 1000, split, 1.5f, tb);
        ResetCounters();
        ok &= Check(9, 136, 2056, split, 1.f, tb);
      }
    g_check_run = nullptr;
    const int shapes[][3] = {{16, 4096, 4096}, {8, 2048, 2048},
                             {16, 512, 1536}, {8, 4096, 512}, {1, 512, 1024},
                             {16, 1536, 1536}};
    for (auto& sh : shapes) {
      const int m = sh[0], n = sh[1], k = sh[2], s0 = SkinnySplit(n, k, sms);
      for (bool hot : {false, true}) {
        Time(m, n, k, s0, false, hot, RunNN, "cluster");
        for (int split : {s0, 2 * s0}) {
          ResetCounters();
          Time(m, n, k, split, false, hot, &RunGlobal<false>, "global");
        }
      }
    }
    std::printf(ok ? "ALL CHECKS OK\n" : "SOME CHECKS FAILED\n");
    return ok ? 0 : 1;
  }
  for (bool tb : {false, true}) {
    for (int split : {1, 2, 4, 8}) {
      ok &= Check(16, 4096, 4096, split, 0.f, tb);
      ok &= Check(13, 1000, 1000, split, 1.5f, tb);
    }
    ok &= Check(1, 256, 72, 1, 0.f, tb);
    ok &= Check(7, 8, 8, 1, 2.f, tb);
    ok &= Check(9, 136, 2056, 4, 1.f, tb);
  }
  g_check_dyn_a = true;
  for (bool tb : {false, true}) {
    ok &= Check(16, 4096, 4096, 4, 0.f, tb);
    ok &= Check(13, 1000, 1000, 2, 1.5f, tb);
    ok &= Check(9, 136, 2056, 1, 1.f, tb);
    ok &= Check(1, 256, 72, 8, 0.f, tb);  // fewer K tiles than ranks' stages
  }
  g_check_dyn_a = false;
  g_check_run = &RunV<false, 8>;
  ok &= Check(16, 4096, 4096, 4, 0.f);
  ok &= Check(13, 1000, 1000, 2, 1.5f);
  g_check_run = &RunV<true, 8>;
  ok &= Check(16, 4096, 4096, 4, 0.f, true);
  ok &= Check(3, 72, 200, 1, 1.f, true);
  g_check_run = nullptr;
  if (argc > 1 && std::strcmp(argv[1], "--checks") == 0) {
    // The checks alone (a run under compute-sanitizer).
  } else if (argc > 1 && std::strcmp(argv[1], "--launch2") == 0) {
    // Where a cluster launch with shared memory loses its microsecond
    // (README of benchmarks/results/2026-12-04-h200-3bc3d7b: about 1.3 us
    // at 2048^2 in the streaming kernel, none with either alone): dynamic
    // against static shared memory, the cluster in the launch or in the
    // kernel, the preferred carveout left to the driver or all shared;
    // then the skinny kernel itself at both carveouts.
    for (auto [n, k] : {std::pair{512, 1024}, {2048, 2048}}) {
      const int split = SkinnySplit(n, k, sms), ctas = (n / 128) * split;
      for (int rep = 0; rep < 2; ++rep) {
        // No launch attribute at all, then a cluster of 1 (how every
        // prepared launch of the library goes, kernels/launch.h).
        TimeStream(n, k, ctas, 128, false, 0, 0, &Stream, -1, "noattr");
        TimeStream(n, k, ctas, 128, false, 0, 16384, &Stream, -1,
                   "noattr_dyn16");
        TimeStream(n, k, ctas, 128, false, 1, 0, &Stream, -1, "plain");
        TimeStream(n, k, ctas, 128, false, split, 0, &Stream, -1, "cl");
        TimeStream(n, k, ctas, 128, false, 1, 16384, &Stream, -1, "dyn16");
        TimeStream(n, k, ctas, 128, false, split, 16384, &Stream, -1,
                   "cl_dyn16");
        TimeStream(n, k, ctas, 128, false, split, 16384, &Stream, 100,
                   "cl_dyn16_v100");
        TimeStream(n, k, ctas, 128, false, split, 75776, &Stream, -1,
                   "cl_dyn74");
        TimeStream(n, k, ctas, 128, false, split, 75776, &Stream, 100,
                   "cl_dyn74_v100");
        TimeStream(n, k, ctas, 128, false, split, 0, &StreamStatic<16384>,
                   -1, "cl_static16");
        TimeStream(n, k, ctas, 128, false, split, 0, &StreamStatic<40960>,
                   -1, "cl_static40");
        TimeStream(n, k, ctas, 128, false, 1, 0, &StreamStatic<16384>, -1,
                   "static16");
        if (split == 8) {
          TimeStream(n, k, ctas, 128, false, 0, 0, &StreamCluster8, -1,
                     "cd8");
          TimeStream(n, k, ctas, 128, false, 0, 16384, &StreamCluster8, -1,
                     "cd8_dyn16");
        }
      }
    }
    const int shapes[][3] = {{8, 2048, 2048}, {16, 512, 1536},
                             {1, 512, 1024}, {16, 4096, 4096}};
    for (auto& sh : shapes)
      for (bool hot : {true, false}) {
        for (int carveout : {-1, 100, -1, 100}) {
          g_carveout = carveout;
          Time(sh[0], sh[1], sh[2], 0, false, hot, &RunPlaced<false>,
               carveout < 0 ? "placed" : "placed_v100", true);
        }
        // Two and three stages against the shipped four.  (Two stages in
        // static shared memory timed as the two in dynamic memory, within
        // 0.05 us, on an H100; the static form left the kernel.)
        for (int rep = 0; rep < 2; ++rep) {
          Time(sh[0], sh[1], sh[2], 0, false, hot, RunNN, "shipped", true);
          Time(sh[0], sh[1], sh[2], 0, false, hot, &RunV<false, 2>,
               "st2_dynamic", true);
          Time(sh[0], sh[1], sh[2], 0, false, hot, &RunV<false, 3>,
               "st3_dynamic", true);
        }
      }
    g_carveout = -1;
  } else if (argc > 1 && std::strcmp(argv[1], "--child") == 0) {
    // What XLA's way of recording a custom call in a body graph costs: the
    // loop's counter kernel, then the GEMM as a kernel node or as a child
    // graph node (a graph of its own, cloned in); the table loop's GEMM
    // (A's rows from the device, B hot), twice each, interleaved.
    const int shapes[][3] = {{8, 512, 2048}, {16, 512, 4096},
                             {8, 2048, 2048}, {16, 2048, 4096},
                             {1, 512, 1024}};
    for (auto& sh : shapes)
      for (int rep = 0; rep < 2; ++rep)
        for (int body : {1, 2})
          Time(sh[0], sh[1], sh[2], 0, false, true, RunNN, "nn", true, body);
  } else if (argc > 1 && std::strcmp(argv[1], "--pergraph") == 0) {
    // A loop with body graphs: each iteration one graph launch from the
    // host.  First bodies of tiny kernels alone (1, 2 or 4 counter
    // kernels: what a graph launch and a kernel boundary cost on the
    // device), then the table loop's GEMM after the counter, all in one
    // graph against one graph per iteration (kernel node, child graph
    // node, child graph node updated before each launch), twice each,
    // interleaved.
    cudaStream_t st;
    CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    int32_t* ctr;
    CK(cudaMalloc(&ctr, 4));
    CK(cudaMemset(ctr, 0, 4));
    for (int rep = 0; rep < 2; ++rep)
      for (int kernels : {1, 2, 4}) {
        cudaGraph_t g;
        CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
        for (int j = 0; j < kernels; ++j) Counter<<<1, 1, 0, st>>>(ctr);
        CK(cudaStreamEndCapture(st, &g));
        double host_us = 0;
        const double us = PerIterationGraphUs(st, g, 32, 20, &host_us);
        std::printf("time per-iteration graph of %d counter kernel(s): %7.2f us (host %.2f us a launch)\n",
                    kernels, us, host_us);
      }
    cudaFree(ctr);
    cudaStreamDestroy(st);
    // The counter and a streaming kernel of the table loop's grid (32 CTAs
    // over 1 MB, in L2) per graph: no attribute, a cluster of 8, the
    // skinny kernel's 74 KiB of dynamic shared memory, or both.
    for (int rep = 0; rep < 2; ++rep)
      for (auto [cluster, smem] : {std::pair{0, 0}, {8, 0}, {0, 74}, {8, 74}})
        TimeStream(512, 1024, 32, 128, true, cluster, smem * 1024, &Stream,
                   -1, "stream_pergraph", true);
    const int shapes[][3] = {{8, 512, 2048}, {16, 512, 4096},
                             {8, 2048, 2048}, {16, 2048, 4096},
                             {1, 512, 1024}};
    for (auto& sh : shapes)
      for (int rep = 0; rep < 2; ++rep)
        for (int body : {1, 3, 4, 5})
          Time(sh[0], sh[1], sh[2], 0, false, true, RunNN, "nn", true, body);
  } else if (argc > 1 && std::strcmp(argv[1], "--locate") == 0) {
    // What the skinny kernel's "located" phase (~0.9 us in phases.cu) is
    // made of: each dependent read of the window's offsets, timed alone.
    for (int rep = 0; rep < 2; ++rep) TimeLocate(8, 512, 2048);
  } else if (argc > 1 && std::strcmp(argv[1], "--table") == 0) {
    // The loop over rows at table offsets: A's rows read on the device, B
    // one weight (hot: from L2, as in the loop; cold: from HBM), at the
    // planner's split, on the sweep's m <= 16 shapes.
    const int shapes[][3] = {{16, 4096, 4096}, {8, 2048, 2048},
                             {16, 2048, 2048}, {16, 512, 1536},
                             {8, 512, 4096},   {8, 4096, 512},
                             {1, 512, 1024},   {16, 1536, 512},
                             {16, 1536, 1536}};
    for (auto& sh : shapes)
      for (bool hot : {true, false}) {
        Time(sh[0], sh[1], sh[2], 0, false, hot, RunNN, "nn", true);
        if (hot) Time(sh[0], sh[1], sh[2], 0, true, hot, RunNT, "nt", true);
      }
  } else if (argc > 1 && std::strcmp(argv[1], "--launch") == 0) {
    // What the launch shape alone costs: a streaming kernel of the skinny
    // kernel's grid, with its cluster (either scheduling policy) and shared
    // memory or not; then the skinny kernel itself placed either way, with
    // its own shared memory or enough for one CTA per SM.
    for (auto [n, k] : {std::pair{512, 1024}, {2048, 2048}, {4096, 4096}}) {
      const int split = SkinnySplit(n, k, sms), ctas = (n / 128) * split;
      for (int cluster : {1, split})
        for (int smem : {0, 16, 36, 56, 74, 120})
          for (int policy : {0, 1}) {
            if (cluster == 1 && policy == 1) continue;
            g_policy = policy;
            TimeStream(n, k, ctas, 128, false, cluster, smem * 1024);
          }
    }
    const int shapes[][3] = {{16, 4096, 4096}, {8, 2048, 2048},
                             {16, 512, 1536}, {8, 4096, 512}, {1, 512, 1024}};
    for (auto& sh : shapes)
      for (int policy : {0, 1})
        for (int smem : {0, 120 * 1024}) {
          g_policy = policy;
          g_smem = smem;
          char label[32];
          std::snprintf(label, sizeof label, "%s%s",
                        policy ? "balance" : "spread", smem ? "_1cta" : "");
          Time(sh[0], sh[1], sh[2], 0, false, false, &RunPlaced<false>,
               label);
        }
    g_policy = g_smem = 0;
  } else {
    const int shapes[][3] = {{16, 4096, 4096}, {8, 2048, 2048},
                             {16, 512, 1536}, {8, 4096, 512}, {1, 512, 1024},
                             {16, 1536, 1536}};
    for (auto& sh : shapes) {
      const int m = sh[0], n = sh[1], k = sh[2];
      TimeStream(n, k, sms, 128, false);
      TimeStream(n, k, 4 * sms, 256, false);
      for (bool hot : {false, true}) {
        for (int split : {0, 1, 2, 4, 8}) {
          if (split != 0 && split == SkinnySplit(n, k, sms)) continue;
          Time(m, n, k, split, false, hot, RunNN, "nn");
        }
        Time(m, n, k, 0, false, hot, &RunV<false, 8>, "nn_st8");
        Time(m, n, k, 0, false, hot, RunNN, "nn", true);
        Time(m, n, k, 0, true, hot, RunNT, "nt");
      }
    }
  }
  std::printf(ok ? "ALL CHECKS OK\n" : "SOME CHECKS FAILED\n");
  return ok ? 0 : 1;
}
