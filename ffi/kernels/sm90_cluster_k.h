// The cluster-K direct kernel: 16-bit NN GEMMs at device offsets with few
// output tiles and a long K (m = 64..256, n and k = 1024..4096: decode
// steps, small batches, loop bodies), where one CTA per output tile leaves
// most SMs idle: at 128x1024x1024 the tiny tile (64x64) runs 32 CTAs, each
// streaming all of K.
//
// Each 64 x kTileN output tile is computed by the kSplit CTAs of one
// thread-block cluster; rank r takes an even share of the K tiles, in order
// (kSplit ranks: plan.h kClusterKSplit), runs CUTLASS's SS wgmma
// mainloop over them, and the ranks add their float32 accumulators through
// distributed shared memory: one launch, no workspace, no memset.  Grid x:
// the rank, then the output tiles with M fastest (the CTAs running together
// share B's column tiles in L2).  The split is a template argument, so the
// reduction's indexing is shifts and its loops unrolled.
//
// What is CUTLASS's and what is ours:
//  - The mainloop is the collective CUTLASS's builder makes for
//    KernelTmaWarpSpecialized (64 x kTileN x 64, one consumer warp group)
//    with cluster shape 1x1x1 (no multicast: the cluster runs along K,
//    which no CUTLASS kernel supports), through DirectMainloop (kernels/
//    sm90_direct.h: TMA descriptors over the whole buffers, windows located
//    on the device).  The producer warp runs the collective's load() over
//    its rank's K range and load_tail().
//  - The consumer's loop (ConsumeKRange) is the collective's mma() and
//    mma_tail() with one change.  CUTLASS's PipelineTmaAsync picks the CTA
//    whose empty barrier a consumer arrives at from the compile-time
//    cluster shape: for 1x1x1, rank 0 (cutlass/pipeline/sm90_pipeline.hpp,
//    PipelineTmaAsync's constructor: `dst_blockid_ = 0` where
//    `cluster_size == 1`; consumer_release: `empty_barrier_ptr_[stage]
//    .arrive(dst_blockid_, ...)`, a `mapa` to that rank), so in a launch
//    cluster of kSplit CTAs every rank would free rank 0's stages.  Ours
//    arrives at its own CTA's barrier; waits, wgmma batching (one batch in
//    flight) and barrier counts are the collective's.
//  - The kernel layer is ours: one consumer warp group (warps 0-3, the
//    wgmma warp group) and one producer warp (warp 4) that issues the TMA
//    loads: 160 threads, and a few stages (a rank's K range is a few tiles
//    at the shapes this tile is for), so that several CTAs fit on one SM
//    and a GPC short of free SMs can still take a cluster.
//  - The reduction is a reduce-scatter by rows.  Rank q owns rows
//    [q * 64 / kSplit, (q + 1) * 64 / kSplit) of the tile.  Each consumer
//    thread stores each adjacent column pair of its accumulators (the
//    wgmma D layout: rows 8 apart, pairs 8 columns apart) into the owning
//    rank's shared memory, in that rank's slot for the source rank (8-byte
//    stores, to the peer through distributed shared memory); one cluster
//    barrier; then each owner adds the kSplit partials in rank order,
//    rank 0 first (the same bits on every run: deterministic), four
//    columns per thread.  Stores rather than loads across the cluster: no
//    rank waits on a remote round trip, and no rank reads a peer after the
//    barrier, so none has to wait for the others before it exits.
//  - The epilogue is ours, not CUTLASS's TMA epilogue (which stores a CTA's
//    whole tile from the MMA's registers: on one rank it would pull the
//    other ranks' partials through that rank's SM).  Each rank writes its
//    rows: D = cast(alpha * acc + beta * C), four columns per 8-byte store,
//    C read from its window the same way (before the mainloop, whose time
//    hides the loads), every store predicated on D's window: elements
//    outside it are never written (the grid has the window's tiles only,
//    and a tile's rows and columns past the window's edge store nothing).
//    So the planner's store rule for the direct tiles (D's extents
//    multiples of the tile or spanning their buffer) is stricter than this
//    kernel needs; its K rule is not: a K tile past a window inside its
//    buffer would be summed.
//
// Requirements (the planner's direct rules, ffi/planner.cc DirectChoice):
// one item, row-major A, B, C and D of one 16-bit type, every window
// 16-byte aligned (so n is a multiple of 8: four-column groups are whole
// and 8-byte aligned), K extents multiples of 64 or reaching their buffer's
// edge.  sm_90a only.
#ifndef JAX_DYNOFF_KERNELS_SM90_CLUSTER_K_H_
#define JAX_DYNOFF_KERNELS_SM90_CLUSTER_K_H_

