// Deterministic bf16 test data in [-1, 1) for the sweep tools and the
// probes (hash of the index, so no host copy and no zeros to flatter the
// timing).
#pragma once
#include <cuda_bf16.h>

#include <cstddef>

static __global__ void Fill(__nv_bfloat16* x, size_t n, unsigned seed) {
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += gridDim.x * blockDim.x) {
    unsigned h = (unsigned)i * 2654435761u ^ seed;
    h ^= h >> 13; h *= 0x5bd1e995; h ^= h >> 15;
    x[i] = __float2bfloat16(((h & 0xffff) / 32768.0f) - 1.0f);
  }
}
