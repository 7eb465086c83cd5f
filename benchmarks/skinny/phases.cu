// Where the skinny kernel's time goes (ffi/kernels/sm90_skinny.h), phase by
// phase, in a loop body as the library runs it.
//
// Why: the shipped kernel takes ~2.5 us more than a plain stream of the
// same bytes at every size (benchmarks/results/2026-12-05-h100-f391a5e,
// variants.cu with B's layer picked on the host: 16x512x512 5.0 us against
// 2.3 for a 512 KiB stream, both with the loop's counter kernel;
// 8x2048x2048 7.8 against 5.1-5.4 for 8 MiB), and that fixed part decides
// the m <= 16 cells of the small-GEMM sweep.  This probe says which phase
// holds it: reading the offsets, the first tile's latency, the main loop,
// the cluster's reduction, the stores.
//
// The kernel is the library's own, instantiated with ClockMarks (its Marks
// hook): the first thread of every CTA records %globaltimer (ns, common to
// all SMs) and clock64 (its SM's cycles) at each SkinnyPhase.  32 GEMMs
// run in one CUDA graph, each followed by a one-thread counter kernel that
// advances the layer of B the next GEMM reads through a device offset (the
// stacked-weights loop: B's layer comes from the loop counter, cold from
// HBM), as in variants.cu's timings.  Per shape it prints:
//   - us per GEMM plus counter (graph replays between events), marked and
//     unmarked (the library's kernel as it ships, NoMarks), so the marks'
//     own cost shows;
//   - per phase, the CTAs' median and maximum time from the previous phase
//     (SM cycles at the clock the kernel's own globaltimer span implies);
//   - the gap between one GEMM's last CTA exit and the next one's first
//     CTA entry (the counter kernel, two launches and the probe's own
//     write-out of 112 bytes a CTA after its exit mark), and the spread of
//     the CTAs' entries within a GEMM;
//   - the smallest step of %globaltimer seen (its resolution bounds the
//     gaps; the phases use clock64).
// "stored" is when the CTA's stores are issued; the kernel has no barrier
// after them, so "exit" follows at once (before the push reduction it was
// a cluster barrier, which waited for the stores to land).
// Build and run (offline, sm_90a, no CUTLASS):
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I ffi \
//     benchmarks/skinny/phases.cu -o /tmp/skinny_phases && /tmp/skinny_phases
#include <algorithm>
#include <cstdio>
#include <vector>

#include "probe_common.h"

using jax_dynoff::kernels::SkinnyLaunch;
namespace sk = jax_dynoff::kernels::skinny;
constexpr int kPhases = sk::kNumPhases;
constexpr int kLayers = 32;       // GEMMs per graph, one B layer each
constexpr int kMaxCtas = 1024;    // per GEMM

struct Mark {
  unsigned long long ns, cycles;
};
__constant__ Mark* g_marks;             // [layer][cta][phase]
__constant__ const char* g_b_base;      // B's layer 0
__constant__ double g_per_layer_byte;   // 1 / bytes between B's layers

// The first thread of each CTA keeps its marks in shared memory and writes
// them out at the exit, so no global access of the probe's lies between
// two marks.  The GEMM's layer, from where B was located, says where.
struct ClockMarks {
  __device__ static void At(sk::SkinnyPhase phase, const void* dep = nullptr) {
    __shared__ Mark s_marks[kPhases];
    __shared__ const void* s_b;
    if (threadIdx.x != 0) return;
    // Storing `dep` waits for it (the offsets' reads), before the clocks.
    if (dep != nullptr) s_b = dep;
    unsigned long long ns;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(ns)::"memory");
    const unsigned long long cycles = clock64();
    if (phase == sk::kPhaseEntry)  // a phase a CTA skips reads as no time
      for (int p = 0; p < kPhases; ++p) s_marks[p] = Mark{ns, cycles};
    s_marks[phase] = Mark{ns, cycles};
    if (phase != sk::kPhaseExit) return;
    const long long layer = __double2ll_rn(
        double(static_cast<const char*>(s_b) - g_b_base) * g_per_layer_byte);
    Mark* out = g_marks + (size_t(layer % kLayers) * kMaxCtas + blockIdx.x) *
                              kPhases;
    for (int p = 0; p < kPhases; ++p) out[p] = s_marks[p];
  }
};

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

