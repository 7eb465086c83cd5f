// CPU handler: the full jax_dynoff.gemm semantics on the host.
//
// It is what CI (no GPU) runs under every test, so it favours being obviously
// right over being fast: each window is first gathered into a float32 panel
// in op() orientation, the product is a cache-blocked i-k-j loop whose inner
// loop the compiler vectorises, and the whole result (C included) is formed
// in a scratch tile before D is written, which makes C and D windows of one
// buffer correct however they overlap.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "ffi_problem.h"
#include "handlers.h"
#include "xla/ffi/api/ffi.h"

namespace jax_dynoff {
namespace {

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
  const void* offsets = p.num_slots > 0
      ? (*args.get<ffi::AnyBuffer>(p.offsets_arg)).untyped_data() : nullptr;
  const bool offsets64 =
      p.num_slots > 0 &&
      (*args.get<ffi::AnyBuffer>(p.offsets_arg)).element_type() ==
          ffi::DataType::S64;
  auto load_start = [&](int64_t i) { return LoadOffset(offsets, offsets64, i); };
  const OperandDesc &A = p.op[kA], &B = p.op[kB], &C = p.op[kC], &D = p.op[kD];
  const bool has_c = C.present;
  std::vector<float> pa(static_cast<size_t>(m * k)), pb(static_cast<size_t>(k * n)),
      acc(static_cast<size_t>(m * n));
  const float fa = static_cast<float>(alpha), fb = static_cast<float>(beta);
  for (int64_t t = 0; t < p.batch; ++t) {
    const int64_t a_off = WindowOffset(p, A, t, load_start);
    const int64_t b_off = WindowOffset(p, B, t, load_start);
    const int64_t d_off = WindowOffset(p, D, t, load_start);
    Gather(base(A), p.in_dtype, a_off, A.ld(), p.trans_a, m, k, pa.data());
    Gather(base(B), p.in_dtype, b_off, B.ld(), p.trans_b, k, n, pb.data());
    std::fill(acc.begin(), acc.end(), 0.0f);
    MatMulAdd(pa.data(), pb.data(), acc.data(), m, n, k);
    if (has_c) {
      // Read all of C before D is touched: C may be D's own buffer.
      const int64_t c_off = WindowOffset(p, C, t, load_start);
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

}  // namespace jax_dynoff
