// Times the small-GEMM direct kernels (the tiny tile, the cluster-K tile at
// each width and split) one launch at a time, as a loop of small GEMMs
// runs them: L launches back to back, launch i reading layer i
// of a stacked B (L x k x n, so every launch streams its B from HBM, as the
// bench's loop does), launched from the host and as one CUDA graph of L
// kernel nodes; median over rounds, us per launch.  Each candidate's D is
// checked against a plain reference GEMM first.  Not part of the library
// build; see build.sh.
//
//   probe [MxNxK ...]     (default: the bench's loop shape and neighbours)
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "candidates.h"
#include "../sm90_tiles/fill.h"

namespace {

#define CHECK(x)                                                         \
  do {                                                                   \
    cudaError_t e_ = (x);                                                \
    if (e_ != cudaSuccess) {                                             \
      std::fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__,             \
                   cudaGetErrorString(e_));                              \
      std::exit(1);                                                      \
    }                                                                    \
  } while (0)

__global__ void Reference(const __nv_bfloat16* a, const __nv_bfloat16* b,
                          float* d, int m, int n, int k) {
  const int i = blockIdx.y, j = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= m || j >= n) return;
  float s = 0.f;
  for (int p = 0; p < k; ++p)
    s += __bfloat162float(a[int64_t{i} * k + p]) *
         __bfloat162float(b[int64_t{p} * n + j]);
  d[int64_t{i} * n + j] = s;
}

