// Float32 matrix products through the BLAS (OpenBLAS).
#include <cblas.h>

#include "common/thread_pool.h"
#include "tensor/cpu/cpu_kernels.h"

namespace tern::cpu {

void Gemm(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, const Tensor& c,
          float alpha, float beta) {
  const int m = static_cast<int>(c.dim(0)), n = static_cast<int>(c.dim(1));
  const int k = static_cast<int>(trans_a ? a.dim(0) : a.dim(1));
  if (m == 0 || n == 0) return;
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
              trans_b ? CblasTrans : CblasNoTrans, m, n, k, alpha, a.f32(),
              static_cast<int>(a.dim(1)), b.f32(), static_cast<int>(b.dim(1)), beta, c.f32(), n);
}

void BatchedGemm(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, const Tensor& c,
                 float alpha, float beta) {
  const int64_t batch = a.dim(0);
  const int m = static_cast<int>(c.dim(1)), n = static_cast<int>(c.dim(2));
  const int k = static_cast<int>(trans_a ? a.dim(1) : a.dim(2));
  const int lda = static_cast<int>(a.dim(2)), ldb = static_cast<int>(b.dim(2));
  const int64_t sa = a.dim(1) * a.dim(2), sb = b.dim(1) * b.dim(2), sc = c.dim(1) * c.dim(2);
  const float* pa = a.f32();
  const float* pb = b.f32();
  float* pc = c.f32();
  auto one = [&](int64_t i) {
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
                trans_b ? CblasTrans : CblasNoTrans, m, n, k, alpha, pa + i * sa, lda, pb + i * sb,
                ldb, beta, pc + i * sc, n);
  };
  // Small per-batch products (attention heads) run better one per thread with a single-threaded
  // BLAS call than each spread over all threads.
  const int64_t flops = 2ll * m * n * k;
  if (flops < (1 << 22) && batch > 1 && NumThreads() > 1) {
    int saved = openblas_get_num_threads();
    openblas_set_num_threads(1);
    ParallelFor(batch, 1, [&](int64_t b0, int64_t b1) {
      for (int64_t i = b0; i < b1; ++i) one(i);
    });
    openblas_set_num_threads(saved);
  } else {
    for (int64_t i = 0; i < batch; ++i) one(i);
  }
}

}  // namespace tern::cpu