#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>

#include "cute/arch/cluster_sm90.hpp"
#include "cutlass/numeric_conversion.h"
#include "kernels/cluster_smem.h"  // MapToRank
#include "kernels/sm90_direct.h"

namespace jax_dynoff {
namespace kernels {

template <typename Element, int kTileN, int kSplit, int kStages>
struct Sm90ClusterKGemm {
  // A split of 1 runs no cluster (the probe's unsplit baseline).
  static constexpr bool kClustered = kSplit > 1;
  static constexpr int kTileM = kClusterKTileM, kTileK = kClusterKTileK;
  static_assert(kTileM == 64, "one m64 wgmma atom along M");
  static_assert(kSplit >= 1 && kSplit <= 8 && (kSplit & (kSplit - 1)) == 0,
                "the split is a power of two up to a portable cluster");
  using TileShape =
      cute::Shape<cute::Int<kTileM>, cute::Int<kTileN>, cute::Int<kTileK>>;
  // The collective's cluster: one CTA (the launch cluster runs along K).
  using ClusterShape = cute::Shape<cute::_1, cute::_1, cute::_1>;
  using RM = cutlass::layout::RowMajor;
  static constexpr int kAlign = 128 / cutlass::sizeof_bits<Element>::value;

  static constexpr int kConsumerThreads = cutlass::NumThreadsPerWarpGroup;
  static constexpr int kThreads = kConsumerThreads + 32;  // + the producer
  static constexpr int kProducerWarp = kConsumerThreads / 32;
  // The rows each rank owns, and their float32 row pitch in the receive
  // buffer: 8 floats past a multiple of 32 banks, so that a warp's 8-byte
  // stores (8 rows x 32 bytes) take the two wavefronts they must.
  static constexpr int kRows = kTileM / kSplit;
  static constexpr int kPitch = kTileN + 8;
  // Four-column groups of the owned rows, and each consumer thread's share.
  static constexpr int kGroups = kRows * kTileN / 4;
  static constexpr int kGroupsPerThread =
      (kGroups + kConsumerThreads - 1) / kConsumerThreads;

  using Mainloop = DirectMainloop<
      typename cutlass::gemm::collective::CollectiveBuilder<
          cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, Element, RM,
          kAlign, Element, RM, kAlign, float, TileShape, ClusterShape,
          cutlass::gemm::collective::StageCount<kStages>,
          cutlass::gemm::KernelTmaWarpSpecialized>::CollectiveOp>;
  using TiledMma = typename Mainloop::TiledMma;
  using Pipeline = typename Mainloop::MainloopPipeline;
  using PipelineState = typename Mainloop::PipelineState;
  using StrideA = typename Mainloop::StrideA;
  using StrideB = typename Mainloop::StrideB;
  static_assert(cute::size(TiledMma{}) == kConsumerThreads,
                "one consumer warp group");
  // The pair stores below read the wgmma accumulator layout: thread t of
  // the warp group holds rows 16 (t / 32) + (t % 32) / 4 + 8 h and columns
  // 2 (t % 4) + 8 g + c as its flat value 4 g + 2 h + c.
  static_assert(std::is_same_v<typename TiledMma::Atom::LayoutC_TV,
                               cute::SM90::GMMA::CLayout_64xN<kTileN>>,
                "the tile is one m64nN wgmma atom");

  struct SharedStorage {
    typename Mainloop::TensorStorage tensors;
    alignas(16) typename Mainloop::PipelineStorage pipeline;
    // The partials of this rank's rows: recv[source rank][row][column].
    alignas(16) float recv[kSplit][kRows][kPitch];
  };

