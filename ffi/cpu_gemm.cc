// CPU handler: the full jax_dynoff.gemm semantics on the host.
//
// The product runs on OpenBLAS's sgemm when the package loaded one
// (SetCpuBlas: the scipy-openblas32 wheel's library, the OpenBLAS numpy and
// scipy are built with; loaded at run time, so the build needs no BLAS):
// float32 windows are passed in place with their leading dimensions and
// transposes, 16-bit ones gathered into float32 panels first (exact).
// Without one, a cache-blocked i-k-j loop over the panels does it.  Either
// way the whole result (C included) is formed in a scratch tile before D is
// written, which makes C and D windows of one buffer correct however they
// overlap.
//
// The work runs on XLA's intra-op thread pool (the FFI's ThreadPool), in
// blocks of rows or columns, one single-threaded sgemm per block: OpenBLAS's
// own pool of spinning workers beside XLA's fought it for the same cores
// (docs/design.md).  The calling thread takes blocks too and never waits
// for a task that has not started, so a busy or missing pool only makes a
// call slower.
#include <dlfcn.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define JAX_DYNOFF_F16C 1  // float16 rows by F16C where the CPU has it
#endif

#include <algorithm>
#include <atomic>
#include <climits>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "ffi_problem.h"
#include "handlers.h"
#include "xla/ffi/api/ffi.h"

namespace jax_dynoff {
namespace {

// cblas_sgemm (row major: order 101; no transpose 111, transpose 112) of the
// loaded BLAS, or nullptr.
using Sgemm = void (*)(int order, int trans_a, int trans_b, int m, int n,
                       int k, float alpha, const float* a, int lda,
                       const float* b, int ldb, float beta, float* c, int ldc);
constexpr int kRowMajor = 101, kNoTrans = 111, kTrans = 112;
std::atomic<Sgemm> g_sgemm{nullptr};
std::string g_blas_name;  // written once, before g_sgemm is published

// ---- 16-bit float conversions (round to nearest even, NaN preserved) ----

float BF16ToFloat(uint16_t h) {
  uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

uint16_t FloatToBF16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

float F16ToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu, u;
  if (exp == 0x1f) {
    u = sign | 0x7f800000u | (mant << 13);  // inf / nan
  } else if (exp != 0) {
    u = sign | ((exp + 112) << 23) | (mant << 13);
  } else if (mant == 0) {
    u = sign;
  } else {  // subnormal: normalise
    int e = -1;
    do {
      ++e;
      mant <<= 1;
    } while ((mant & 0x400u) == 0);
    u = sign | (static_cast<uint32_t>(112 - e) << 23) | ((mant & 0x3ffu) << 13);
  }
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

uint16_t FloatToF16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return sign | 0x7e00u;               // nan
  if (a >= 0x477ff000u) return sign | 0x7c00u;              // overflow -> inf
  if (a < 0x38800000u) {                                    // subnormal / zero
    if (a < 0x33000000u) return sign;                       // < half of min subnormal
    const uint32_t e = a >> 23;
    const uint32_t m = (a & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126 - e;                         // 14..24
    uint32_t r = m >> shift;
    const uint32_t rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (r & 1u))) ++r;
    return sign | static_cast<uint16_t>(r);
  }
  uint32_t r = a - 0x38000000u;                             // rebias 127 -> 15
  r += 0xfffu + ((r >> 13) & 1u);
  return sign | static_cast<uint16_t>(r >> 13);
}

float Load(const void* base, DType t, int64_t i) {
  switch (t) {
    case DType::kF32: return static_cast<const float*>(base)[i];
    case DType::kF16: return F16ToFloat(static_cast<const uint16_t*>(base)[i]);
    case DType::kBF16: return BF16ToFloat(static_cast<const uint16_t*>(base)[i]);
  }
  return 0.0f;
}


// float16 rows through the F16C instructions where the CPU has them (the
// same values as F16ToFloat / FloatToF16: exact widening, round to nearest
// even), else the scalar code above.
#ifdef JAX_DYNOFF_F16C
__attribute__((target("avx,f16c"))) void F16RowToFloatF16c(
    const uint16_t* h, int64_t n, float* dst) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128(
                                  reinterpret_cast<const __m128i*>(h + i))));
  for (; i < n; ++i) dst[i] = F16ToFloat(h[i]);
}
__attribute__((target("avx,f16c"))) void FloatRowToF16F16c(
    const float* src, int64_t n, uint16_t* h) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(h + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(src + i),
                                     _MM_FROUND_TO_NEAREST_INT));
  for (; i < n; ++i) h[i] = FloatToF16(src[i]);
}
bool HasF16c() {
  static const bool has = __builtin_cpu_supports("f16c") &&
                          __builtin_cpu_supports("avx");
  return has;
}
#endif

