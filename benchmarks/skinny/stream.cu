// What a column tile of B costs to stream into shared memory, with no math:
// the floor under any skinny kernel (m <= 16) that reads a column tile of a
// k x n row-major B (NN, x @ W) with the tensor memory accelerator.
//
// The question it answers: can a CTA that owns 64 or 128 columns over ALL
// of K -- 128- or 256-byte rows, one L2 line or two, so no 32-byte sector
// requests (the narrow tile's NN bound) and no K split (so no reduction:
// no cluster, no last CTA, no second kernel) -- pull its slab fast enough
// from one SM?  At n = 2048 that is 32 (or 16) CTAs.  The table loop's
// losing cells read one weight hot in L2, where XLA's Triton GEMM takes
// 2.3-6.3 us (H200, 16 x 64 tiles with K split 8, summed in its update
// fusion).  If 32 SMs stream 8 MB hot in about 2 us, a no-split 64-column
// tile is worth building; if they take 5, the bound is the SM's port, and
// the split (with its reduction) stays.
//
// Each CTA: one thread issues TMA boxes (kRows x kCols of bfloat16) into
// kStages stages, each counted on its mbarrier; all threads wait for a
// stage, read one 16-byte word of it, meet at a barrier and the thread
// refills the stage.  grid = (n / kCols) x split, each y-block a K range.
// Timed as the probes time a loop body: 32 launches in a CUDA graph, each
// followed by a one-thread kernel (XLA's loop counter's stand-in), the
// graph replayed; B hot (one buffer) or cold (rotating over buffers
// totalling more than the L2).  The empty kernel of the same grid is the
// launch floor beside it.
//
// Build and run (offline, sm_90a, no CUTLASS):
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I ffi \
//       benchmarks/skinny/stream.cu -o /tmp/stream && /tmp/stream
#include <cuda.h>
#include <cudaTypedefs.h>  // PFN_cuTensorMapEncodeTiled
#include <cuda_bf16.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "probe_common.h"  // CK, Counter, GraphUsPerLaunch, mbarriers, TMA

namespace {

__device__ __forceinline__ uint32_t Smem(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

template <int kCols, int kRows, int kStages>
struct Cfg {
  static constexpr int kStageBytes = kCols * kRows * 2;
  static constexpr int kSmem = kStages * kStageBytes + kStages * 8;
};

template <int kCols, int kRows, int kStages>
__global__ void __launch_bounds__(128)
    Stream(const __grid_constant__ CUtensorMap map, int k_per_cta,
           float* sink) {
  using C = Cfg<kCols, kRows, kStages>;
  extern __shared__ __align__(1024) uint8_t smem[];
  const uint32_t base = Smem(smem);
  const uint32_t bars = base + kStages * C::kStageBytes;
  const int col = blockIdx.x * kCols, k0 = blockIdx.y * k_per_cta;
  const int tiles = k_per_cta / kRows;
  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) MbarInit(bars + 8 * s);
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    for (int s = 0; s < kStages && s < tiles; ++s) {
      MbarExpectTx(bars + 8 * s, C::kStageBytes);
      TmaBox(base + s * C::kStageBytes, &map, col, k0 + s * kRows,
             bars + 8 * s);
    }
  }
  __syncthreads();
  float acc = 0.f;
  for (int i = 0; i < tiles; ++i) {
    const int s = i % kStages;
    MbarWait(bars + 8 * s, (i / kStages) & 1);
    acc += reinterpret_cast<const float*>(smem + s * C::kStageBytes)
        [threadIdx.x * 4 % (C::kStageBytes / 4)];
    __syncthreads();  // every thread is done with stage s
    if (threadIdx.x == 0 && i + kStages < tiles) {
      MbarExpectTx(bars + 8 * s, C::kStageBytes);
      TmaBox(base + s * C::kStageBytes, &map, col, k0 + (i + kStages) * kRows,
             bars + 8 * s);
    }
  }
  if (acc == 1234.5f) sink[threadIdx.x] = acc;  // keeps the reads
}

__global__ void Empty(float* sink) {
  if (sink == nullptr) sink[0] = 0.f;
}

CUtensorMap Map(const void* b, int k, int n, int cols, int rows) {
  static PFN_cuTensorMapEncodeTiled_v12000 encode = [] {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult q;
    CK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000,
                                        cudaEnableDefault, &q));
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(fn);
  }();
  CUtensorMap map;
  cuuint64_t dims[2] = {static_cast<cuuint64_t>(n),
                        static_cast<cuuint64_t>(k)};
  cuuint64_t strides[1] = {static_cast<cuuint64_t>(n) * 2};
  cuuint32_t box[2] = {static_cast<cuuint32_t>(cols),
                       static_cast<cuuint32_t>(rows)};
  cuuint32_t elem[2] = {1, 1};
  CUresult r = encode(&map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2,
                      const_cast<void*>(b), dims, strides, box, elem,
                      CU_TENSOR_MAP_INTERLEAVE_NONE,
                      CU_TENSOR_MAP_SWIZZLE_NONE,
                      CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                      CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) {
    std::printf("cuTensorMapEncodeTiled failed (%d)\n", static_cast<int>(r));
    std::exit(1);
  }
  return map;
}