  struct Params {
    typename Mainloop::Params mainloop;
    int m, n, k;
    float alpha, beta;
    // The windows' first columns at row 0 of layer 0 of their buffers
    // (C: D's when beta == 0; never read then).
    const Element* c;
    Element* d;
    int64_t ldc, ldd;
    DirectWindow c_win, d_win;
  };
  static_assert(sizeof(Params) <= kMaxParamBytes,
                "kernel parameters larger than PreparedLaunch holds");

  // What cutlass::device_kernel launches.
  struct Kernel {
    using Params = Sm90ClusterKGemm::Params;
    static constexpr int SharedStorageSize = sizeof(SharedStorage);
    static constexpr uint32_t MaxThreadsPerBlock = kThreads;
    static constexpr uint32_t MinBlocksPerMultiprocessor = 1;

    CUTLASS_DEVICE void operator()(Params const& params, char* smem) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
      Run(params, *reinterpret_cast<SharedStorage*>(smem));
#else
      // wgmma and TMA exist on sm_90a only; the build compiles this
      // kernel for nothing else.
      __trap();
#endif
    }
  };

  // A consumer thread's `accum` (the collective's fragment) over
  // `k_tiles` K tiles from the pipeline: the collective's mma() and
  // mma_tail(), each stage freed by an arrive at this CTA's own empty
  // barrier (see the header comment).  No K tiles: zeros.
  template <class Accum>
  static CUTLASS_DEVICE void ConsumeKRange(Pipeline& pipeline,
                                           SharedStorage& shared,
                                           Accum& accum, int k_tiles,
                                           int thread_idx) {
    using namespace cute;
    Tensor sA = make_tensor(make_smem_ptr(shared.tensors.smem_A.data()),
                            typename Mainloop::SmemLayoutA{});
    Tensor sB = make_tensor(make_smem_ptr(shared.tensors.smem_B.data()),
                            typename Mainloop::SmemLayoutB{});
    TiledMma tiled_mma;
    auto thread_mma = tiled_mma.get_slice(thread_idx);
    Tensor tCrA = thread_mma.make_fragment_A(thread_mma.partition_A(sA));
    Tensor tCrB = thread_mma.make_fragment_B(thread_mma.partition_B(sB));
    if (k_tiles <= 0) {
      clear(accum);
      return;
    }
    auto release = [&](PipelineState s) {
      shared.pipeline.empty_barrier_[s.index()].arrive();
    };
    PipelineState read, done = read;  // done: the next stage to free
    // The first K tile sets the accumulators (ScaleOut::Zero).
    warpgroup_fence_operand(accum);
    {
      auto token = pipeline.consumer_try_wait(read);
      pipeline.consumer_wait(read, token);
      const int stage = read.index();
      warpgroup_arrive();
      tiled_mma.accumulate_ = GMMA::ScaleOut::Zero;
      CUTLASS_PRAGMA_UNROLL
      for (int kb = 0; kb < size<2>(tCrA); ++kb) {
        cute::gemm(tiled_mma, tCrA(_, _, kb, stage), tCrB(_, _, kb, stage),
                   accum);
        tiled_mma.accumulate_ = GMMA::ScaleOut::One;
      }
      warpgroup_commit_batch();
      ++read;
    }
    warpgroup_fence_operand(accum);
    CUTLASS_PRAGMA_NO_UNROLL
    for (int left = k_tiles - 1; left > 0; --left) {
      auto token = pipeline.consumer_try_wait(read);
      pipeline.consumer_wait(read, token);
      const int stage = read.index();
      warpgroup_fence_operand(accum);
      warpgroup_arrive();
      cute::gemm(tiled_mma, tCrA(_, _, _, stage), tCrB(_, _, _, stage),
                 accum);
      warpgroup_commit_batch();
      // The previous tile's wgmmas are done: its stage can be refilled.
      warpgroup_wait<1>();
      warpgroup_fence_operand(accum);
      release(done);
      ++done;
      ++read;
    }
    warpgroup_wait<0>();
    warpgroup_fence_operand(accum);
    release(done);
  }

  // This CTA's shared-memory address `p` in cluster rank `rank`'s window.
  static CUTLASS_DEVICE uint32_t MapTo(const void* p, int rank) {
    return MapToRank(static_cast<uint32_t>(__cvta_generic_to_shared(p)),
                     rank);
  }