// Converts n contiguous elements of type t to float32 (one loop per type,
// so that the compiler vectorises them).
void ToFloat(const void* src, DType t, int64_t n, float* dst) {
  if (t == DType::kF32) {
    std::memcpy(dst, src, static_cast<size_t>(n) * 4);
  } else if (t == DType::kBF16) {
    const uint16_t* h = static_cast<const uint16_t*>(src);
    uint32_t* u = reinterpret_cast<uint32_t*>(dst);
    for (int64_t i = 0; i < n; ++i) u[i] = static_cast<uint32_t>(h[i]) << 16;
  } else {
    const uint16_t* h = static_cast<const uint16_t*>(src);
#ifdef JAX_DYNOFF_F16C
    if (HasF16c()) return F16RowToFloatF16c(h, n, dst);
#endif
    for (int64_t i = 0; i < n; ++i) dst[i] = F16ToFloat(h[i]);
  }
}

// Converts n float32 values to n contiguous elements of type t.
void FromFloat(const float* src, DType t, int64_t n, void* dst) {
  if (t == DType::kF32) {
    std::memcpy(dst, src, static_cast<size_t>(n) * 4);
  } else if (t == DType::kBF16) {
    uint16_t* h = static_cast<uint16_t*>(dst);
    for (int64_t i = 0; i < n; ++i) h[i] = FloatToBF16(src[i]);
  } else {
    uint16_t* h = static_cast<uint16_t*>(dst);
#ifdef JAX_DYNOFF_F16C
    if (HasF16c()) return FloatRowToF16F16c(src, n, h);
#endif
    for (int64_t i = 0; i < n; ++i) h[i] = FloatToF16(src[i]);
  }
}

// Rows [r0, r1) of op(window) as a dense (r1 - r0) x cols float panel.  The
// window at element offset `off` is stored row-major with leading
// dimension `ld`; `trans` reads it transposed.
void GatherRows(const void* base, DType t, int64_t off, int64_t ld,
                bool trans, int64_t r0, int64_t r1, int64_t cols,
                float* panel) {
  const int64_t e = ElementBytes(t);
  const char* b = static_cast<const char*>(base);
  if (!trans) {
    for (int64_t i = r0; i < r1; ++i)
      ToFloat(b + (off + i * ld) * e, t, cols, panel + (i - r0) * cols);
    return;
  }
  for (int64_t i = r0; i < r1; ++i)
    for (int64_t j = 0; j < cols; ++j)
      panel[(i - r0) * cols + j] = Load(base, t, off + j * ld + i);
}

// GatherRows for a ragged window (vr x vc valid of the stored window):
// zeros outside the valid part, which is never read (a ragged window's
// capacity may cross its array's end).
void GatherMasked(const void* base, DType t, int64_t off, int64_t ld,
                  bool trans, int64_t r0, int64_t r1, int64_t cols,
                  int64_t vr, int64_t vc, float* panel) {
  for (int64_t i = r0; i < r1; ++i)
    for (int64_t j = 0; j < cols; ++j) {
      const int64_t sr = trans ? j : i, sc = trans ? i : j;
      panel[(i - r0) * cols + j] =
          sr < vr && sc < vc ? Load(base, t, off + sr * ld + sc) : 0.0f;
    }
}

