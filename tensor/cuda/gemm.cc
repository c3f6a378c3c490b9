// Float32 matrix products through cuBLAS. cuBLAS is column-major; a row-major matrix read as
// column-major is its transpose, so row-major c = op(a) @ op(b) is computed as the column-major
// c^T = op(b)^T @ op(a)^T: the operands swap places and keep their own transpose flags.
//
// With bf16 or fp16 inputs (mixed precision) float32 operands are converted into scratch tensors
// (from the device pool: no cudaMalloc after the first step), operands already of that type
// (RoundOperand's) are used as they are, and cublasGemmEx multiplies them on the tensor cores,
// accumulating and writing float32.
//
// GemmBias goes through cuBLASLt with the bias in its epilogue: one plan per product shape (and
// pointer alignments) and thread, the heuristic asked once, so a step's products only set the
// bias pointer and run. A residual is cuBLASLt's C operand (beta 1), the output its D; an
// activation is the RELU_BIAS or GELU_BIAS epilogue (GELU's tanh form, as Unary's).
#include <cublasLt.h>
#include <glog/logging.h>

#include <array>
#include <cstdint>
#include <limits>
#include <map>
#include <memory>

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

// cuBLASLt, for products with the bias in their epilogue. One handle and one workspace (from the
// device pool) per thread, made at the first use and kept.
constexpr size_t kLtWorkspaceBytes = size_t{32} << 20;

cublasLtHandle_t LtHandle() {
  thread_local cublasLtHandle_t handle = [] {
    cublasLtHandle_t h = nullptr;
    TERN_CUBLAS_CHECK(cublasLtCreate(&h));
    return h;
  }();
  return handle;
}

void* LtWorkspace() {
  thread_local Tensor workspace =
      Tensor::Empty({static_cast<int64_t>(kLtWorkspaceBytes)}, DType::kInt8, Device::kCuda);
  return workspace.raw();
}

// The largest power of two up to 256 that divides the address: what cuBLASLt may assume of it.
uint32_t AlignmentOf(const void* p) {
  uint32_t a = 256;
  while (a > 1 && reinterpret_cast<uintptr_t>(p) % a != 0) a /= 2;
  return a;
}

// One product shape's cuBLASLt plan: its descriptors and the heuristic's algorithm (usable false
// when cuBLASLt had none), made at the shape's first product and kept for the thread's life, so a
// training step's products do not query the heuristic again.
struct LtPlan {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo = {};
  bool usable = false;
  LtPlan() = default;
  LtPlan(const LtPlan&) = delete;
  LtPlan& operator=(const LtPlan&) = delete;
  ~LtPlan() {
    for (cublasLtMatrixLayout_t l : {a, b, c})
      if (l != nullptr) cublasLtMatrixLayoutDestroy(l);
    if (op != nullptr) cublasLtMatmulDescDestroy(op);
  }
};

// What a plan depends on: shapes, transposes, the operands' type, every pointer's alignment (the
// heuristic's algorithms may assume it; the bias pointer's and the residual's included, 0 for
// none), the activation and the batch (1: a plain product).
using LtKey = std::array<int64_t, 15>;

cublasLtEpilogue_t Epilogue(int activation) {
  switch (activation) {
    case kRelu:
      return CUBLASLT_EPILOGUE_RELU_BIAS;
    case kGelu:
      return CUBLASLT_EPILOGUE_GELU_BIAS;
    default:
      return CUBLASLT_EPILOGUE_BIAS;
  }
}

