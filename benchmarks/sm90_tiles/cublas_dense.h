// cuBLAS's dense bfloat16 GEMM, the sweep tools' reference column (built
// with -DWITH_CUBLAS from cublas_flags.sh): row-major D (m x n) = A (m x k)
// B (k x n), float32 accumulation, computed as the column-major
// D^T = B^T A^T.
#pragma once
#ifdef WITH_CUBLAS
#include <cublas_v2.h>

class CublasDense {
 public:
  explicit CublasDense(cudaStream_t stream) {
    cublasCreate(&handle_);
    cublasSetStream(handle_, stream);
    cudaMalloc(&workspace_, kWorkspaceBytes);
    cublasSetWorkspace(handle_, workspace_, kWorkspaceBytes);
  }
  CublasDense(const CublasDense&) = delete;
  CublasDense& operator=(const CublasDense&) = delete;

  void operator()(int m, int n, int k, const void* a, const void* b,
                  void* d) const {
    const float one = 1.f, zero = 0.f;
    cublasGemmEx(handle_, CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &one, b,
                 CUDA_R_16BF, n, a, CUDA_R_16BF, k, &zero, d, CUDA_R_16BF, n,
                 CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  }

  // One (m, n, k) product on fixed buffers, in the shape of a CUTLASS
  // adapter (run / initialize) for tiles.h's TimeGemm.
  struct Run {
    const CublasDense& gemm;
    int m, n, k;
    const void* a; const void* b; void* d;
    void run(cudaStream_t) { gemm(m, n, k, a, b, d); }
    void initialize(int, void*, cudaStream_t) {}
  };

 private:
  static constexpr size_t kWorkspaceBytes = size_t(32) << 20;
  cublasHandle_t handle_;
  void* workspace_;
};
#endif  // WITH_CUBLAS
