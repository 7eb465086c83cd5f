// What the skinny kernel's standalone probes share (probe.cu, variants.cu,
// phases.cu): the element type, the operands' fill, the loop's counter
// kernel, the float32 reference GEMM, a window's SkinnyOperand and the
// timing of launches captured in a CUDA graph.  Not part of the library
// build.
#pragma once
#include <cuda.h>  // CUtensorMap
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <chrono>
#include <cstdint>
#include <functional>

#include "../cuda_check.h"
#include "../sm90_tiles/fill.h"  // Fill: hashed bf16 in [-1, 1)
#include "kernels/sm90_skinny.h"

using T = __nv_bfloat16;

// mbarriers and TMA boxes for the candidates that move stages by the copy
// engines (variants.cu's bulk and deep candidates, stream.cu): a barrier
// of one arrival, its expected bytes, a wait on its phase, and one box of
// a 2-D tensor map at (column c0, row c1), its bytes counted on `bar`.
__device__ __forceinline__ void MbarInit(uint32_t bar) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;\n" ::"r"(bar));
}
__device__ __forceinline__ void MbarExpectTx(uint32_t bar, uint32_t bytes) {
  asm volatile(
      "mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar),
      "r"(bytes) : "memory");
}
__device__ __forceinline__ void MbarWait(uint32_t bar, uint32_t parity) {
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "WAIT:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n"
      "@p bra DONE;\n"
      "bra WAIT;\n"
      "DONE:\n"
      "}\n" ::"r"(bar),
      "r"(parity) : "memory");
}
__device__ __forceinline__ void TmaBox(uint32_t dst, const CUtensorMap* map,
                                       int c0, int c1, uint32_t bar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::"
      "complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(bar)
      : "memory");
}

// Adds the `split` ranks' float32 partials of 8 columns (row, col of a
// 16 x BN tile; `all` the tile's first rank) to v, in rank order: the same
// sums wherever a probe adds a K split's partials through global memory
// (variants.cu's last CTA and second grid, probe.cu's last CTA).
template <int BN>
__device__ __forceinline__ void SumRanks(const float* all, int split, int row,
                                         int col, float (&v)[8]) {
  constexpr int kM = 16;
#pragma unroll 4
  for (int r = 0; r < split; ++r) {
    const float* p = all + (size_t(r) * kM + row) * BN + col;
    const float4 x0 = __ldcg(reinterpret_cast<const float4*>(p));
    const float4 x1 = __ldcg(reinterpret_cast<const float4*>(p + 4));
    v[0] += x0.x; v[1] += x0.y; v[2] += x0.z; v[3] += x0.w;
    v[4] += x1.x; v[5] += x1.y; v[6] += x1.z; v[7] += x1.w;
  }
}

// A one-thread kernel between the GEMMs: the loop counter of XLA's body.
__global__ void Counter(int32_t* i) { *i += 1; }

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

jax_dynoff::kernels::SkinnyOperand Op(const void* base, int64_t ld) {
  jax_dynoff::kernels::SkinnyOperand o;
  o.base = static_cast<const char*>(base);
  o.ld = ld;
  return o;
}

// us per launch of graph `g`, instantiated once: launched `warm` times to
// warm up, then `count` times between two events; `g` is destroyed.  The
// host's time per launch goes to *host_us; `before`, if set, runs on the
// host before every launch (an update of the executable graph).
inline double UsPerGraphLaunch(
    cudaStream_t st, cudaGraph_t g, int warm, int count,
    double* host_us = nullptr,
    const std::function<void(cudaGraphExec_t)>& before = {}) {
  cudaGraphExec_t ge;
  CK(cudaGraphInstantiate(&ge, g, 0));
  auto launch = [&] {
    if (before) before(ge);
    CK(cudaGraphLaunch(ge, st));
  };
  for (int w = 0; w < warm; ++w) launch();
  CK(cudaStreamSynchronize(st));
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  CK(cudaEventRecord(e0, st));
  const auto t0 = std::chrono::steady_clock::now();
  for (int r = 0; r < count; ++r) launch();
  const auto t1 = std::chrono::steady_clock::now();
  CK(cudaEventRecord(e1, st));
  if (host_us)
    *host_us =
        std::chrono::duration<double, std::micro>(t1 - t0).count() / count;
  CK(cudaEventSynchronize(e1));
  float ms = 0;
  CK(cudaEventElapsedTime(&ms, e0, e1));
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  cudaGraphExecDestroy(ge);
  cudaGraphDestroy(g);
  return ms * 1e3 / count;
}

