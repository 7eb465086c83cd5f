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
#include <dlfcn.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstring>
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

void Store(void* base, DType t, int64_t i, float v) {
  switch (t) {
    case DType::kF32: static_cast<float*>(base)[i] = v; break;
    case DType::kF16: static_cast<uint16_t*>(base)[i] = FloatToF16(v); break;
    case DType::kBF16: static_cast<uint16_t*>(base)[i] = FloatToBF16(v); break;
  }
}

// Gathers op(window) as a dense rows x cols float panel.  The window at
// element offset `off` is stored row-major with leading dimension `ld`;
// `trans` reads it transposed.
void Gather(const void* base, DType t, int64_t off, int64_t ld, bool trans,
            int64_t rows, int64_t cols, float* panel) {
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j)
      panel[i * cols + j] =
          Load(base, t, off + (trans ? j * ld + i : i * ld + j));
}

// acc[m x n] += a[m x k] * b[k x n], blocked so that a block of b stays in
// cache while the rows of a stream past it.
void MatMulAdd(const float* a, const float* b, float* acc, int64_t m,
               int64_t n, int64_t k) {
  constexpr int64_t kKb = 128, kNb = 512;
  for (int64_t j0 = 0; j0 < n; j0 += kNb) {
    const int64_t j1 = std::min(n, j0 + kNb);
    for (int64_t k0 = 0; k0 < k; k0 += kKb) {
      const int64_t k1 = std::min(k, k0 + kKb);
      for (int64_t i = 0; i < m; ++i) {
        float* __restrict row = acc + i * n;
        for (int64_t kk = k0; kk < k1; ++kk) {
          const float av = a[i * k + kk];
          const float* __restrict brow = b + kk * n;
          for (int64_t j = j0; j < j1; ++j) row[j] += av * brow[j];
        }
      }
    }
  }
}

ffi::Error CpuGemm(ffi::RemainingArgs args, ffi::RemainingRets rets,
                   ffi::Span<const int64_t> desc, double alpha, double beta) {
  GemmProblem p;
  if (ffi::Error e = DecodeCall(args, rets, desc, alpha, beta, &p);
      e.failure())
    return e;
  const ffi::AnyBuffer d_buf = **rets.get<ffi::AnyBuffer>(0);
  const int64_t m = p.m, n = p.n, k = p.k;
  auto base = [&](const OperandDesc& op) -> void* {
    return op.arg < 0 ? d_buf.untyped_data()
                      : (*args.get<ffi::AnyBuffer>(op.arg)).untyped_data();
  };
  SlotRef slots[kMaxSlots];
  ResolveCallSlots(p, args, slots);
  const OperandDesc &A = p.op[kA], &B = p.op[kB], &C = p.op[kC], &D = p.op[kD];
  const bool has_c = C.present;
  const Sgemm sgemm = g_sgemm.load(std::memory_order_acquire);
  // In place (float32 windows): every extent and leading dim within BLAS's
  // 32-bit ints.
  const bool in_place =
      sgemm != nullptr && p.in_dtype == DType::kF32 && m <= INT_MAX &&
      n <= INT_MAX && k <= INT_MAX && A.ld() <= INT_MAX && B.ld() <= INT_MAX;
  const bool panels = !in_place && sgemm != nullptr && m <= INT_MAX &&
                      n <= INT_MAX && k <= INT_MAX;
  std::vector<float> pa(in_place ? 0 : static_cast<size_t>(m * k)),
      pb(in_place ? 0 : static_cast<size_t>(k * n)),
      acc(static_cast<size_t>(m * n));
  const float fa = static_cast<float>(alpha), fb = static_cast<float>(beta);
  for (int64_t t = 0; t < p.batch; ++t) {
    const int64_t a_off = WindowOffset(p, A, t, slots);
    const int64_t b_off = WindowOffset(p, B, t, slots);
    const int64_t d_off = WindowOffset(p, D, t, slots);
    const bool product = m > 0 && n > 0 && k > 0;
    if (in_place) {
      std::fill(acc.begin(), acc.end(), 0.0f);
      if (product)
        sgemm(kRowMajor, p.trans_a ? kTrans : kNoTrans,
              p.trans_b ? kTrans : kNoTrans, static_cast<int>(m),
              static_cast<int>(n), static_cast<int>(k), 1.0f,
              static_cast<const float*>(base(A)) + a_off,
              static_cast<int>(A.ld()),
              static_cast<const float*>(base(B)) + b_off,
              static_cast<int>(B.ld()), 0.0f, acc.data(),
              static_cast<int>(n));
    } else {
      Gather(base(A), p.in_dtype, a_off, A.ld(), p.trans_a, m, k, pa.data());
      Gather(base(B), p.in_dtype, b_off, B.ld(), p.trans_b, k, n, pb.data());
      std::fill(acc.begin(), acc.end(), 0.0f);
      if (panels && product)
        sgemm(kRowMajor, kNoTrans, kNoTrans, static_cast<int>(m),
              static_cast<int>(n), static_cast<int>(k), 1.0f, pa.data(),
              static_cast<int>(k), pb.data(), static_cast<int>(n), 0.0f,
              acc.data(), static_cast<int>(n));
      else
        MatMulAdd(pa.data(), pb.data(), acc.data(), m, n, k);
    }
    if (has_c) {
      // Read all of C before D is touched: C may be D's own buffer.
      const int64_t c_off = WindowOffset(p, C, t, slots);
      const void* cb = base(C);
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j)
          acc[i * n + j] = fa * acc[i * n + j] +
                           fb * Load(cb, p.out_dtype, c_off + i * C.ld() + j);
    } else {
      for (float& v : acc) v *= fa;
    }
    void* db = d_buf.untyped_data();
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j)
        Store(db, p.out_dtype, d_off + i * D.ld() + j, acc[i * n + j]);
  }
  return ffi::Error::Success();
}

}  // namespace

XLA_FFI_DEFINE_HANDLER_SYMBOL(kCpuGemm, CpuGemm,
                              ffi::Ffi::Bind()
                                  .RemainingArgs()
                                  .RemainingRets()
                                  .Attr<ffi::Span<const int64_t>>("desc")
                                  .Attr<double>("alpha")
                                  .Attr<double>("beta"));

XLA_FFI_Handler* CpuGemmHandler() { return kCpuGemm; }

std::string SetCpuBlas(const std::string& path) {
  if (g_sgemm.load(std::memory_order_acquire) != nullptr) return "";
  void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) return std::string("dlopen: ") + dlerror();
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