// Runs fn(b) for every block b in [0, blocks) once, on the calling thread
// and on the pool's threads; returns when every block is done.  The caller
// takes blocks itself and waits only for blocks in progress, never for a
// task that has not started (a busy pool cannot stall it); the state lives
// as long as the last task holding it.
void ParallelFor(ffi::ThreadPool* pool, int64_t blocks,
                 const std::function<void(int64_t)>& fn) {
  if (blocks <= 0) return;
  const int64_t helpers =
      pool == nullptr ? 0 : std::min<int64_t>(pool->num_threads(),
                                              blocks - 1);
  if (helpers <= 0) {
    for (int64_t b = 0; b < blocks; ++b) fn(b);
    return;
  }
  struct Shared {
    std::atomic<int64_t> next{0}, done{0};
    int64_t blocks = 0;
    const std::function<void(int64_t)>* fn = nullptr;
    std::mutex mu;
    std::condition_variable cv;
  };
  auto shared = std::make_shared<Shared>();
  shared->blocks = blocks;
  shared->fn = &fn;  // used only while blocks remain: before we return
  auto work = [](Shared& s) {
    for (;;) {
      const int64_t b = s.next.fetch_add(1);
      if (b >= s.blocks) return;
      (*s.fn)(b);
      if (s.done.fetch_add(1) + 1 == s.blocks) {
        std::lock_guard<std::mutex> lock(s.mu);
        s.cv.notify_all();
      }
    }
  };
  for (int64_t i = 0; i < helpers; ++i)
    pool->Schedule([shared, work] { work(*shared); });
  work(*shared);
  std::unique_lock<std::mutex> lock(shared->mu);
  shared->cv.wait(lock, [&] { return shared->done.load() == blocks; });
}

// Splits [0, extent) into about `parts` ranges of at least `min_size`.
int64_t Blocks(int64_t extent, int64_t parts, int64_t min_size) {
  return std::max<int64_t>(
      1, std::min<int64_t>(parts, (extent + min_size - 1) / min_size));
}
int64_t BlockBegin(int64_t extent, int64_t blocks, int64_t b) {
  return extent * b / blocks;
}

// acc[m x n] += a[m x k] * b[k x n], row-major with leading dimensions
// lda, ldb and ldacc, blocked so that a block of b stays in cache while the
// rows of a stream past it.
void MatMulAdd(const float* a, int64_t lda, const float* b, int64_t ldb,
               float* acc, int64_t ldacc, int64_t m, int64_t n, int64_t k) {
  constexpr int64_t kKb = 128, kNb = 512;
  for (int64_t j0 = 0; j0 < n; j0 += kNb) {
    const int64_t j1 = std::min(n, j0 + kNb);
    for (int64_t k0 = 0; k0 < k; k0 += kKb) {
      const int64_t k1 = std::min(k, k0 + kKb);
      for (int64_t i = 0; i < m; ++i) {
        float* __restrict row = acc + i * ldacc;
        for (int64_t kk = k0; kk < k1; ++kk) {
          const float av = a[i * lda + kk];
          const float* __restrict brow = b + kk * ldb;
          for (int64_t j = j0; j < j1; ++j) row[j] += av * brow[j];
        }
      }
    }
  }
}

// Block b of the product's output (m x n): rows [lo, hi) where the blocks
// split the rows, else columns [lo, hi); `rows` x `cols` elements.
struct OutBlock {
  int64_t lo, hi, rows, cols;
  OutBlock(bool by_rows, int64_t m, int64_t n, int64_t blocks, int64_t b)
      : lo(BlockBegin(by_rows ? m : n, blocks, b)),
        hi(BlockBegin(by_rows ? m : n, blocks, b + 1)),
        rows(by_rows ? hi - lo : m),
        cols(by_rows ? n : hi - lo) {}
};

// The block's rows of op(A) (by rows) or columns of op(B) (by columns):
// element (i, j) of op(X) sits at i * ld + j, or at j * ld + i transposed.
const float* RowsOf(const float* a, int64_t lda, bool trans, int64_t lo) {
  return a + (trans ? lo : lo * lda);
}
const float* ColsOf(const float* b, int64_t ldb, bool trans, int64_t lo) {
  return b + (trans ? lo * ldb : lo);
}

