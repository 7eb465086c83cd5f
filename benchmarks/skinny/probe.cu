// The skinny kernel (ffi/kernels/sm90_skinny.h) on its own, without JAX:
// checks it against a naive float32 GEMM (windows inside larger, poisoned
// buffers; B's layer chosen on the device) and times it on stacked-weight
// shapes, B not transposed and transposed, each GEMM
// reading a different layer of B (cold: B streams from HBM, as in a layer
// loop) or the same one (hot: from L2, as a loop over rows of one weight),
// beside a plain streaming kernel over the same bytes (--launch: that
// kernel with the skinny kernel's launch shape, and the skinny kernel's
// cluster placement; benchmarks/results/2026-12-04-h200-3bc3d7b/).  Build
// and run:
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I ffi \
//     benchmarks/skinny/probe.cu -o /tmp/skinny_probe && /tmp/skinny_probe
#include <cuda_bf16.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <cstdio>
#include <utility>
#include <vector>

#include "kernels/sm90_skinny.h"

using jax_dynoff::kernels::SkinnyLaunch;
using jax_dynoff::kernels::SkinnySplit;
using T = __nv_bfloat16;

#define CK(x)                                                              \
  do {                                                                     \
    cudaError_t e_ = (x);                                                  \
    if (e_ != cudaSuccess) {                                               \
      std::printf("%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e_)); \
      std::exit(1);                                                        \
    }                                                                      \
  } while (0)

__global__ void Fill(T* p, size_t n, uint32_t seed) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x) {
    uint32_t h = uint32_t(i) * 2654435761u ^ seed;
    h ^= h >> 13; h *= 0x5bd1e995u; h ^= h >> 15;
    p[i] = __float2bfloat16((int(h % 2001) - 1000) / 1000.f);
  }
}

// D = alpha * A @ B + beta * C, float32, row-major windows.
// B's element (t, j) of op(B) at b[t * b_row + j * b_col].
__global__ void Ref(const T* a, int64_t lda, const T* b, int64_t b_row,
                    int64_t b_col, const T* c, int64_t ldc, float* d, int m,
                    int n, int k, float alpha, float beta) {
  int j = blockIdx.x * blockDim.x + threadIdx.x, i = blockIdx.y;
  if (j >= n) return;
  float s = 0.f;
  for (int t = 0; t < k; ++t)
    s += __bfloat162float(a[i * lda + t]) *
         __bfloat162float(b[t * b_row + j * b_col]);
  d[i * int64_t(n) + j] = alpha * s + beta * __bfloat162float(c[i * ldc + j]);
}

using RunFn = std::string (*)(const SkinnyLaunch&);
template <bool TB, int ST = jax_dynoff::kernels::skinny::kDefaultStages>
std::string RunV(const SkinnyLaunch& l) {
  return jax_dynoff::kernels::skinny::Run<T, 1, TB, ST>(l);
}
constexpr RunFn RunNN = &RunV<false>, RunNT = &RunV<true>;
RunFn g_check_run = nullptr;  // Check's kernel (nullptr: NN or NT)

jax_dynoff::kernels::SkinnyOperand Op(const void* base, int64_t ld) {
  jax_dynoff::kernels::SkinnyOperand o;
  o.base = static_cast<const char*>(base);
  o.ld = ld;
  return o;
}

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
  std::printf("check %s m=%d n=%d k=%d split=%d beta=%g: max err %.3g (max "
              "|ref| %.3g), %ld changed outside: %s\n", tb ? "NT" : "NN", m, n,
              k, split, beta, max_err, max_ref, outside, ok ? "ok" : "FAIL");
  cudaFree(a); cudaFree(b); cudaFree(c); cudaFree(d); cudaFree(ref);
  cudaFree(layer);
  return ok;
}