  static CUTLASS_DEVICE void Run(Params const& params,
                                 SharedStorage& shared) {
    using namespace cute;
    const int thread_idx = static_cast<int>(threadIdx.x);
    const int warp_idx = cutlass::canonical_warp_idx_sync();
    const bool producer = warp_idx == kProducerWarp;
    const int rank =
        kClustered ? static_cast<int>(cute::block_rank_in_cluster()) : 0;
    const int tile = static_cast<int>(blockIdx.x) / kSplit;
    const int tiles_m = (params.m + kTileM - 1) / kTileM;
    const int m_tile = tile % tiles_m, n_tile = tile / tiles_m;
    // This rank's K tiles: an even share, in order.
    const int k_tiles = (params.k + kTileK - 1) / kTileK;
    const int k_begin = static_cast<int>(int64_t{rank} * k_tiles / kSplit);
    const int k_count =
        static_cast<int>(int64_t{rank + 1} * k_tiles / kSplit) - k_begin;

    if (producer && cute::elect_one_sync())
      Mainloop::prefetch_tma_descriptors(params.mainloop);
    typename Pipeline::Params pp;
    pp.role = producer ? Pipeline::ThreadCategory::Producer
                       : Pipeline::ThreadCategory::Consumer;
    pp.is_leader = thread_idx == kProducerWarp * 32;
    pp.num_consumers = kConsumerThreads;
    pp.transaction_bytes = params.mainloop.tma_transaction_bytes;
    Pipeline pipeline(shared.pipeline, pp, ClusterShape{});
    __syncthreads();  // the barriers' initialisation, visible to the CTA
    // This CTA is running: a peer may store into its shared memory once
    // the peer's matching wait has seen every rank arrive.  The wait sits
    // right before the first such store, so that the barrier's round trip
    // overlaps the mainloop.
    if constexpr (kClustered) cute::cluster_arrive_relaxed();

    if (producer) {
      Mainloop mainloop;
      auto inputs = mainloop.load_init(
          make_shape(params.m, params.n, params.k, 1), params.mainloop);
      auto k_shape = shape<3>(get<0>(inputs));
      PipelineState write = cutlass::make_producer_start_state<Pipeline>();
      // Block rank 0: the collective sees a cluster of one CTA.
      mainloop.load(params.mainloop, pipeline, write, inputs,
                    make_coord(m_tile, n_tile, _, 0),
                    make_coord_iterator(idx2crd(k_begin, k_shape), k_shape),
                    k_count, cutlass::canonical_lane_idx(), 0u,
                    shared.tensors);
      write.advance(k_count);
      mainloop.load_tail(pipeline, write);
      __syncwarp();
      if constexpr (kClustered) {
        cute::cluster_wait();
        cute::cluster_arrive();
        cute::cluster_wait();
      }
      return;
    }

    // The four-column groups this thread writes (of its rank's rows), and
    // their C: loaded before the mainloop, whose time hides the loads (and
    // those of the start values that locate the windows).
    const int row0 = m_tile * kTileM + rank * kRows;  // this rank's rows
    const int col0 = n_tile * kTileN;
    const int2 d_at = params.d_win.Locate();
    Element* const d_tile =
        params.d + (int64_t{d_at.y} * params.d_win.rows + d_at.x + row0) *
                       params.ldd + col0;
    uint2 c_bits[kGroupsPerThread] = {};
    if (params.beta != 0.f) {
      const int2 c_at = params.c_win.Locate();
      const Element* c_tile =
          params.c + (int64_t{c_at.y} * params.c_win.rows + c_at.x + row0) *
                         params.ldc + col0;
      CUTLASS_PRAGMA_UNROLL
      for (int i = 0; i < kGroupsPerThread; ++i) {
        const int g = thread_idx + i * kConsumerThreads;
        const int r = g / (kTileN / 4), c = 4 * (g % (kTileN / 4));
        if (g < kGroups && row0 + r < params.m && col0 + c < params.n)
          c_bits[i] = *reinterpret_cast<const uint2*>(
              c_tile + int64_t{r} * params.ldc + c);
      }
    }

    Tensor accum = partition_fragment_C(TiledMma{}, take<0, 2>(TileShape{}));
    ConsumeKRange(pipeline, shared, accum, k_count, thread_idx);

    // Each adjacent column pair to its owner's slot for this rank.
    if constexpr (kClustered) cute::cluster_wait();  // every rank is running
    const int lane = thread_idx % 32;
    const int t_row = 16 * (thread_idx / 32) + lane / 4;
    const int t_col = 2 * (lane % 4);
    CUTLASS_PRAGMA_UNROLL
    for (int h = 0; h < 2; ++h) {
      const int r = t_row + 8 * h;
      const int owner = r / kRows;
      float* row = &shared.recv[rank][r % kRows][t_col];
      if constexpr (!kClustered) {
        CUTLASS_PRAGMA_UNROLL
        for (int g = 0; g < kTileN / 8; ++g)
          *reinterpret_cast<float2*>(row + 8 * g) =
              make_float2(accum(4 * g + 2 * h), accum(4 * g + 2 * h + 1));
      } else {
        const uint32_t dst = MapTo(row, owner);
        CUTLASS_PRAGMA_UNROLL
        for (int g = 0; g < kTileN / 8; ++g)
          asm volatile(
              "st.shared::cluster.v2.f32 [%0], {%1, %2};\n" ::"r"(
                  dst + 32 * g),
              "f"(accum(4 * g + 2 * h)), "f"(accum(4 * g + 2 * h + 1))
              : "memory");
      }
    }
    // Every rank's partials are in their owners' memory.
    if constexpr (kClustered) {
      cute::cluster_arrive();
      cute::cluster_wait();
    } else {
      cutlass::arch::NamedBarrier::sync(kConsumerThreads, 1);
    }

    // This rank's rows: the ranks' partials in rank order, then
    // alpha * acc + beta * C, cast, stored where the window has them.
    cutlass::NumericConverter<Element, float> to_element;
    const auto pack = [&](float lo, float hi) {
      return uint32_t{to_element(lo).raw()} |
             uint32_t{to_element(hi).raw()} << 16;
    };
    const auto unpack = [](uint32_t bits, float* lo, float* hi) {
      *lo = static_cast<float>(Element::bitcast(uint16_t(bits & 0xffff)));
      *hi = static_cast<float>(Element::bitcast(uint16_t(bits >> 16)));
    };
    CUTLASS_PRAGMA_UNROLL
    for (int i = 0; i < kGroupsPerThread; ++i) {
      const int g = thread_idx + i * kConsumerThreads;
      const int r = g / (kTileN / 4), c = 4 * (g % (kTileN / 4));
      if (g >= kGroups || row0 + r >= params.m || col0 + c >= params.n)
        continue;
      float4 v = *reinterpret_cast<const float4*>(&shared.recv[0][r][c]);
      CUTLASS_PRAGMA_UNROLL
      for (int src = 1; src < kSplit; ++src) {
        const float4 p =
            *reinterpret_cast<const float4*>(&shared.recv[src][r][c]);
        v.x += p.x; v.y += p.y; v.z += p.z; v.w += p.w;
      }
      float o[4] = {params.alpha * v.x, params.alpha * v.y,
                    params.alpha * v.z, params.alpha * v.w};
      if (params.beta != 0.f) {
        float cv[4];
        unpack(c_bits[i].x, &cv[0], &cv[1]);
        unpack(c_bits[i].y, &cv[2], &cv[3]);
        CUTLASS_PRAGMA_UNROLL
        for (int e = 0; e < 4; ++e) o[e] += params.beta * cv[e];
      }
      *reinterpret_cast<uint2*>(d_tile + int64_t{r} * params.ldd + c) =
          make_uint2(pack(o[0], o[1]), pack(o[2], o[3]));
    }
  }

