// The per-item device arrays of a grouped launch, as the library's grouped
// pointer kernel writes them (plan.h GroupedItemOf): shapes (m, n, k per
// item), then the A, B, C, D pointers, then the A, B, C, D leading
// dimensions.  The small-group probes (benchmarks/small_groups_fwd,
// benchmarks/small_k_grad) write them from the host once per case and
// launch the library's kernels on them.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "cuda_check.h"
#include "kernels/launch.h"

struct Items {
  int32_t* shapes = nullptr;
  const void** ptrs = nullptr;
  int64_t* strides = nullptr;
};

// Copies the host arrays (3, 4 and 4 entries per item) to the device.
inline Items UploadItems(const std::vector<int32_t>& shapes,
                         const std::vector<const void*>& ptrs,
                         const std::vector<int64_t>& strides) {
  Items it;
  CK(cudaMalloc(&it.shapes, shapes.size() * 4));
  CK(cudaMalloc(&it.ptrs, ptrs.size() * 8));
  CK(cudaMalloc(&it.strides, strides.size() * 8));
  CK(cudaMemcpy(it.shapes, shapes.data(), shapes.size() * 4,
                cudaMemcpyHostToDevice));
  CK(cudaMemcpy(it.ptrs, ptrs.data(), ptrs.size() * 8,
                cudaMemcpyHostToDevice));
  CK(cudaMemcpy(it.strides, strides.data(), strides.size() * 8,
                cudaMemcpyHostToDevice));
  return it;
}

inline void FreeItems(const Items& it) {
  CK(cudaFree(it.shapes));
  CK(cudaFree(const_cast<void**>(it.ptrs)));
  CK(cudaFree(it.strides));
}

// A grouped launch over `groups` items on `it`, m and n the bounds of every
// item's (the grid's sizes).
inline jax_dynoff::kernels::GroupedLaunch LaunchOn(const Items& it,
                                                   int groups, int m, int n,
                                                   cudaStream_t stream) {
  jax_dynoff::kernels::GroupedLaunch l;
  l.stream = stream;
  l.groups = groups;
  l.m = m;
  l.n = n;
  l.shapes = it.shapes;
  l.ptr_a = it.ptrs;
  l.ptr_b = it.ptrs + groups;
  l.ptr_c = it.ptrs + 2 * groups;
  l.ptr_d = const_cast<void* const*>(it.ptrs + 3 * groups);
  l.stride_a = it.strides;
  l.stride_b = it.strides + groups;
  l.stride_c = it.strides + 2 * groups;
  l.stride_d = it.strides + 3 * groups;
  return l;
}