// Makes the plan for c = op(a) op(b) + bias with the operands swapped as Gemm swaps them
// (column-major c^T = op(b)^T op(a)^T, whose rows are c's columns: the bias runs along them).
// A batch > 1 multiplies the one a by each of b's matrices (a's batch stride 0), bias and c
// strided by theirs.
void MakeLtPlan(LtPlan& plan, bool trans_a, bool trans_b, cudaDataType_t t, int m, int n, int k,
                int64_t lda, int64_t ldb, const void* a, const void* b, const void* bias,
                const void* c, const void* residual, int activation, int batch) {
  auto ok = [](cublasStatus_t s) { return s == CUBLAS_STATUS_SUCCESS; };
  const cublasOperation_t op_first = Op(trans_b), op_second = Op(trans_a);
  const cublasLtEpilogue_t epilogue = Epilogue(activation);
  if (!ok(cublasLtMatmulDescCreate(&plan.op, CUBLAS_COMPUTE_32F, CUDA_R_32F)) ||
      !ok(cublasLtMatmulDescSetAttribute(plan.op, CUBLASLT_MATMUL_DESC_TRANSA, &op_first,
                                         sizeof(op_first))) ||
      !ok(cublasLtMatmulDescSetAttribute(plan.op, CUBLASLT_MATMUL_DESC_TRANSB, &op_second,
                                         sizeof(op_second))) ||
      !ok(cublasLtMatmulDescSetAttribute(plan.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue,
                                         sizeof(epilogue))) ||
      !ok(cublasLtMatmulDescSetAttribute(plan.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias,
                                         sizeof(bias)))) {
    return;
  }
  // Column-major shapes as stored: the first operand is b (n x k, or k x n transposed), the
  // second a (k x m, or m x k transposed), the output c^T (n x m).
  if (!ok(cublasLtMatrixLayoutCreate(&plan.b, t, trans_b ? k : n, trans_b ? n : k, ldb)) ||
      !ok(cublasLtMatrixLayoutCreate(&plan.a, t, trans_a ? m : k, trans_a ? k : m, lda)) ||
      !ok(cublasLtMatrixLayoutCreate(&plan.c, CUDA_R_32F, n, m, n))) {
    return;
  }
  if (batch > 1) {
    const int32_t count = batch;
    const int64_t stride_b = int64_t{k} * n, stride_a = 0, stride_c = int64_t{m} * n,
                  stride_bias = n;
    auto batched = [&](cublasLtMatrixLayout_t layout, int64_t stride) {
      return ok(cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count,
                                                 sizeof(count))) &&
             ok(cublasLtMatrixLayoutSetAttribute(
                 layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof(stride)));
    };
    if (!batched(plan.b, stride_b) || !batched(plan.a, stride_a) || !batched(plan.c, stride_c) ||
        !ok(cublasLtMatmulDescSetAttribute(plan.op, CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE,
                                           &stride_bias, sizeof(stride_bias)))) {
      return;
    }
  }
  cublasLtMatmulPreference_t preference = nullptr;
  if (!ok(cublasLtMatmulPreferenceCreate(&preference))) return;
  const uint64_t workspace = kLtWorkspaceBytes;
  const uint32_t align_first = AlignmentOf(b), align_second = AlignmentOf(a),
                 align_c = AlignmentOf(residual != nullptr ? residual : c),
                 align_d = AlignmentOf(c);
  cublasLtMatmulHeuristicResult_t heuristic = {};
  int found = 0;
  plan.usable =
      ok(cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                              &workspace, sizeof(workspace))) &&
      ok(cublasLtMatmulPreferenceSetAttribute(preference,
                                              CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
                                              &align_first, sizeof(align_first))) &&
      ok(cublasLtMatmulPreferenceSetAttribute(preference,
                                              CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                                              &align_second, sizeof(align_second))) &&
      ok(cublasLtMatmulPreferenceSetAttribute(
          preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &align_c, sizeof(align_c))) &&
      ok(cublasLtMatmulPreferenceSetAttribute(
          preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &align_d, sizeof(align_d))) &&
      ok(cublasLtMatmulAlgoGetHeuristic(LtHandle(), plan.op, plan.b, plan.a, plan.c, plan.c,
                                        preference, 1, &heuristic, &found)) &&
      found > 0;
  cublasLtMatmulPreferenceDestroy(preference);
  if (plan.usable) plan.algo = heuristic.algo;
}