  static Params MakeParams(const DirectLaunch& l) {
    typename Mainloop::Arguments ma{};
    ma.ptr_A = static_cast<const Element*>(l.base_a);
    ma.dA = MakeStride<StrideA>(l.lda, l.lda * l.a.rows);
    ma.ptr_B = static_cast<const Element*>(l.base_b);
    ma.dB = MakeStride<StrideB>(l.ldb, l.ldb * l.b.rows);
    ma.a_win = l.a;
    ma.b_win = l.b;
    Params p;
    p.mainloop = Mainloop::to_underlying_arguments(
        cute::make_shape(l.m, l.n, l.k, 1), ma, nullptr);
    p.m = l.m;
    p.n = l.n;
    p.k = l.k;
    p.alpha = l.alpha;
    p.beta = l.beta;
    p.c = static_cast<const Element*>(l.base_c);
    p.d = static_cast<Element*>(l.base_d);
    p.ldc = l.ldc;
    p.ldd = l.ldd;
    p.c_win = l.c;
    p.d_win = l.d;
    return p;
  }

  static std::string Prepare(const DirectLaunch& l, PreparedLaunch* out) {
    const char* what = "cluster-K SM90 GEMM";
    if (l.m < 1 || l.n < 1 || l.k < 1)
      return std::string(what) + ": bad m, n or k";
    typename Mainloop::Arguments ma{};
    ma.dA = MakeStride<StrideA>(l.lda, l.lda * l.a.rows);
    ma.dB = MakeStride<StrideB>(l.ldb, l.ldb * l.b.rows);
    if (!Mainloop::can_implement(cute::make_shape(l.m, l.n, l.k, 1), ma))
      return std::string(what) + ": can_implement: misaligned operands";
    const int64_t tiles = int64_t{(l.m + kTileM - 1) / kTileM} *
                          ((l.n + kTileN - 1) / kTileN);
    if (tiles * kSplit > 0x7fffffff)
      return std::string(what) + ": more CTAs than a grid holds";
    if (cudaError_t e = PrepareSm90KernelOnce<Kernel>(l.device);
        e != cudaSuccess)
      return std::string(what) + ": cudaFuncSetAttribute: " +
             cudaGetErrorString(e);
    const Params params = MakeParams(l);
    out->fn = reinterpret_cast<const void*>(&cutlass::device_kernel<Kernel>);
    out->grid = dim3(static_cast<unsigned>(tiles * kSplit));
    out->block = dim3(Kernel::MaxThreadsPerBlock);
    out->cluster = dim3(static_cast<unsigned>(kSplit), 1, 1);
    out->smem = Kernel::SharedStorageSize;
    out->param_bytes = sizeof(Params);
    std::memcpy(out->params, &params, sizeof(Params));
    return "";
  }
};

// The kernel entry: the tile width the plan chose (DirectLaunch::tile_n,
// plan.h ClusterKTileN) at the split of kClusterKSplit, six stages (72 KiB
// in flight at 64x32, 96 at 64x64: one CTA per SM streams its share of A
// and B at the rate the probe measured).
template <typename Element>
struct Sm90ClusterK {
  template <int kTileN>
  using Gemm = Sm90ClusterKGemm<Element, kTileN, kClusterKSplit, 6>;