// The skinny kernel launched as skinny::Run does, but with the cluster
// scheduling policy and the dynamic shared memory (at least the kernel's)
// given: whether the placement of its clusters costs.
int g_policy = 0, g_smem = 0;
template <bool TB>
std::string RunPlaced(const SkinnyLaunch& l) {
  namespace sk = jax_dynoff::kernels::skinny;
  constexpr int kSmem = sk::Smem<1, sk::kDefaultStages>::kBytes;
  const int smem = std::max(kSmem, g_smem);
  auto* fn = &sk::SkinnyKernel<T, 1, sk::kDefaultStages, TB>;
  CK(cudaFuncSetAttribute(reinterpret_cast<const void*>(fn),
                          cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  cudaLaunchAttribute attr[2];
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = l.split_k;
  attr[0].val.clusterDim.y = attr[0].val.clusterDim.z = 1;
  attr[1].id = cudaLaunchAttributeClusterSchedulingPolicyPreference;
  attr[1].val.clusterSchedulingPolicyPreference =
      g_policy ? cudaClusterSchedulingPolicyLoadBalancing
               : cudaClusterSchedulingPolicySpread;
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3((l.n + 127) / 128 * l.split_k);
  config.blockDim = dim3(128);
  config.dynamicSmemBytes = smem;
  config.stream = l.stream;
  config.attrs = attr;
  config.numAttrs = 2;
  const cudaError_t e = cudaLaunchKernelEx(&config, fn, l);
  return e == cudaSuccess ? "" : cudaGetErrorString(e);
}

// Reads `bytes` (16 B per load, 8 loads in flight per thread) and writes
// one word per CTA: the bandwidth a grid of this shape can pull.
__global__ void Stream(const uint4* p, size_t n, uint32_t* out) {
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
  if (acc == 0x12345678u) out[blockIdx.x] = acc;
}

// us per GEMM: `L` GEMMs captured in one CUDA graph (JAX's loops run as
// graphs), each reading layer i % L of B (cold: B streams from HBM) or
// layer 0 every time (hot: B stays in L2), replayed `reps` times.
// dyn_a: A's rows start at table[i] * m, read on the device (as in a loop
// over rows at table offsets: two dependent reads before A's address).
void Time(int m, int n, int k, int split, bool tb, bool hot, RunFn run,
          const char* label, bool dyn_a = false) {
  const int L = 32, reps = 20;
  T *a, *b, *d;
  int32_t* idx;  // {i, table[0..3]}
  CK(cudaMalloc(&idx, 5 * 4));
  const int32_t h_idx[5] = {1, 2, 0, 3, 1};
  CK(cudaMemcpy(idx, h_idx, sizeof h_idx, cudaMemcpyHostToDevice));
  CK(cudaMalloc(&a, size_t(4 * m) * k * 2));
  CK(cudaMalloc(&b, size_t(L) * k * n * 2));
  CK(cudaMalloc(&d, size_t(m) * n * 2));
  Fill<<<1024, 256>>>(a, size_t(m) * k, 5);
  Fill<<<1024, 256>>>(b, size_t(L) * k * n, 6);
  cudaStream_t st;
  CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  if (split == 0) split = SkinnySplit(n, k, sms);
  SkinnyLaunch l;
  l.m = m; l.n = n; l.k = k; l.alpha = 1.f; l.beta = 0.f;
  l.a = Op(a, k);
  if (dyn_a) {
    l.a.terms = 1;
    l.a.term[0].slot.value = idx;
    l.a.term[0].slot.table = idx + 1;
    l.a.term[0].slot.table_len = 4;
    l.a.term[0].slot.mul = m;
    l.a.term[0].dim = 4 * m;
    l.a.term[0].win = m;
    l.a.term[0].scale = int64_t(k) * 2;
  }
  l.c = l.d = Op(d, n);
  l.split_k = split;
  l.sm_count = sms;
  l.stream = st;
  cudaGraph_t g;
  cudaGraphExec_t ge;
  CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
  for (int i = 0; i < L; ++i) {
    SkinnyLaunch li = l;
    li.b = Op(b + size_t(hot ? 0 : i) * k * n, tb ? k : n);
    std::string r = run(li);
    if (!r.empty()) { std::printf("%s\n", r.c_str()); std::exit(1); }
  }
  CK(cudaStreamEndCapture(st, &g));
  CK(cudaGraphInstantiate(&ge, g, 0));
  for (int w = 0; w < 3; ++w) CK(cudaGraphLaunch(ge, st));
  CK(cudaEventRecord(e0, st));
  for (int r = 0; r < reps; ++r) CK(cudaGraphLaunch(ge, st));
  CK(cudaEventRecord(e1, st));
  CK(cudaEventSynchronize(e1));
  float ms = 0;
  CK(cudaEventElapsedTime(&ms, e0, e1));
  const double us = ms * 1e3 / (reps * L), bytes = double(k) * n * 2;
  std::printf("time %-12s %s %s%s m=%3d n=%5d k=%5d split=%d: %7.2f us  %5.2f TB/s\n",
              label, tb ? "NT" : "NN", hot ? "hot " : "cold", dyn_a ? " dynA" : "",
              m, n, k, split, us, bytes / us / 1e6);
  cudaGraphExecDestroy(ge);
  cudaGraphDestroy(g);
  cudaFree(a); cudaFree(b); cudaFree(d); cudaFree(idx);
  cudaStreamDestroy(st);
}

// The same capture of `Stream` kernels over k x n bytes of B: the floor a
// kernel of `ctas` x `threads` sees, hot or cold.
void TimeStream(int n, int k, int ctas, int threads, bool hot, int cluster = 1,
                int smem = 0) {
  const int L = 32, reps = 20;
  const size_t elems = size_t(k) * n * 2 / 16;
  uint4* b;
  uint32_t* out;
  CK(cudaMalloc(&b, L * elems * 16));
  CK(cudaMalloc(&out, 4096 * 4));
  CK(cudaMemset(b, 1, L * elems * 16));
  cudaStream_t st;
  CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  cudaGraph_t g;
  cudaGraphExec_t ge;
  CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
  if (smem > 48 * 1024)
    CK(cudaFuncSetAttribute(reinterpret_cast<const void*>(&Stream),
                            cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  for (int i = 0; i < L; ++i) {
    cudaLaunchAttribute attr[2];
    attr[0].id = cudaLaunchAttributeClusterDimension;
    attr[0].val.clusterDim.x = cluster;
    attr[0].val.clusterDim.y = attr[0].val.clusterDim.z = 1;
    attr[1].id = cudaLaunchAttributeClusterSchedulingPolicyPreference;
    attr[1].val.clusterSchedulingPolicyPreference =
        g_policy ? cudaClusterSchedulingPolicyLoadBalancing
                 : cudaClusterSchedulingPolicySpread;
    cudaLaunchConfig_t config = {};
    config.gridDim = dim3(ctas);
    config.blockDim = dim3(threads);
    config.dynamicSmemBytes = smem;
    config.stream = st;
    config.attrs = attr;
    config.numAttrs = 2;
    const uint4* bi = b + (hot ? 0 : i) * elems;
    CK(cudaLaunchKernelEx(&config, &Stream, bi, elems, out));
  }
  CK(cudaStreamEndCapture(st, &g));
  CK(cudaGraphInstantiate(&ge, g, 0));
  for (int w = 0; w < 3; ++w) CK(cudaGraphLaunch(ge, st));
  CK(cudaEventRecord(e0, st));
  for (int r = 0; r < reps; ++r) CK(cudaGraphLaunch(ge, st));
  CK(cudaEventRecord(e1, st));
  CK(cudaEventSynchronize(e1));
  float ms = 0;
  CK(cudaEventElapsedTime(&ms, e0, e1));
  const double us = ms * 1e3 / (reps * L), bytes = double(k) * n * 2;
  std::printf("time stream %4dx%-4d c%d s%-3d %s      n=%5d k=%5d:         %7.2f us  "
              "%5.2f TB/s\n", ctas, threads, cluster, smem / 1024,
              hot ? "hot " : "cold", n, k, us, bytes / us / 1e6);
  cudaGraphExecDestroy(ge);
  cudaGraphDestroy(g);
  cudaFree(b); cudaFree(out);
  cudaStreamDestroy(st);
}

int main(int argc, char** argv) {
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  bool ok = true;
  for (bool tb : {false, true}) {
    for (int split : {1, 2, 4, 8}) {
      ok &= Check(16, 4096, 4096, split, 0.f, tb);
      ok &= Check(13, 1000, 1000, split, 1.5f, tb);
    }
    ok &= Check(1, 256, 72, 1, 0.f, tb);
    ok &= Check(7, 8, 8, 1, 2.f, tb);
    ok &= Check(9, 136, 2056, 4, 1.f, tb);
  }
  g_check_run = &RunV<false, 8>;
  ok &= Check(16, 4096, 4096, 4, 0.f);
  ok &= Check(13, 1000, 1000, 2, 1.5f);
  g_check_run = &RunV<true, 8>;
  ok &= Check(16, 4096, 4096, 4, 0.f, true);
  ok &= Check(3, 72, 200, 1, 1.f, true);
  g_check_run = nullptr;
  if (argc > 1 && std::strcmp(argv[1], "--launch") == 0) {
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
