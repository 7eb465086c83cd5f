// cuBLAS GEMMs, the sweep tools' reference columns (built with
// -DWITH_CUBLAS from cublas_flags.sh): row-major D (m x n) = A (m x k)
// B (k x n), float32 accumulation, computed as the column-major
// D^T = B^T A^T; dense, and grouped (cublasGemmGroupedBatchedEx: the
// vendor's grouped GEMM, its problem sizes on the host).  And float32 at
// TF32 (the float32 sweep's reference), in the same transposed form.
#pragma once
#ifdef WITH_CUBLAS
#include <vector>
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

  // `type`: bfloat16, or float32 at TF32 (what XLA runs for a float32 dot
  // at default precision); float32 accumulation either way.
  void operator()(int m, int n, int k, const void* a, const void* b, void* d,
                  cudaDataType_t type = CUDA_R_16BF) const {
    const float one = 1.f, zero = 0.f;
    const cublasComputeType_t compute = type == CUDA_R_32F
                                            ? CUBLAS_COMPUTE_32F_FAST_TF32
                                            : CUBLAS_COMPUTE_32F;
    cublasGemmEx(handle_, CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &one, b, type,
                 n, a, type, k, &zero, d, type, n, compute,
                 CUBLAS_GEMM_DEFAULT);
  }

  // Grouped: item g is D_g (m[g] x n) = A_g (m[g] x k) B_g (k x n), row-major
  // with leading dims k, n, n; a_d, b_d, d_d are device arrays of the
  // items' pointers, m on the host (one group of one problem per item;
  // items with m = 0 are left out by the caller).
  void grouped(const std::vector<int>& m, int n, int k, const void* const* a_d,
               const void* const* b_d, void* const* d_d) const {
    const int g = static_cast<int>(m.size());
    std::vector<cublasOperation_t> op(g, CUBLAS_OP_N);
    std::vector<int> nn(g, n), kk(g, k), ldb(g, n), lda(g, k), one_each(g, 1);
    std::vector<float> one(g, 1.f), zero(g, 0.f);
    // Column-major: D_g^T (n x m[g]) = B_g^T (n x k) A_g^T (k x m[g]).
    cublasGemmGroupedBatchedEx(
        handle_, op.data(), op.data(), nn.data(), m.data(), kk.data(),
        one.data(), b_d, CUDA_R_16BF,
        ldb.data(), a_d, CUDA_R_16BF,
        lda.data(), zero.data(), d_d, CUDA_R_16BF, ldb.data(), g,
        one_each.data(), CUBLAS_COMPUTE_32F);
  }

  // One (m, n, k) product on fixed buffers, in the shape of a CUTLASS
  // adapter (run / initialize) for tiles.h's TimeGemm.
  struct Run {
    const CublasDense& gemm;
    int m, n, k;
    const void* a; const void* b; void* d;
    cudaDataType_t type = CUDA_R_16BF;
    void run(cudaStream_t) { gemm(m, n, k, a, b, d, type); }
    void initialize(int, void*, cudaStream_t) {}
  };

  // The grouped product, in the same shape.
  struct GroupedRun {
    const CublasDense& gemm;
    std::vector<int> m;
    int n, k;
    const void* const* a_d; const void* const* b_d; void* const* d_d;
    void run(cudaStream_t) { gemm.grouped(m, n, k, a_d, b_d, d_d); }
    void initialize(int, void*, cudaStream_t) {}
  };

 private:
  static constexpr size_t kWorkspaceBytes = size_t(32) << 20;
  cublasHandle_t handle_;
  void* workspace_;
};
#endif  // WITH_CUBLAS