  static std::string Prepare(const DirectLaunch& l, PreparedLaunch* out) {
    if (l.split_k != kClusterKSplit)
      return "cluster-K SM90 GEMM: the split must be " +
             std::to_string(kClusterKSplit);
    switch (l.tile_n) {
      case 32: return Gemm<32>::Prepare(l, out);
      case 64: return Gemm<64>::Prepare(l, out);
      default: return "cluster-K SM90 GEMM: the tile width must be 32 or 64";
    }
  }
  static size_t Workspace(const DirectLaunch&) { return 0; }
  static std::string Run(const DirectLaunch& l) {
    PreparedLaunch launch;
    std::string r = Prepare(l, &launch);
    if (r.empty()) r = LaunchPrepared(launch, l.stream);
    return r;
  }
};

}  // namespace kernels
}  // namespace jax_dynoff

// One instantiation per translation unit:
//   JAX_DYNOFF_SM90_CLUSTER_K_KERNEL(kSm90DirectClusterKBf16NN,
//                                    cutlass::bfloat16_t)
#define JAX_DYNOFF_SM90_CLUSTER_K_KERNEL(NAME, ELEMENT)                      \
  namespace jax_dynoff {                                                     \
  namespace kernels {                                                        \
  using NAME##_t = Sm90ClusterK<ELEMENT>;                                    \
  extern const DirectKernelEntry NAME = {#NAME, &NAME##_t::Workspace,        \
                                         &NAME##_t::Run, &NAME##_t::Prepare};\
  }                                                                          \
  }

#endif  // JAX_DYNOFF_KERNELS_SM90_CLUSTER_K_H_
