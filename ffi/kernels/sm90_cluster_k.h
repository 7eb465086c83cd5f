// The cluster-K direct kernel: 16-bit NN GEMMs at device offsets with few
// output tiles and a long K (m = 64..256, n and k = 1024..4096: decode
// steps, small batches, loop bodies), where one CTA per output tile leaves
// most SMs idle: at 128x1024x1024 the tiny tile (64x64) runs 32 CTAs, each
// streaming all of K, 6.4 us on an H200 against 4.0 us for XLA's Triton
// GEMM (floor ~0.6 us: 2.4 MB at 4.3 TB/s).
//
// Each 64x64 output tile is computed by the `split` CTAs of one thread-
// block cluster; rank r takes an even share of the K tiles, in order
// (ffi/plan.h ClusterKSplit says how many ranks and which tiles), runs
// CUTLASS's SS wgmma mainloop over them, and the ranks add their float32
// accumulators through distributed shared memory: one launch, no
// workspace, no memset.  Grid x: the rank, then the output tiles with M
// fastest (the CTAs running together share B's column tiles in L2).
//
// What is CUTLASS's and what is ours:
//  - The mainloop is the collective CUTLASS's builder makes for
//    KernelTmaWarpSpecialized (64x64x64, one consumer warp group) with
//    cluster shape 1x1x1 (no multicast: the cluster runs along K, which no
//    CUTLASS kernel supports), through DirectMainloop (kernels/
//    sm90_direct.h: TMA descriptors over the whole buffers, windows located
//    on the device).  The producer warp runs the collective's load() over
//    its rank's K range (k_tile_iter at the range's first tile, k_tile_count
//    its length) and load_tail().
//  - The consumer's loop (ConsumeKRange) is the collective's mma() and
//    mma_tail() with one change.  CUTLASS's PipelineTmaAsync picks the CTA
//    whose empty barrier a consumer arrives at from the compile-time
//    cluster shape: for 1x1x1, rank 0 (cutlass/pipeline/sm90_pipeline.hpp,
//    PipelineTmaAsync's constructor: `dst_blockid_ = 0` where
//    `cluster_size == 1`; consumer_release: `empty_barrier_ptr_[stage]
//    .arrive(dst_blockid_, ...)`, a `mapa` to that rank), so in a launch
//    cluster of `split` CTAs every rank would free rank 0's stages.  Ours
//    arrives at its own CTA's barrier; waits, wgmma batching (one batch in
//    flight) and barrier counts are the collective's.
//  - The kernel layer is ours, after CUTLASS 4.2's non-persistent
//    kernel/sm90_gemm_tma_warpspecialized.hpp: a producer warp group (its
//    first warp issues the TMA loads) and one consumer warp group.
//  - The reduction is a reduce-scatter.  A consumer thread's accumulator
//    fragment is 8 chunks of 4 floats (two adjacent columns in two rows 8
//    apart, the wgmma D layout); rank q owns chunks [q * 8 / split,
//    (q + 1) * 8 / split) of every thread, i.e. a 1/split share of the tile.
//    Each rank stores the chunks others own into the owner's shared memory
//    (16-byte stores to the peer, one slot per source rank), then one
//    cluster barrier, then each owner adds the ranks' partials in rank
//    order, rank 0 first (the same bits on every run: deterministic), its
//    own from registers.  Stores rather than loads across the cluster: no
//    rank waits on a remote round trip, and no rank reads a peer after the
//    barrier, so none has to wait for the others before it exits.
//  - The epilogue is ours, not CUTLASS's TMA epilogue: that one stores a
//    CTA's whole tile from the MMA's register fragment, so on one rank of
//    the cluster it would pull the other split - 1 partial tiles through
//    that rank's SM (48 KiB of remote reads on one SM at split 4, where the
//    reduce-scatter moves 12 KiB into each), and it needs its shared
//    memory and load pipeline on every rank for one rank to use.  Each rank
//    writes its share: D = cast(alpha * acc + beta * C), two adjacent
//    columns per 32-bit store, C read from its window the same way (before
//    the mainloop, whose time hides the loads), every store predicated
//    on D's window: elements outside it are never written (the grid has
//    the window's tiles only, and a tile's rows and columns past the
//    window's edge store nothing).  So the planner's store rule for the
//    direct tiles (D's extents multiples of the tile or spanning their
//    buffer) is stricter than this kernel needs; its K rule is not: a K
//    tile past a window inside its buffer would be summed.
//
// Requirements (the planner's direct rules, ffi/planner.cc DirectChoice):
// one item, row-major A, B, C and D of one 16-bit type, every window
// 16-byte aligned (so n is a multiple of 8: column pairs are whole), K
// extents multiples of 64 or reaching their buffer's edge.  sm_90a only.
#ifndef JAX_DYNOFF_KERNELS_SM90_CLUSTER_K_H_
#define JAX_DYNOFF_KERNELS_SM90_CLUSTER_K_H_