void RunShape(int m, int n, int k, int split, T* a, T* b, T* d, int32_t* ctr,
              Mark* marks, int sms) {
  const int ctas = (n + sk::kTileN - 1) / sk::kTileN * split;
  if (ctas > kMaxCtas) return;
  SkinnyLaunch l;
  l.m = m; l.n = n; l.k = k; l.alpha = 1.f; l.beta = 0.f;
  l.a = Op(a, k);
  l.b = Op(b, n);
  l.b.terms = 1;
  l.b.term[0].slot.value = ctr;
  l.b.term[0].dim = kLayers;
  l.b.term[0].win = 1;
  l.b.term[0].scale = int64_t(k) * n * 2;
  const double per_layer_byte = 1.0 / double(l.b.term[0].scale);
  CK(cudaMemcpyToSymbol(g_per_layer_byte, &per_layer_byte,
                        sizeof(per_layer_byte)));
  l.c = l.d = Op(d, n);
  l.split_k = split;
  l.device = 0;
  l.sm_count = sms;
  cudaStream_t st;
  CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  l.stream = st;
  bool failed = false;
  const double plain_us = GraphUsPerLaunch(st, kLayers, 20, [&](int i) {
    if (i == 0) CK(cudaMemsetAsync(ctr, 0, 4, st));
    if (!sk::Run<T, 1, false>(l).empty()) failed = true;
    Counter<<<1, 1, 0, st>>>(ctr);
  });
  const double us = GraphUsPerLaunch(st, kLayers, 20, [&](int i) {
    if (i == 0) CK(cudaMemsetAsync(ctr, 0, 4, st));
    if (!sk::Run<T, 1, false, sk::kDefaultStages, T, ClockMarks>(l).empty())
      failed = true;
    Counter<<<1, 1, 0, st>>>(ctr);
  });
  cudaStreamDestroy(st);
  if (failed) {
    std::printf("SHAPE %dx%dx%d split %d: launch refused\n", m, n, k, split);
    return;
  }
  // The marks of the last replay: every layer's GEMM, every CTA.
  std::vector<Mark> h(size_t(kLayers) * kMaxCtas * kPhases);
  CK(cudaMemcpy(h.data(), marks, h.size() * sizeof(Mark),
                cudaMemcpyDeviceToHost));
  auto at = [&](int layer, int cta, int phase) -> const Mark& {
    return h[(size_t(layer) * kMaxCtas + cta) * kPhases + phase];
  };
  // The SMs' clock: every CTA's cycles over its globaltimer span, summed
  // (the timer's steps can be coarse; the sum averages them out).
  double cycles = 0, ns = 0;
  for (int layer = 0; layer < kLayers; ++layer)
    for (int c = 0; c < ctas; ++c) {
      cycles += double(at(layer, c, sk::kPhaseExit).cycles -
                       at(layer, c, sk::kPhaseEntry).cycles);
      ns += double(at(layer, c, sk::kPhaseExit).ns -
                   at(layer, c, sk::kPhaseEntry).ns);
    }
  const double ghz = ns > 0 ? cycles / ns : 1.98;
  // Times relative to the earliest mark (a double cannot hold a raw
  // %globaltimer, ~1.8e18 ns, to the ns), and the timer's smallest step.
  unsigned long long base = ~0ull;
  std::vector<unsigned long long> stamps;
  for (int layer = 0; layer < kLayers; ++layer)
    for (int c = 0; c < ctas; ++c)
      for (int p = 0; p < kPhases; ++p) {
        base = std::min(base, at(layer, c, p).ns);
        stamps.push_back(at(layer, c, p).ns);
      }
  std::sort(stamps.begin(), stamps.end());
  unsigned long long step = 0;
  for (size_t i = 1; i < stamps.size(); ++i)
    if (stamps[i] > stamps[i - 1] &&
        (step == 0 || stamps[i] - stamps[i - 1] < step))
      step = stamps[i] - stamps[i - 1];
  auto rel = [base](unsigned long long t) { return double(t - base); };
  std::vector<std::vector<double>> phase_us(kPhases);
  std::vector<double> gaps, spreads, spans;
  double prev_exit = -1;
  for (int layer = 0; layer < kLayers; ++layer) {
    double first_entry = 1e300, last_entry = 0, last_exit = 0;
    for (int c = 0; c < ctas; ++c) {
      const Mark& e = at(layer, c, sk::kPhaseEntry);
      const Mark& x = at(layer, c, sk::kPhaseExit);
      first_entry = std::min(first_entry, rel(e.ns));
      last_entry = std::max(last_entry, rel(e.ns));
      last_exit = std::max(last_exit, rel(x.ns));
      for (int p = 1; p < kPhases; ++p)
        phase_us[p].push_back(
            double(at(layer, c, p).cycles - at(layer, c, p - 1).cycles) /
            ghz / 1e3);
    }
    spreads.push_back((last_entry - first_entry) / 1e3);
    spans.push_back((last_exit - first_entry) / 1e3);
    if (layer > 0) gaps.push_back((first_entry - prev_exit) / 1e3);
    prev_exit = last_exit;
  }
  std::printf("SHAPE %dx%dx%d split %d (%d CTAs): %.2f us per GEMM + counter "
              "(%.2f unmarked); first entry to last exit %.2f us (median), "
              "the next GEMM's first entry %.2f us after the last exit, "
              "entries spread over %.2f us; SM clock %.2f GHz, globaltimer "
              "step %llu ns\n",
              m, n, k, split, ctas, us, plain_us, Median(spans), Median(gaps),
              Median(spreads), ghz, step);
  static const char* names[kPhases] = {"entry", "located", "first tile",
                                       "main loop", "partials", "stored",
                                       "exit"};
  for (int p = 1; p < kPhases; ++p) {
    std::vector<double>& v = phase_us[p];
    std::printf("  %-10s median %6.2f us  max %6.2f us\n", names[p],
                Median(v), v.empty() ? 0 : *std::max_element(v.begin(), v.end()));
  }
}