ffi::Error CpuGemm(ffi::ThreadPool pool, ffi::RemainingArgs args,
                   ffi::RemainingRets rets, ffi::Dictionary attrs) {
  GemmProblem p;
  if (ffi::Error e = DecodeCall(args, rets, attrs, &p);
      e.failure())
    return e;
  // The CPU lowering keeps `out` (the plan it writes is generic's): D is
  // ret 0 aliased to it, never a fresh buffer to zero here.
  if (p.planned.fresh_out)
    return ffi::Error::InvalidArgument(
        "jax_dynoff_gemm: the CPU handler takes no fresh out (plan.fresh_out)");
  const ffi::AnyBuffer d_buf = **rets.get<ffi::AnyBuffer>(0);
  const int64_t m = p.m, n = p.n, k = p.k;
  const double alpha = p.alpha, beta = p.beta;
  auto base = [&](const OperandDesc& op) -> void* {
    return op.arg < 0 ? d_buf.untyped_data()
                      : (*args.get<ffi::AnyBuffer>(op.arg)).untyped_data();
  };
  SlotRef slots[kMaxSlots];
  ResolveCallSlots(p, args, slots);
  const OperandDesc &A = p.op[kA], &B = p.op[kB], &C = p.op[kC], &D = p.op[kD];
  const bool has_c = C.present;
  const Sgemm sgemm = g_sgemm.load(std::memory_order_acquire);
  // Ragged windows (valid extents): masked panels, a masked C and a masked
  // store of D, never an access outside a valid part.
  const bool ragged = A.ragged || B.ragged || D.ragged || (has_c && C.ragged);
  // In place (float32 windows): every extent and leading dim within BLAS's
  // 32-bit ints.
  const bool in_place =
      !ragged && sgemm != nullptr && p.in_dtype == DType::kF32 && m <= INT_MAX &&
      n <= INT_MAX && k <= INT_MAX && A.ld() <= INT_MAX && B.ld() <= INT_MAX;
  const bool panels = !in_place && sgemm != nullptr && m <= INT_MAX &&
                      n <= INT_MAX && k <= INT_MAX;
  // Straight into D: float32 in and out, with no C, or C its own array
  // (copied into D's window first) or D's own window (in-place
  // accumulate), beta != 0: one sgemm per block writes alpha * A @ B +
  // beta * D into D's window, no scratch tile and no epilogue pass.  (D
  // never shares memory with A or B: XLA copies an array passed as both an
  // operand and the aliased `out`.)
  const bool straight_ok =
      in_place && p.epilogue == Epilogue::kNone && p.out_dtype == DType::kF32 && m > 0 && n > 0 && k > 0 &&
      D.ld() <= INT_MAX && (!has_c || (beta != 0.0 && C.ld() <= INT_MAX));
  const bool need_acc = !straight_ok || p.c_mode == CMode::kFromD;
  std::vector<float> pa(in_place ? 0 : static_cast<size_t>(m * k)),
      pb(in_place ? 0 : static_cast<size_t>(k * n)),
      acc(need_acc ? static_cast<size_t>(m * n) : 0);
  const float fa = static_cast<float>(alpha), fb = static_cast<float>(beta);
  // As many blocks as the pool has threads: the caller is one of them or
  // stands in for one.
  const int64_t workers = std::max<int64_t>(1, pool.num_threads());
  // The product in blocks of rows of acc, or of columns where it has few
  // rows; each block one single-threaded sgemm (or the loops).
  const bool by_rows = m >= n;
  const int64_t blocks =
      Blocks(by_rows ? m : n, workers, by_rows ? 32 : 128);
  const int64_t row_blocks = Blocks(m, workers, 16);
  const bool product = m > 0 && n > 0 && k > 0;
  for (int64_t t = 0; t < p.batch; ++t) {
    const int64_t a_off = WindowOffset(p, A, t, slots);
    const int64_t b_off = WindowOffset(p, B, t, slots);
    const int64_t d_off = WindowOffset(p, D, t, slots);
    const int64_t c_off = has_c ? WindowOffset(p, C, t, slots) : 0;
    // Valid rows and columns of each window for this item (the window's
    // extents where it is not ragged).
    const auto valid = [&](const OperandDesc& op, int j) {
      return ValidExtent(op, j, t, slots);
    };
    const int64_t cvr = has_c ? valid(C, 0) : 0, cvc = has_c ? valid(C, 1) : 0;
    const int64_t dvr = valid(D, 0), dvc = valid(D, 1);
    if (straight_ok &&
        (p.c_mode != CMode::kFromD || (c_off == d_off && C.ld() == D.ld()))) {
      const float* a = static_cast<const float*>(base(A)) + a_off;
      const float* b = static_cast<const float*>(base(B)) + b_off;
      float* d = static_cast<float*>(d_buf.untyped_data()) + d_off;
      const float* c = has_c ? static_cast<const float*>(base(C)) + c_off
                             : nullptr;
      const bool copy_c = has_c && p.c_mode == CMode::kOwn;
      const int64_t lda = A.ld(), ldb = B.ld(), ldc = has_c ? C.ld() : 0,
                    ldd = D.ld();
      ParallelFor(&pool, blocks, [&](int64_t blk) {
        const OutBlock o(by_rows, m, n, blocks, blk);
        if (o.rows == 0 || o.cols == 0) return;
        float* out = d + (by_rows ? o.lo * ldd : o.lo);
        if (copy_c) {
          const float* cb = c + (by_rows ? o.lo * ldc : o.lo);
          for (int64_t i = 0; i < o.rows; ++i)
            std::memcpy(out + i * ldd, cb + i * ldc,
                        static_cast<size_t>(o.cols) * 4);
        }
        const float* ab = by_rows ? RowsOf(a, lda, p.trans_a, o.lo) : a;
        const float* bb = by_rows ? b : ColsOf(b, ldb, p.trans_b, o.lo);
        sgemm(kRowMajor, p.trans_a ? kTrans : kNoTrans,
              p.trans_b ? kTrans : kNoTrans, static_cast<int>(o.rows),
              static_cast<int>(o.cols), static_cast<int>(k), fa, ab,
              static_cast<int>(lda), bb, static_cast<int>(ldb),
              has_c ? fb : 0.0f, out, static_cast<int>(ldd));
      });
      continue;
    }
    // Operands of the product: the windows in place, or float32 panels.
    const float *a = pa.data(), *b = pb.data();
    int64_t lda = k, ldb = n;
    bool ta = false, tb = false;
    if (in_place) {
      a = static_cast<const float*>(base(A)) + a_off;
      b = static_cast<const float*>(base(B)) + b_off;
      lda = A.ld();
      ldb = B.ld();
      ta = p.trans_a;
      tb = p.trans_b;
    } else if (product) {
      const int64_t kb = Blocks(k, workers, 16);
      ParallelFor(&pool, row_blocks + kb, [&](int64_t blk) {
        if (blk < row_blocks) {
          const int64_t r0 = BlockBegin(m, row_blocks, blk),
                        r1 = BlockBegin(m, row_blocks, blk + 1);
          if (A.ragged)
            GatherMasked(base(A), p.in_dtype, a_off, A.ld(), p.trans_a, r0,
                         r1, k, valid(A, 0), valid(A, 1), pa.data() + r0 * k);
          else
            GatherRows(base(A), p.in_dtype, a_off, A.ld(), p.trans_a, r0, r1,
                       k, pa.data() + r0 * k);
        } else {
          const int64_t j = blk - row_blocks;
          const int64_t r0 = BlockBegin(k, kb, j), r1 = BlockBegin(k, kb, j + 1);
          if (B.ragged)
            GatherMasked(base(B), p.in_dtype, b_off, B.ld(), p.trans_b, r0,
                         r1, n, valid(B, 0), valid(B, 1), pb.data() + r0 * n);
          else
            GatherRows(base(B), p.in_dtype, b_off, B.ld(), p.trans_b, r0, r1,
                       n, pb.data() + r0 * n);
        }
      });
    }
    const bool blas = product && (in_place || panels);
    ParallelFor(&pool, blocks, [&](int64_t blk) {
      const OutBlock o(by_rows, m, n, blocks, blk);
      float* out = acc.data() + (by_rows ? o.lo * n : o.lo);
      if (!blas)  // the loops accumulate (and k == 0 leaves zeros)
        for (int64_t i = 0; i < o.rows; ++i)
          std::fill(out + i * n, out + i * n + o.cols, 0.0f);
      if (!product || o.rows == 0 || o.cols == 0) return;
      const float* ab = by_rows ? RowsOf(a, lda, ta, o.lo) : a;
      const float* bb = by_rows ? b : ColsOf(b, ldb, tb, o.lo);
      if (blas)  // beta = 0: sgemm writes the block, reading nothing of it
        sgemm(kRowMajor, ta ? kTrans : kNoTrans, tb ? kTrans : kNoTrans,
              static_cast<int>(o.rows), static_cast<int>(o.cols),
              static_cast<int>(k), 1.0f, ab, static_cast<int>(lda), bb,
              static_cast<int>(ldb), 0.0f, out, static_cast<int>(n));
      else
        MatMulAdd(ab, lda, bb, ldb, out, n, o.rows, o.cols, k);
    });
    // alpha * product + beta * C, every row of C read before D is touched
    // (C may be D's own buffer), then D.
    const char* cb = has_c ? static_cast<const char*>(base(C)) : nullptr;
    const int64_t eo = ElementBytes(p.out_dtype);
    ParallelFor(&pool, row_blocks, [&](int64_t blk) {
      std::vector<float> c_row(has_c ? static_cast<size_t>(n) : 0);
      for (int64_t i = BlockBegin(m, row_blocks, blk);
           i < BlockBegin(m, row_blocks, blk + 1); ++i) {
        float* row = acc.data() + i * n;
        if (has_c) {
          // A ragged C: its valid part, zeros elsewhere (never read).
          const int64_t cn = i < cvr ? cvc : 0;
          if (cn > 0)
            ToFloat(cb + (c_off + i * C.ld()) * eo, p.out_dtype, cn,
                    c_row.data());
          std::fill(c_row.begin() + cn, c_row.end(), 0.0f);
          for (int64_t j = 0; j < n; ++j)
            row[j] = fa * row[j] + fb * c_row[j];
        } else {
          for (int64_t j = 0; j < n; ++j) row[j] *= fa;
        }
        if (p.epilogue == Epilogue::kSwiglu)  // D's column j from h's 2j, 2j + 1
          for (int64_t j = 0; j < n / 2; ++j) {
            const float g = row[2 * j], u = row[2 * j + 1];
            row[j] = g / (1.0f + std::exp(-g)) * u;
          }
      }
    });
    char* db = static_cast<char*>(d_buf.untyped_data());
    ParallelFor(&pool, row_blocks, [&](int64_t blk) {
      for (int64_t i = BlockBegin(m, row_blocks, blk);
           i < BlockBegin(m, row_blocks, blk + 1); ++i)
        if (i < dvr)  // a ragged D: its valid part only
          FromFloat(acc.data() + i * n, p.out_dtype, dvc,
                    db + (d_off + i * D.ld()) * eo);
    });
  }
  return ffi::Error::Success();
}

}  // namespace