#include <cooperative_groups.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>

#include "cutlass/numeric_conversion.h"
#include "kernels/sm90_direct.h"

namespace jax_dynoff {
namespace kernels {

template <typename Element>
struct Sm90ClusterKGemm {
  using TileShape = cute::Shape<cute::Int<kClusterKTileM>,
                                cute::Int<kClusterKTileN>,
                                cute::Int<kClusterKTileK>>;
  // The collective's cluster: one CTA (the launch cluster runs along K).
  using ClusterShape = cute::Shape<cute::_1, cute::_1, cute::_1>;
  using RM = cutlass::layout::RowMajor;
  static constexpr int kAlign = 128 / cutlass::sizeof_bits<Element>::value;

  static constexpr int kConsumerThreads = cutlass::NumThreadsPerWarpGroup;
  // float32 accumulators per consumer thread, in chunks of 4.
  static constexpr int kFrag = kClusterKTileM * kClusterKTileN /
                               kConsumerThreads;
  static constexpr int kChunks = kFrag / 4;
  static_assert(kChunks % kClusterKMaxSplit == 0,
                "every split must divide a thread's chunks evenly");
  // Six 16-KiB stages, 112 KiB of shared memory with the receive buffer:
  // two CTAs fit on one SM (228 KiB, 1 KiB reserved per CTA), so a GPC
  // with fewer free SMs than a cluster has ranks can still take the
  // cluster (at one CTA per SM a GPC of 14 SMs holds one cluster of 8, at
  // two it holds three).  A rank's K range is a few tiles at the shapes
  // this tile is for (4 at 128x1024x1024), and 96 KiB in flight per SM
  // streams an unsplit K at an SM's share of HBM.
  static constexpr int kStages = 6;

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
  // The pair stores below read the wgmma accumulator layout: value
  // (c, h, g) of a thread at column 8 g + c and row 8 h of its quad's rows,
  // i.e. flat value 4 g + 2 h + c.
  static_assert(std::is_same_v<typename TiledMma::Atom::LayoutC_TV,
                               cute::SM90::GMMA::CLayout_64x64>,
                "the 64x64 tile is one m64n64 wgmma atom");

  struct SharedStorage {
    typename Mainloop::TensorStorage tensors;
    alignas(16) typename Mainloop::PipelineStorage pipeline;
    // The partials this rank receives: recv[source rank * (kChunks /
    // split) + owned chunk][consumer thread] (its own source's slots idle).
    alignas(16) float4 recv[kChunks][kConsumerThreads];
  };

  struct Params {
    typename Mainloop::Params mainloop;
    int m, n, k, split;
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
  static_assert(2 * (sizeof(SharedStorage) + 1024) <= 228 * 1024,
                "two CTAs per SM");

  // What cutlass::device_kernel launches.
  struct Kernel {
    using Params = Sm90ClusterKGemm::Params;
    static constexpr int SharedStorageSize = sizeof(SharedStorage);
    static constexpr uint32_t MaxThreadsPerBlock = 2 * kConsumerThreads;
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