int main() {
  int sms = 0;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const int max_k = 4096, max_n = 4096;
  T *a, *b, *d;
  int32_t* ctr;
  Mark* marks;
  CK(cudaMalloc(&a, size_t(16) * max_k * 2));
  CK(cudaMalloc(&b, size_t(kLayers) * max_k * max_n * 2));
  CK(cudaMalloc(&d, size_t(16) * max_n * 2));
  CK(cudaMalloc(&ctr, 4));
  CK(cudaMalloc(&marks, size_t(kLayers) * kMaxCtas * kPhases * sizeof(Mark)));
  CK(cudaMemcpyToSymbol(g_marks, &marks, sizeof(marks)));
  const char* b0 = reinterpret_cast<const char*>(b);
  CK(cudaMemcpyToSymbol(g_b_base, &b0, sizeof(b0)));
  Fill<<<256, 256>>>(a, size_t(16) * max_k, 1);
  Fill<<<1024, 256>>>(b, size_t(kLayers) * max_k * max_n, 2);
  CK(cudaDeviceSynchronize());
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  std::printf("%s, %d SMs; B's layer from the loop counter, cold\n", prop.name,
              sms);
  struct Shape { int m, n, k, split; };
  const Shape shapes[] = {
      {16, 512, 512, 4},   {16, 512, 2048, 4},  {16, 1536, 1536, 4},
      {1, 2048, 2048, 4},  {8, 2048, 2048, 4},  {8, 2048, 2048, 8},
      {16, 4096, 4096, 4}, {16, 4096, 4096, 8},
  };
  for (const Shape& s : shapes)
    RunShape(s.m, s.n, s.k, s.split, a, b, d, ctr, marks, sms);
  cudaFree(a); cudaFree(b); cudaFree(d); cudaFree(ctr); cudaFree(marks);
  return 0;
}