constexpr int kGraphLaunches = 32;

// us per launch (plus the loop's counter) of `launch(i)` for i <
// kGraphLaunches in one graph (probe_common.h GraphUsPerLaunch).
template <class F>
double TimeGraph(F launch, int32_t* counter, cudaStream_t st) {
  return GraphUsPerLaunch(st, kGraphLaunches, 20, [&](int i) {
    launch(i);
    Counter<<<1, 1, 0, st>>>(counter);
  });
}

struct Bufs {
  std::vector<void*> b;  // one (hot) or several (cold) buffers
  size_t bytes;          // each buffer's size (hot: one slab)
};

template <int kCols, int kRows, int kStages>
void Case(const char* name, const Bufs& hot, const Bufs& cold, int k, int n,
          int split, float* sink, int32_t* counter, cudaStream_t st) {
  using C = Cfg<kCols, kRows, kStages>;
  if (n % kCols || k % (split * kRows)) return;
  auto kern = Stream<kCols, kRows, kStages>;
  CK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize,
                          C::kSmem));
  const dim3 grid(n / kCols, split);
  const int kpc = k / split;
  double t[2];
  for (int which = 0; which < 2; ++which) {
    const Bufs& bufs = which ? cold : hot;
    // Every k x n slab of the buffers, so that a cold rotation spans them.
    std::vector<CUtensorMap> maps;
    const size_t slab = size_t{2} * k * n;
    for (void* b : bufs.b)
      for (size_t off = 0; off + slab <= bufs.bytes; off += slab)
        maps.push_back(Map(static_cast<char*>(b) + off, k, n, kCols, kRows));
    t[which] = TimeGraph(
        [&](int i) {
          kern<<<grid, 128, C::kSmem, st>>>(maps[i % maps.size()], kpc, sink);
        },
        counter, st);
    CK(cudaGetLastError());
  }
  const double empty = TimeGraph(
      [&](int) { Empty<<<grid, 128, C::kSmem, st>>>(sink); }, counter, st);
  const double mb = 2.0 * k * n / 1e6;
  std::printf(
      "%-14s k %5d n %5d split %d: %4d CTAs, %5.0f KiB a CTA | hot %6.2f us "
      "(%5.2f TB/s)  cold %6.2f us (%5.2f TB/s) | empty grid %5.2f us\n",
      name, k, n, split, grid.x * grid.y, 2.0 * kCols * kpc / 1024, t[0],
      mb / t[0], t[1], mb / t[1], empty);
  std::fflush(stdout);
}

}  // namespace

int main() {
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  std::printf("%s, %d SMs, L2 %d MB\n", prop.name, prop.multiProcessorCount,
              prop.l2CacheSize >> 20);
  cudaStream_t st;
  CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  float* sink;
  int32_t* counter;
  CK(cudaMalloc(&sink, 4096));
  CK(cudaMalloc(&counter, 4));
  CK(cudaFuncSetAttribute(Empty, cudaFuncAttributeMaxDynamicSharedMemorySize,
                          prop.sharedMemPerBlockOptin));
  const int kMaxK = 4096, kMaxN = 4096;
  const size_t bytes = size_t{2} * kMaxK * kMaxN;  // 32 MiB
  // Cold: buffers totalling at least 3x the L2, each launch the next.
  const int n_cold = std::max<int>(
      2, static_cast<int>((3ull * prop.l2CacheSize + bytes - 1) / bytes));
  Bufs hot, cold;
  for (int i = 0; i < n_cold; ++i) {
    void* p;
    CK(cudaMalloc(&p, bytes));
    CK(cudaMemset(p, 0x3c, bytes));
    cold.b.push_back(p);
  }
  cold.bytes = bytes;
  hot.b.push_back(cold.b[0]);
  hot.bytes = 0;  // set per shape: one slab
  const int shapes[][2] = {{2048, 2048}, {1536, 512}, {2048, 4096},
                           {4096, 4096}};
  for (auto& s : shapes) {
    const int k = s[0], n = s[1];
    hot.bytes = size_t{2} * k * n;
    for (int split : {1, 2, 4}) {
      Case<64, 256, 4>("64c x256 s4", hot, cold, k, n, split, sink, counter,
                       st);
      Case<64, 256, 6>("64c x256 s6", hot, cold, k, n, split, sink, counter,
                       st);
      Case<128, 128, 6>("128c x128 s6", hot, cold, k, n, split, sink,
                        counter, st);
      Case<128, 256, 3>("128c x256 s3", hot, cold, k, n, split, sink,
                        counter, st);
    }
    // The narrow tile's shape (16 columns, 512-deep stages, 3) and a
    // 32-column one, all of K: the request-bound rows, by TMA.
    Case<16, 256, 6>("16c x256 s6", hot, cold, k, n, 1, sink, counter, st);
    Case<32, 256, 6>("32c x256 s6", hot, cold, k, n, 1, sink, counter, st);
  }
  std::printf("done\n");
  return 0;
}