// us per launch of graph `g` (which holds `launches` launches): replayed 3
// times to warm up, then `reps` times; `g` is destroyed.
inline double ReplayUsPerLaunch(cudaStream_t st, cudaGraph_t g, int launches,
                                int reps) {
  return UsPerGraphLaunch(st, g, 3, reps) / launches;
}

// The loop's counter kernel on `counter` as a kernel node of `g`, after
// `dep` (none if nullptr), as XLA records it in a loop body.
inline cudaGraphNode_t AddCounterNode(cudaGraph_t g,
                                      const cudaGraphNode_t* dep,
                                      int32_t* counter) {
  cudaKernelNodeParams kp = {};
  void* args[] = {&counter};
  kp.func = reinterpret_cast<void*>(&Counter);
  kp.gridDim = dim3(1);
  kp.blockDim = dim3(1);
  kp.kernelParams = args;
  cudaGraphNode_t node;
  CK(cudaGraphAddKernelNode(&node, g, dep, dep ? 1 : 0, &kp));
  return node;
}

// us per launch of enqueue(i), i < `launches`, captured in one CUDA graph
// on `st` (JAX's loops run as graphs).
template <typename Enqueue>
double GraphUsPerLaunch(cudaStream_t st, int launches, int reps,
                        Enqueue enqueue) {
  cudaGraph_t g;
  CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
  for (int i = 0; i < launches; ++i) enqueue(i);
  CK(cudaStreamEndCapture(st, &g));
  return ReplayUsPerLaunch(st, g, launches, reps);
}

// The same for a graph built node by node as XLA records a loop body that
// holds a custom call: the loop's counter kernel as a kernel node, then
// enqueue(i) captured alone into its own graph and added as a child graph
// node, `launches` times in a chain.
template <typename Enqueue>
double ChildGraphUsPerLaunch(cudaStream_t st, int launches, int reps,
                             int32_t* counter, Enqueue enqueue) {
  cudaGraph_t g;
  CK(cudaGraphCreate(&g, 0));
  cudaGraphNode_t prev = nullptr;
  for (int i = 0; i < launches; ++i) {
    cudaGraphNode_t node = AddCounterNode(g, prev ? &prev : nullptr, counter);
    prev = node;
    cudaGraph_t gi;
    CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
    enqueue(i);
    CK(cudaStreamEndCapture(st, &gi));
    CK(cudaGraphAddChildGraphNode(&node, g, &prev, 1, gi));  // clones gi
    CK(cudaGraphDestroy(gi));
    prev = node;
  }
  return ReplayUsPerLaunch(st, g, launches, reps);
}

// us per iteration of a loop whose body is one CUDA graph launched from the
// host each iteration, as XLA runs a loop with body graphs
// (`cuda_graph_flags()`): `body` is the graph of one iteration; it is
// instantiated once and launched `iters` x `reps` times.  `body` is
// destroyed.  The host's time per launch goes to *host_us (if the host
// is slower than the device, the loop is the host's).  `before`, if set,
// runs on the host before every launch (an update of the executable
// graph, as XLA makes where a command's buffers moved).
inline double PerIterationGraphUs(
    cudaStream_t st, cudaGraph_t body, int iters, int reps,
    double* host_us = nullptr,
    const std::function<void(cudaGraphExec_t)>& before = {}) {
  return UsPerGraphLaunch(st, body, 3 * iters, iters * reps, host_us, before);
}