  static CUTLASS_DEVICE void Run(Params const& params,
                                 SharedStorage& shared) {
    using namespace cute;
    namespace cg = cooperative_groups;
    const int thread_idx = static_cast<int>(threadIdx.x);
    const int warp_idx = cutlass::canonical_warp_idx_sync();
    const bool producer = cutlass::canonical_warp_group_idx() == 0;
    const int wg_thread = thread_idx % kConsumerThreads;
    const int split = params.split;  // == the launch's cluster size
    const int rank = static_cast<int>(block_rank_in_cluster());
    const int tile = static_cast<int>(blockIdx.x) / split;
    const int tiles_m = (params.m + kClusterKTileM - 1) / kClusterKTileM;
    const int m_tile = tile % tiles_m, n_tile = tile / tiles_m;
    // This rank's K tiles: an even share, in order (plan.h ClusterKSplit).
    const int k_tiles = (params.k + kClusterKTileK - 1) / kClusterKTileK;
    const int k_begin =
        static_cast<int>(int64_t{rank} * k_tiles / split);
    const int k_count =
        static_cast<int>(int64_t{rank + 1} * k_tiles / split) - k_begin;

    if (warp_idx == 0 && cute::elect_one_sync())
      Mainloop::prefetch_tma_descriptors(params.mainloop);
    typename Pipeline::Params pp;
    if (producer && warp_idx == 0) pp.role = Pipeline::ThreadCategory::Producer;
    if (!producer) pp.role = Pipeline::ThreadCategory::Consumer;
    pp.is_leader = wg_thread == 0;
    pp.num_consumers = kConsumerThreads;
    pp.transaction_bytes = params.mainloop.tma_transaction_bytes;
    Pipeline pipeline(shared.pipeline, pp, ClusterShape{});
    __syncthreads();  // the barriers' initialisation, visible to the CTA
    // This CTA is running: a peer may store into its shared memory once
    // the peer's matching wait has seen every rank arrive.  The waits sit
    // right before the first such store, so that the barrier's round trip
    // overlaps the mainloop.
    __cluster_barrier_arrive_relaxed();

    cg::cluster_group cluster = cg::this_cluster();
    const int own = kChunks / split;  // chunks this rank owns per thread
    // A consumer thread's share of C (two columns a word, rows 8 apart).
    uint32_t c_bits[kChunks][2] = {};
    const Element* c_row = nullptr;
    Element* d_row = nullptr;
    int row = 0, col = 0;  // of the thread's first value, in the windows
    Tensor accum = partition_fragment_C(TiledMma{}, take<0, 2>(TileShape{}));

    if (producer) {
      if (warp_idx == 0) {
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
      }
      __syncwarp();
      __cluster_barrier_wait();
    } else {
      // Where the thread's values land (the (row, column) of its first
      // value in the windows, then its rows of C and D), and its share of
      // C: loaded before the mainloop, whose time hides the loads (and
      // those of the start values that locate the windows).
      Tensor coord = TiledMma{}.get_slice(wg_thread).partition_C(
          make_identity_tensor(take<0, 2>(TileShape{})));
      row = get<0>(coord(0)) + m_tile * kClusterKTileM;
      col = get<1>(coord(0)) + n_tile * kClusterKTileN;
      const int2 d_at = params.d_win.Locate();
      d_row = params.d +
              (int64_t{d_at.y} * params.d_win.rows + d_at.x + row) *
                  params.ldd;
      if (params.beta != 0.f) {
        const int2 c_at = params.c_win.Locate();
        c_row = params.c +
                (int64_t{c_at.y} * params.c_win.rows + c_at.x + row) *
                    params.ldc;
        CUTLASS_PRAGMA_UNROLL
        for (int j = 0; j < kChunks; ++j) {
          const int cj = col + 8 * j;
          if (j / own != rank || cj >= params.n) continue;
          if (row < params.m)
            c_bits[j][0] = *reinterpret_cast<const uint32_t*>(c_row + cj);
          if (row + 8 < params.m)
            c_bits[j][1] = *reinterpret_cast<const uint32_t*>(
                c_row + 8 * params.ldc + cj);
        }
      }
      ConsumeKRange(pipeline, shared, accum, k_count, wg_thread);
      __cluster_barrier_wait();  // every rank is running
      // The chunks other ranks own, into their shared memory.
      CUTLASS_PRAGMA_UNROLL
      for (int j = 0; j < kChunks; ++j) {
        const int owner = j / own;
        if (owner == rank) continue;
        float4* slot = &shared.recv[rank * own + j % own][wg_thread];
        *cluster.map_shared_rank(slot, owner) =
            make_float4(accum(4 * j), accum(4 * j + 1), accum(4 * j + 2),
                        accum(4 * j + 3));
      }
    }
    __syncwarp();
    cluster.sync();  // every rank's partials are in their owners' memory
    if (producer) return;

    // This rank's chunks: the ranks' partials in rank order, then
    // alpha * acc + beta * C, cast, stored where the window has them.
    // Two adjacent columns as one 32-bit word, the lower column in the
    // lower half (little-endian memory order).
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
    for (int j = 0; j < kChunks; ++j) {
      const int cj = col + 8 * j;
      if (j / own != rank || cj >= params.n || row >= params.m) continue;
      float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
      for (int src = 0; src < split; ++src) {
        const float4 p =
            src == rank
                ? make_float4(accum(4 * j), accum(4 * j + 1),
                              accum(4 * j + 2), accum(4 * j + 3))
                : shared.recv[src * own + j % own][wg_thread];
        if (src == 0) {
          v = p;
        } else {
          v.x += p.x; v.y += p.y; v.z += p.z; v.w += p.w;
        }
      }
      float o[4] = {params.alpha * v.x, params.alpha * v.y,
                    params.alpha * v.z, params.alpha * v.w};
      if (c_row != nullptr) {
        float c[4];
        unpack(c_bits[j][0], &c[0], &c[1]);
        unpack(c_bits[j][1], &c[2], &c[3]);
        CUTLASS_PRAGMA_UNROLL
        for (int e = 0; e < 4; ++e) o[e] += params.beta * c[e];
      }
      *reinterpret_cast<uint32_t*>(d_row + cj) = pack(o[0], o[1]);
      if (row + 8 < params.m)
        *reinterpret_cast<uint32_t*>(d_row + 8 * params.ldd + cj) =
            pack(o[2], o[3]);
    }
  }

