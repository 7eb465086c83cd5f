// The staging kernel of the SM90 TF32 path (sm90_tf32.h): one operand's
// windows copied K-major into the workspace, split into TF32 parts for
// precision=HIGHEST.  Reads at any alignment (element by element), writes
// whole 128-byte rows.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>

#include "kernels/sm90_tf32.h"

namespace jax_dynoff {
namespace kernels {
namespace {

// A block stages a tile of kRows rows x kTile k values: 32 x 8 threads,
// 16 elements each, all loads issued before the first store.  (A 32 x 32
// tile per block, 4 elements a thread, had too few bytes in flight to
// stream at HBM speed: ~2 TB/s on an H200.)
constexpr int kTile = 32;
constexpr int kRows = 128;
constexpr int kBlockRows = 8;
constexpr int kPerThread = kRows / kBlockRows;  // 16
constexpr int64_t kMaxGridY = 65535, kMaxGridZ = 65535;

// x rounded to the nearest TF32 value (ties away from zero, as
// cvt.rna.tf32.f32), as a float whose low 13 mantissa bits are zero;
// truncated instead where rounding would overflow to infinity.
__device__ __forceinline__ float RoundTf32(float x) {
  const uint32_t u = __float_as_uint(x);
  if ((u & 0x7f800000u) == 0x7f800000u) return x;  // inf, nan
  const uint32_t r = (u + 0x1000u) & 0xffffe000u;
  if ((r & 0x7f800000u) == 0x7f800000u) return __uint_as_float(u & 0xffffe000u);
  return __uint_as_float(r);
}

__global__ void __launch_bounds__(kTile * kBlockRows)
    StageKernel(const __grid_constant__ Tf32StageParams s, int64_t t0) {
  __shared__ float tile[kRows][kTile + 1];  // [row][k]
  const int64_t t = t0 + blockIdx.z;
  const int64_t p0 = int64_t{blockIdx.x} * kTile;
  const float* src = static_cast<const float*>(s.src[t]);
  char* dst_item = s.dst + t * s.item_bytes;
  if (blockIdx.x == 0 && blockIdx.y == 0 && threadIdx.x == 0 &&
      threadIdx.y == 0)
    s.dst_ptrs[t] = dst_item;
  const int x = threadIdx.x, y = threadIdx.y;
  // Load: consecutive threads along the operand's contiguous dim (k for a
  // K-major source, rows for an MN-major one), so the reads coalesce.
  const bool k_contig = s.k_stride == 1;
  float* dst = reinterpret_cast<float*>(dst_item);
  // Row tiles stride by gridDim.y (at most 65535 blocks).
  for (int64_t r0 = int64_t{blockIdx.y} * kRows; r0 < s.rows;
       r0 += int64_t{gridDim.y} * kRows) {
    __syncthreads();  // the previous row tile's reads of `tile` are done
    float v[kPerThread];
#pragma unroll
    for (int j = 0; j < kPerThread; ++j) {
      // K-major: row y + 8j, k x.  MN-major: row 32 (j / 4) + x,
      // k y + 8 (j % 4).
      const int row = k_contig ? y + kBlockRows * j : kTile * (j / 4) + x;
      const int kk = k_contig ? x : y + kBlockRows * (j % 4);
      const int64_t r = r0 + row, p = p0 + kk;
      v[j] = r < s.rows && p < s.k ? src[r * s.row_stride + p * s.k_stride]
                                   : 0.f;
    }
#pragma unroll
    for (int j = 0; j < kPerThread; ++j) {
      const int row = k_contig ? y + kBlockRows * j : kTile * (j / 4) + x;
      const int kk = k_contig ? x : y + kBlockRows * (j % 4);
      tile[row][kk] = v[j];
    }
    __syncthreads();
    // Store: row-major (rows x ld), consecutive threads along k.
#pragma unroll 4
    for (int j = 0; j < kPerThread; ++j) {
      const int row = y + kBlockRows * j;
      const int64_t r = r0 + row, p = p0 + x;
      if (r >= s.rows || p >= s.k) continue;
      const float val = tile[row][x];
      float* out = dst + r * s.ld + p;
      if (s.parts == 1) {
        out[0] = val;
      } else {
        const float hi = RoundTf32(val);
        const float lo = RoundTf32(val - hi);
        for (int part = 0; part < s.parts; ++part)
          out[part * s.k] = part == s.lo_part ? lo : hi;
      }
      // The padding up to ld (the GEMM's K), zeros: they add nothing.
      if (p == s.k - 1)
        for (int64_t c = s.parts * s.k; c < s.ld; ++c) dst[r * s.ld + c] = 0.f;
    }
  }
}

}  // namespace

cudaError_t LaunchTf32Stage(const Tf32StageParams& s, cudaStream_t stream) {
  if (s.rows <= 0 || s.k <= 0 || s.batch <= 0) return cudaGetLastError();
  const dim3 block(kTile, kBlockRows);
  for (int64_t t0 = 0; t0 < s.batch; t0 += kMaxGridZ) {
    const dim3 grid(static_cast<unsigned>((s.k + kTile - 1) / kTile),
                    static_cast<unsigned>(
                        std::min<int64_t>(kMaxGridY, (s.rows + kRows - 1) / kRows)),
                    static_cast<unsigned>(std::min(kMaxGridZ, s.batch - t0)));
    StageKernel<<<grid, block, 0, stream>>>(s, t0);
  }
  return cudaGetLastError();
}

}  // namespace kernels
}  // namespace jax_dynoff