XLA_FFI_DEFINE_HANDLER_SYMBOL(kCpuGemm, CpuGemm,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::ThreadPool>()
                                  .RemainingArgs()
                                  .RemainingRets()
                                  .Attrs<ffi::Dictionary>());

XLA_FFI_Handler* CpuGemmHandler() { return kCpuGemm; }

std::string SetCpuBlas(const std::string& path) {
  if (g_sgemm.load(std::memory_order_acquire) != nullptr) return "";
  void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) return std::string("dlopen: ") + dlerror();
  // One thread: the handler runs its blocks on XLA's pool (see the top).
  using SetThreads = void (*)(int);
  for (const char* name :
       {"scipy_openblas_set_num_threads", "openblas_set_num_threads"})
    if (void* f = dlsym(lib, name)) {
      reinterpret_cast<SetThreads>(f)(1);
      break;
    }
  for (const char* name : {"scipy_cblas_sgemm", "cblas_sgemm"}) {
    if (void* f = dlsym(lib, name)) {
      g_blas_name = path + ":" + name;
      g_sgemm.store(reinterpret_cast<Sgemm>(f), std::memory_order_release);
      return "";
    }
  }
  return "no cblas_sgemm in " + path;
}

const char* CpuBlas() {
  return g_sgemm.load(std::memory_order_acquire) != nullptr
             ? g_blas_name.c_str() : "";
}

}  // namespace jax_dynoff