  static std::string Check(const DirectLaunch& l) {
    if (l.m < 1 || l.n < 1 || l.k < 1) return "bad m, n or k";
    if (l.split_k < 1 || l.split_k > kClusterKMaxSplit ||
        (l.split_k & (l.split_k - 1)) != 0)
      return "split must be 1, 2, 4 or 8";
    return "";
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
    p.split = l.split_k;
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

  static size_t Workspace(const DirectLaunch&) { return 0; }

  static std::string Prepare(const DirectLaunch& l, PreparedLaunch* out) {
    const char* what = "cluster-K SM90 GEMM";
    if (std::string why = Check(l); !why.empty())
      return std::string(what) + ": " + why;
    typename Mainloop::Arguments ma{};
    ma.dA = MakeStride<StrideA>(l.lda, l.lda * l.a.rows);
    ma.dB = MakeStride<StrideB>(l.ldb, l.ldb * l.b.rows);
    if (!Mainloop::can_implement(cute::make_shape(l.m, l.n, l.k, 1), ma))
      return std::string(what) + ": can_implement: misaligned operands";
    const int64_t tiles =
        int64_t{(l.m + kClusterKTileM - 1) / kClusterKTileM} *
        ((l.n + kClusterKTileN - 1) / kClusterKTileN);
    if (tiles * l.split_k > 0x7fffffff)
      return std::string(what) + ": more CTAs than a grid holds";
    if (cudaError_t e = PrepareSm90KernelOnce<Kernel>(l.device);
        e != cudaSuccess)
      return std::string(what) + ": cudaFuncSetAttribute: " +
             cudaGetErrorString(e);
    const Params params = MakeParams(l);
    out->fn = reinterpret_cast<const void*>(&cutlass::device_kernel<Kernel>);
    out->grid = dim3(static_cast<unsigned>(tiles * l.split_k));
    out->block = dim3(Kernel::MaxThreadsPerBlock);
    out->cluster = dim3(static_cast<unsigned>(l.split_k), 1, 1);
    out->smem = Kernel::SharedStorageSize;
    out->param_bytes = sizeof(Params);
    std::memcpy(out->params, &params, sizeof(Params));
    return "";
  }

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
#define JAX_DYNOFF_SM90_CLUSTER_K_KERNEL(NAME, ELEMENT)                     \
  namespace jax_dynoff {                                                    \
  namespace kernels {                                                       \
  using NAME##_t = Sm90ClusterKGemm<ELEMENT>;                               \
  extern const DirectKernelEntry NAME = {#NAME, &NAME##_t::Workspace,       \
                                         &NAME##_t::Run, &NAME##_t::Prepare};\
  }                                                                         \
  }

#endif  // JAX_DYNOFF_KERNELS_SM90_CLUSTER_K_H_
