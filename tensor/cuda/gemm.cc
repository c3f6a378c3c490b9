// Float32 matrix products through cuBLAS. cuBLAS is column-major; a row-major matrix read as
// column-major is its transpose, so row-major c = op(a) @ op(b) is computed as the column-major
// c^T = op(b)^T @ op(a)^T: the operands swap places and keep their own transpose flags.
//
// With bf16 or fp16 inputs (mixed precision) float32 operands are converted into scratch tensors
// (from the device pool: no cudaMalloc after the first step), operands already of that type
// (RoundOperand's) are used as they are, and cublasGemmEx multiplies them on the tensor cores,
// accumulating and writing float32.
#include <glog/logging.h>

#include <limits>

#include "tensor/cuda/cuda_common.h"
#include "tensor/cuda/cuda_kernels.h"

namespace tern::cuda {
namespace {

int ToInt(int64_t v, const char* what) {
  CHECK(v >= 0 && v <= std::numeric_limits<int>::max())
      << "Gemm " << what << " " << v << " does not fit cuBLAS's int";
  return static_cast<int>(v);
}

cublasOperation_t Op(bool trans) { return trans ? CUBLAS_OP_T : CUBLAS_OP_N; }

// c = beta * c for an empty inner dimension; beta == 0 gives exact zeros, as the BLAS does.
void ScaleOutput(const Tensor& c, float beta) {
  if (beta == 0.f) {
    Fill(c, 0.f);
  } else if (beta != 1.f) {
    Add(c, c, c, beta, 0.f);
  }
}

cudaDataType_t CudaType(DType inputs) {
  return inputs == DType::kBFloat16 ? CUDA_R_16BF : CUDA_R_16F;
}

// x rounded to `inputs` in a scratch tensor of the device pool, or x itself when RoundOperand
// already made it of that type.
Tensor Converted(const Tensor& x, DType inputs) {
  if (x.dtype() == inputs) return x;
  Tensor out = Tensor::Empty(x.shape(), inputs, Device::kCuda);
  ConvertFloat(x, out);
  return out;
}

}  // namespace

// a (m, k) or (k, m); b (k, n) or (n, k); c (m, n).
void Gemm(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, const Tensor& c,
          float alpha, float beta, DType inputs) {
  const int m = ToInt(c.dim(0), "m"), n = ToInt(c.dim(1), "n");
  const int k = ToInt(trans_a ? a.dim(0) : a.dim(1), "k");
  if (m == 0 || n == 0) return;
  if (k == 0) {  // c = beta * c, as the BLAS does (cuBLAS refuses the zero leading dims)
    ScaleOutput(c, beta);
    return;
  }
  const int lda = ToInt(a.dim(1), "lda"), ldb = ToInt(b.dim(1), "ldb");
  if (inputs != DType::kFloat32) {
    const Tensor a16 = Converted(a, inputs), b16 = Converted(b, inputs);
    const cudaDataType_t t = CudaType(inputs);
    TERN_CUBLAS_CHECK(cublasGemmEx(CublasHandle(), Op(trans_b), Op(trans_a), n, m, k, &alpha,
                                   b16.raw(), t, ldb, a16.raw(), t, lda, &beta, c.f32(), CUDA_R_32F,
                                   n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    return;
  }
  TERN_CUBLAS_CHECK(cublasSgemm(CublasHandle(), Op(trans_b), Op(trans_a), n, m, k, &alpha, b.f32(),
                                ldb, a.f32(), lda, &beta, c.f32(), n));
}

// a (batch, m|k, k|m); b (batch, k|n, n|k); c (batch, m, n).
void BatchedGemm(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, const Tensor& c,
                 float alpha, float beta, DType inputs) {
  const int batch = ToInt(a.dim(0), "batch");
  const int m = ToInt(c.dim(1), "m"), n = ToInt(c.dim(2), "n");
  const int k = ToInt(trans_a ? a.dim(1) : a.dim(2), "k");
  if (batch == 0 || m == 0 || n == 0) return;
  if (k == 0) {
    ScaleOutput(c, beta);
    return;
  }
  const int lda = ToInt(a.dim(2), "lda"), ldb = ToInt(b.dim(2), "ldb");
  const int64_t sa = a.dim(1) * a.dim(2), sb = b.dim(1) * b.dim(2), sc = c.dim(1) * c.dim(2);
  if (inputs != DType::kFloat32) {
    const Tensor a16 = Converted(a, inputs), b16 = Converted(b, inputs);
    const cudaDataType_t t = CudaType(inputs);
    TERN_CUBLAS_CHECK(cublasGemmStridedBatchedEx(CublasHandle(), Op(trans_b), Op(trans_a), n, m, k,
                                                 &alpha, b16.raw(), t, ldb, sb, a16.raw(), t, lda,
                                                 sa, &beta, c.f32(), CUDA_R_32F, n, sc, batch,
                                                 CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    return;
  }
  TERN_CUBLAS_CHECK(cublasSgemmStridedBatched(CublasHandle(), Op(trans_b), Op(trans_a), n, m, k,
                                              &alpha, b.f32(), ldb, sb, a.f32(), lda, sa, &beta,
                                              c.f32(), n, sc, batch));
}

}  // namespace tern::cuda