float Median(std::vector<float> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> sizes;
  for (int i = 1; i < argc; ++i) sizes.push_back(argv[i]);
  if (sizes.empty())
    sizes = {"128x1024x1024", "64x1024x1024", "256x1024x1024",
             "128x2048x2048", "64x2048x2048", "128x4096x4096"};
  cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, 0));
  cudaStream_t stream;
  CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  const auto& cands = probe::Candidates();
  for (const std::string& s : sizes) {
    int m, n, k;
    if (std::sscanf(s.c_str(), "%dx%dx%d", &m, &n, &k) != 3) return 2;
    const size_t layer = size_t(k) * n;
    const int L = static_cast<int>(std::max<size_t>(
        1, std::min<size_t>(64, (size_t(1) << 30) / (layer * 2))));
    __nv_bfloat16 *a, *w, *d;
    float* ref;
    void* ws;
    const size_t ws_bytes = size_t(64) << 20;
    CHECK(cudaMalloc(&a, size_t(m) * k * 2));
    CHECK(cudaMalloc(&w, layer * L * 2));
    CHECK(cudaMalloc(&d, size_t(m) * n * 2));
    CHECK(cudaMalloc(&ref, size_t(m) * n * 4));
    CHECK(cudaMalloc(&ws, ws_bytes));
    Fill<<<1024, 256, 0, stream>>>(a, size_t(m) * k, 1);
    Fill<<<4096, 256, 0, stream>>>(w, layer * L, 2);
    Reference<<<dim3((n + 127) / 128, m), 128, 0, stream>>>(a, w, ref, m, n,
                                                            k);
    CHECK(cudaStreamSynchronize(stream));
    std::vector<float> href(size_t(m) * n);
    CHECK(cudaMemcpy(href.data(), ref, href.size() * 4,
                     cudaMemcpyDeviceToHost));
    std::printf("== %dx%dx%d (%d layers of B)\n", m, n, k, L);
    for (const probe::Candidate& c : cands) {
      auto launch_for = [&](int i) {
        jax_dynoff::kernels::DirectLaunch l;
        l.m = m; l.n = n; l.k = k;
        l.base_a = a; l.lda = k;
        l.a.rows = m; l.a.cols = k; l.a.layers = 1;
        l.base_b = w; l.ldb = n;
        l.b.row0 = int64_t{i} * k;
        l.b.rows = k; l.b.cols = n; l.b.layers = L;
        l.base_c = d; l.ldc = n;
        l.c.rows = m; l.c.cols = n; l.c.layers = 1;
        l.base_d = d; l.ldd = n;
        l.d = l.c;
        l.alpha = 1.f; l.beta = 0.f;
        l.device = 0; l.sm_count = prop.multiProcessorCount;
        l.stream = stream; l.workspace = ws; l.workspace_bytes = ws_bytes;
        l.split_k = c.split;
        return l;
      };
      std::vector<jax_dynoff::kernels::PreparedLaunch> launches(L);
      std::string err;
      for (int i = 0; i < L && err.empty(); ++i)
        err = c.prepare(launch_for(i), &launches[i]);
      if (!err.empty()) {
        std::printf("%-22s skipped: %s\n", c.name, err.c_str());
        continue;
      }
      // Correctness: launch 0 (layer 0) into a poisoned D.
      CHECK(cudaMemsetAsync(d, 0xff, size_t(m) * n * 2, stream));
      err = jax_dynoff::kernels::LaunchPrepared(launches[0], stream);
      CHECK(cudaStreamSynchronize(stream));
      std::vector<__nv_bfloat16> hd(size_t(m) * n);
      CHECK(cudaMemcpy(hd.data(), d, hd.size() * 2, cudaMemcpyDeviceToHost));
      double worst = 0;
      for (size_t e = 0; e < hd.size(); ++e) {
        const double diff = std::fabs(double(__bfloat162float(hd[e])) -
                                      href[e]) /
                            (1.0 + std::fabs(href[e]));
        worst = std::isnan(diff) ? 1e30 : std::max(worst, diff);
      }
      // From the host: L launches, event-timed.
      cudaEvent_t e0, e1;
      CHECK(cudaEventCreate(&e0));
      CHECK(cudaEventCreate(&e1));
      std::vector<float> host_t, graph_t;
      for (int round = 0; round < 15; ++round) {
        CHECK(cudaEventRecord(e0, stream));
        for (int i = 0; i < L; ++i)
          jax_dynoff::kernels::LaunchPrepared(launches[i], stream);
        CHECK(cudaEventRecord(e1, stream));
        CHECK(cudaEventSynchronize(e1));
        float ms;
        CHECK(cudaEventElapsedTime(&ms, e0, e1));
        if (round > 2) host_t.push_back(ms * 1000.f / L);
      }
      // As one graph of L kernel nodes.
      cudaGraph_t g;
      cudaGraphExec_t ge;
      CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
      for (int i = 0; i < L; ++i)
        jax_dynoff::kernels::LaunchPrepared(launches[i], stream);
      CHECK(cudaStreamEndCapture(stream, &g));
      CHECK(cudaGraphInstantiate(&ge, g, 0));
      for (int round = 0; round < 15; ++round) {
        CHECK(cudaEventRecord(e0, stream));
        CHECK(cudaGraphLaunch(ge, stream));
        CHECK(cudaEventRecord(e1, stream));
        CHECK(cudaEventSynchronize(e1));
        float ms;
        CHECK(cudaEventElapsedTime(&ms, e0, e1));
        if (round > 2) graph_t.push_back(ms * 1000.f / L);
      }
      CHECK(cudaGraphExecDestroy(ge));
      CHECK(cudaGraphDestroy(g));
      std::printf("%-22s host %7.2f us  graph %7.2f us  grid %5u x %3u "
                  "cluster %u smem %6u  err %.2e%s\n",
                  c.name, Median(host_t), Median(graph_t),
                  launches[0].grid.x, launches[0].block.x,
                  launches[0].cluster.x, launches[0].smem, worst,
                  worst > 2e-2 ? "  WRONG" : "");
      std::fflush(stdout);
    }
    CHECK(cudaFree(a)); CHECK(cudaFree(w)); CHECK(cudaFree(d));
    CHECK(cudaFree(ref)); CHECK(cudaFree(ws));
  }
  return 0;
}
