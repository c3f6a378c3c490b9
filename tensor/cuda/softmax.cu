// Softmax (with key mask and causal mask), its backward, log-softmax and the label-smoothed
// cross-entropy: one block per row, block reductions for max and sums. Semantics match
// tensor/cpu/softmax.cc, masked and fully masked rows included.
#include "tensor/cuda/cuda_common.h"
#include "tensor/cuda/cuda_kernels.h"
#include "tensor/cuda/reduce.cuh"

namespace tern::cuda {
namespace {

// ---- kernels ----

// One block per row of x (rows, n). mask (batch, n) or null, batch = row / rows_per_batch;
// causal keeps keys k <= row % tq. Masked entries get 0, a fully masked row is all 0.
__global__ void SoftmaxKernel(const float* x, float* y, const float* mask, bool causal, float scale,
                              int64_t n, int64_t tq, int64_t rows_per_batch) {
  const int64_t row = blockIdx.x;
  const float* xr = x + row * n;
  float* yr = y + row * n;
  const float* m = mask != nullptr ? mask + (row / rows_per_batch) * n : nullptr;
  const int64_t limit = causal ? min(n, row % tq + 1) : n;
  float max = -INFINITY;
  for (int64_t k = threadIdx.x; k < limit; k += blockDim.x)
    if (m == nullptr || m[k] != 0.f) max = fmaxf(max, xr[k]);
  max = BlockMax(max);
  if (max == -INFINITY && (m != nullptr || causal)) {  // fully masked row
    for (int64_t k = threadIdx.x; k < n; k += blockDim.x) yr[k] = 0.f;
    return;
  }
  float sum = 0.f;
  for (int64_t k = threadIdx.x; k < n; k += blockDim.x) {
    const bool keep = k < limit && (m == nullptr || m[k] != 0.f);
    const float e = keep ? expf(scale * (xr[k] - max)) : 0.f;
    yr[k] = e;
    sum += e;
  }
  const float inv = 1.f / BlockSum(sum);
  for (int64_t k = threadIdx.x; k < n; k += blockDim.x) yr[k] *= inv;
}

// dx += scale * y * (dy - Σ dy * y) (dx = without `accumulate`), one block per row.
__global__ void SoftmaxBackwardKernel(const float* y, const float* dy, float* dx, float scale,
                                      int64_t n, bool accumulate) {
  const int64_t offset = blockIdx.x * n;
  float dot = 0.f;
  for (int64_t k = threadIdx.x; k < n; k += blockDim.x) dot += y[offset + k] * dy[offset + k];
  dot = BlockSum(dot);
  for (int64_t k = threadIdx.x; k < n; k += blockDim.x) {
    const float d = scale * y[offset + k] * (dy[offset + k] - dot);
    dx[offset + k] = accumulate ? dx[offset + k] + d : d;
  }
}

// Block-wide log-sum-exp of one row.
__device__ float RowLogSumExp(const float* xr, int64_t n) {
  float max = -INFINITY;
  for (int64_t k = threadIdx.x; k < n; k += blockDim.x) max = fmaxf(max, xr[k]);
  max = BlockMax(max);
  float sum = 0.f;
  for (int64_t k = threadIdx.x; k < n; k += blockDim.x) sum += expf(xr[k] - max);
  return max + logf(BlockSum(sum));
}

__global__ void LogSoftmaxKernel(const float* x, float* y, int64_t n) {
  const float* xr = x + blockIdx.x * n;
  float* yr = y + blockIdx.x * n;
  const float lse = RowLogSumExp(xr, n);
  for (int64_t k = threadIdx.x; k < n; k += blockDim.x) yr[k] = xr[k] - lse;
}

// loss = (1-s) (lse - x[t]) + s (lse - mean x); rows with t == ignore_id get 0.
__global__ void CrossEntropyKernel(const float* logits, const int32_t* targets, float smoothing,
                                   int32_t ignore_id, float* loss, float* lse_out, int64_t v,
                                   DeviceErrorReport* error) {
  const int64_t row = blockIdx.x;
  const float* xr = logits + row * v;
  const float lse = RowLogSumExp(xr, v);
  float sum = 0.f;
  for (int64_t k = threadIdx.x; k < v; k += blockDim.x) sum += xr[k];
  sum = BlockSum(sum);
  if (threadIdx.x != 0) return;
  lse_out[row] = lse;
  const int32_t t = targets[row];
  if (t == ignore_id) {
    loss[row] = 0.f;
    return;
  }
  if (t < 0 || t >= v) {
    ReportBadIndex(error, kTargetId, t, static_cast<int>(v));
    loss[row] = NAN;
    return;
  }
  const float nll = lse - xr[t];
  const float smooth = lse - sum / static_cast<float>(v);
  loss[row] = (1.f - smoothing) * nll + smoothing * smooth;
}

// dlogits += dloss * (softmax - (1-s) onehot(t) - s/V); rows with t == ignore_id untouched
// (written 0 without `accumulate`, as every row is written).
__global__ void CrossEntropyBackwardKernel(const float* logits, const int32_t* targets,
                                           float smoothing, int32_t ignore_id, const float* lse,
                                           const float* dloss, float* dlogits, int64_t v,
                                           bool accumulate, DeviceErrorReport* error) {
  const int64_t row = blockIdx.x;
  const int32_t t = targets[row];
  float* dxr = dlogits + row * v;
  if (t == ignore_id) {
    if (!accumulate) {
      for (int64_t k = threadIdx.x; k < v; k += blockDim.x) dxr[k] = 0.f;
    }
    return;
  }
  if (t < 0 || t >= v) {
    if (threadIdx.x == 0) ReportBadIndex(error, kTargetId, t, static_cast<int>(v));
    return;
  }
  const float* xr = logits + row * v;
  const float g = dloss[row], l = lse[row], uniform = smoothing / static_cast<float>(v);
  for (int64_t k = threadIdx.x; k < v; k += blockDim.x) {
    float d = g * (expf(xr[k] - l) - uniform);
    if (k == t) d -= g * (1.f - smoothing);
    dxr[k] = accumulate ? dxr[k] + d : d;
  }
}

}  // namespace

// ---- launchers ----

void Softmax(const Tensor& x, const Tensor& out, const Tensor& key_mask, bool causal, float scale) {
  const int64_t n = x.cols(), rows = x.rows();
  if (rows == 0 || n == 0) return;
  const float* mask = key_mask.defined() ? key_mask.f32() : nullptr;
  const int64_t tq = x.rank() == 4 ? x.dim(2) : 1;
  const int64_t rows_per_batch = x.rank() == 4 ? x.dim(1) * x.dim(2) : rows;
  SoftmaxKernel<<<rows, RowThreads(n), 0, CurrentStream()>>>(x.f32(), out.f32(), mask, causal,
                                                             scale, n, tq, rows_per_batch);
  TERN_CUDA_LAUNCH_CHECK("SoftmaxKernel");
}

void SoftmaxBackward(const Tensor& y, const Tensor& dy, const Tensor& dx, float scale,
                     bool accumulate) {
  const int64_t n = y.cols(), rows = y.rows();
  if (rows == 0 || n == 0) return;
  SoftmaxBackwardKernel<<<rows, RowThreads(n), 0, CurrentStream()>>>(y.f32(), dy.f32(), dx.f32(),
                                                                     scale, n, accumulate);
  TERN_CUDA_LAUNCH_CHECK("SoftmaxBackwardKernel");
}

void LogSoftmax(const Tensor& x, const Tensor& out) {
  const int64_t n = x.cols(), rows = x.rows();
  if (rows == 0 || n == 0) return;
  LogSoftmaxKernel<<<rows, RowThreads(n), 0, CurrentStream()>>>(x.f32(), out.f32(), n);
  TERN_CUDA_LAUNCH_CHECK("LogSoftmaxKernel");
}

void CrossEntropy(const Tensor& logits, const Tensor& targets, float smoothing, int32_t ignore_id,
                  const Tensor& loss, const Tensor& lse) {
  const int64_t v = logits.cols(), rows = logits.rows();
  if (rows == 0) return;
  CrossEntropyKernel<<<rows, RowThreads(v), 0, CurrentStream()>>>(logits.f32(), targets.i32(),
                                                                  smoothing, ignore_id, loss.f32(),
                                                                  lse.f32(), v, DeviceErrorSlot());
  TERN_CUDA_LAUNCH_CHECK("CrossEntropyKernel");
}

void CrossEntropyBackward(const Tensor& logits, const Tensor& targets, float smoothing,
                          int32_t ignore_id, const Tensor& lse, const Tensor& dloss,
                          const Tensor& dlogits, bool accumulate) {
  const int64_t v = logits.cols(), rows = logits.rows();
  if (rows == 0) return;
  CrossEntropyBackwardKernel<<<rows, RowThreads(v), 0, CurrentStream()>>>(
      logits.f32(), targets.i32(), smoothing, ignore_id, lse.f32(), dloss.f32(), dlogits.f32(), v,
      accumulate, DeviceErrorSlot());
  TERN_CUDA_LAUNCH_CHECK("CrossEntropyBackwardKernel");
}

}  // namespace tern::cuda