// c = op(a) op(b) + bias (+ residual), or its activation, through cuBLASLt's bias epilogue.
// False, having done nothing, when cuBLASLt offers no algorithm for it.
bool LtGemmBias(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, const Tensor& bias,
                const Tensor& c, const Tensor& residual, int activation, DType inputs, int m, int n,
                int k) {
  const Tensor a_in = inputs == DType::kFloat32 ? a : Converted(a, inputs);
  const Tensor b_in = inputs == DType::kFloat32 ? b : Converted(b, inputs);
  const int64_t lda = a.dim(1), ldb = b.dim(-1);
  const int batch = b.rank() == 3 ? ToInt(b.dim(0), "batch") : 1;
  const LtKey key = {m,
                     n,
                     k,
                     trans_a,
                     trans_b,
                     static_cast<int64_t>(inputs),
                     lda,
                     ldb,
                     AlignmentOf(a_in.raw()),
                     AlignmentOf(b_in.raw()),
                     AlignmentOf(bias.raw()),
                     AlignmentOf(c.raw()),
                     residual.defined() ? AlignmentOf(residual.raw()) : 0,
                     activation,
                     batch};
  thread_local std::map<LtKey, std::unique_ptr<LtPlan>> plans;
  std::unique_ptr<LtPlan>& plan = plans[key];
  if (plan == nullptr) {
    plan = std::make_unique<LtPlan>();
    MakeLtPlan(*plan, trans_a, trans_b, inputs == DType::kFloat32 ? CUDA_R_32F : CudaType(inputs),
               m, n, k, lda, ldb, a_in.raw(), b_in.raw(), bias.raw(), c.raw(),
               residual.defined() ? residual.raw() : nullptr, activation, batch);
  }
  if (!plan->usable) return false;
  const void* bias_ptr = bias.raw();
  TERN_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                                   &bias_ptr, sizeof(bias_ptr)));
  const float alpha = 1.f, beta = residual.defined() ? 1.f : 0.f;
  const void* c_in = residual.defined() ? residual.raw() : c.raw();
  TERN_CUBLAS_CHECK(cublasLtMatmul(LtHandle(), plan->op, &alpha, b_in.raw(), plan->b, a_in.raw(),
                                   plan->a, &beta, c_in, plan->c, c.raw(), plan->c, &plan->algo,
                                   LtWorkspace(), kLtWorkspaceBytes, CurrentStream()));
  return true;
}

}  // namespace

void GemmBias(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, const Tensor& bias,
              const Tensor& c, DType inputs, const Tensor& residual, int activation) {
  const int m = ToInt(c.dim(-2), "m"), n = ToInt(c.dim(-1), "n");
  const int k = ToInt(trans_a ? a.dim(0) : a.dim(1), "k");
  if (m > 0 && n > 0 && k > 0 && b.dim(0) > 0 &&
      LtGemmBias(a, trans_a, b, trans_b, bias, c, residual, activation, inputs, m, n, k)) {
    return;
  }
  if (b.rank() == 3) {  // a batch cuBLASLt has no algorithm for: product by product
    for (int64_t i = 0; i < b.dim(0); ++i) {
      GemmBias(a, trans_a, b.Slice(i, i + 1).Reshape({b.dim(1), b.dim(2)}), trans_b,
               bias.Slice(i, i + 1).Reshape({bias.dim(1)}),
               c.Slice(i, i + 1).Reshape({c.dim(1), c.dim(2)}), inputs, residual, activation);
    }
    return;
  }
  LOG_FIRST_N(WARNING, 1) << "GemmBias: cuBLASLt offers no fused bias for (" << m << ", " << n
                          << ", " << k << ") in " << DTypeName(inputs)
                          << "; multiplying, then adding the bias";
  Gemm(a, trans_a, b, trans_b, c, 1.f, 0.f, inputs);
  AddBias(c, bias);
  if (residual.defined()) Add(residual, c, c, 1.f, 1.f);
  if (activation != kNoActivation) Unary(activation, c, c);
}

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
