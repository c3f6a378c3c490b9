#include "inference/search/fused_top_k.h"

#include <array>
#include <limits>
#include <vector>

#include "common/error.h"
#include "inference/search/output_layer.h"
#include "tensor/allocator.h"
#include "tensor/ops.h"

namespace tern::inference {
namespace {

void CheckArguments(const Tensor& logits, const Tensor& bias, int k, const Tensor& values,
                    const Tensor& columns) {
  CHECK(logits.dtype() == DType::kFloat32 && logits.shape().rank() == 2)
      << "FusedTopK: logits must be (rows, n) float32";
  const int64_t rows = logits.dim(0), n = logits.dim(1);
  CHECK_GE(k, 1) << "FusedTopK: k must be at least 1";
  CHECK(!bias.defined() ||
        (bias.dtype() == DType::kFloat32 && bias.numel() == n && bias.device() == logits.device()))
      << "FusedTopK: bias must be (" << n << ") float32 on the logits' device";
  CHECK(values.dtype() == DType::kFloat32 && values.numel() == rows * k &&
        values.device() == logits.device())
      << "FusedTopK: values must be (" << rows << ", " << k << ") float32";
  CHECK(columns.dtype() == DType::kInt32 && columns.numel() == rows * k &&
        columns.device() == logits.device())
      << "FusedTopK: columns must be (" << rows << ", " << k << ") int32";
  if (logits.device() == Device::kCuda) {
    if (k > kMaxGpuTopK) {
      throw Error("FusedTopK: k = " + std::to_string(k) + " is more than the GPU kernel's " +
                  std::to_string(kMaxGpuTopK) + "; use a narrower beam");
    }
    CHECK_LT(n, int64_t{std::numeric_limits<int32_t>::max()}) << "FusedTopK: too many columns";
  }
}

// The CPU path: FusedRowTopK per row, padded with (-inf, -1) past the producible columns.
void CpuTopK(const Tensor& logits, const float* bias, int k, bool normalize,
             const int32_t excluded[2], const Tensor& values, const Tensor& columns, float* lse) {
  const int64_t rows = logits.dim(0), n = logits.dim(1);
  std::vector<ColumnScore> top;
  for (int64_t r = 0; r < rows; ++r) {
    const float row_lse = FusedRowTopK(logits.f32() + r * n, bias, n, excluded, k, normalize, &top);
    lse[r] = row_lse;
    for (int j = 0; j < k; ++j) {
      const bool kept = j < static_cast<int>(top.size());
      values.f32()[r * k + j] = kept ? top[j].logit : -std::numeric_limits<float>::infinity();
      columns.i32()[r * k + j] = kept ? top[j].column : -1;
    }
  }
}

}  // namespace

void FusedTopK(const Tensor& logits, const Tensor& bias, int k, bool normalize,
               const int32_t excluded[2], const Tensor& values, const Tensor& columns,
               const Tensor& lse) {
  CheckArguments(logits, bias, k, values, columns);
  const int64_t rows = logits.dim(0), n = logits.dim(1);
  CHECK(lse.dtype() == DType::kFloat32 && lse.numel() == rows && lse.device() == logits.device())
      << "FusedTopK: lse must be (" << rows << ") float32";
  if (logits.device() == Device::kCpu) {
    CpuTopK(logits, bias.defined() ? bias.f32() : nullptr, k, normalize, excluded, values, columns,
            lse.f32());
    return;
  }
  if (GpuEmulated()) {  // the GPU entry's checks above, the CPU's pass on the device's queue
    const std::array<int32_t, 2> ex = {excluded[0], excluded[1]};
    EnqueueOnEmulatedGpu({logits, bias, values, columns, lse},
                         [k, normalize, ex](const std::vector<Tensor>& t) {
                           CpuTopK(t[0], t[1].defined() ? t[1].f32() : nullptr, k, normalize,
                                   ex.data(), t[2], t[3], t[4].f32());
                         });
    return;
  }
  // Scratch for the per-block partial results; the device allocator caches it across calls.
  const int splits = gpu_impl::Splits(rows, n);
  Tensor part_values = Tensor::Empty({rows, splits, k}, DType::kFloat32, logits.device());
  Tensor part_columns = Tensor::Empty({rows, splits, k}, DType::kInt32, logits.device());
  Tensor part_max = Tensor::Empty({rows, splits}, DType::kFloat32, logits.device());
  Tensor part_sum = Tensor::Empty({rows, splits}, DType::kFloat32, logits.device());
  gpu_impl::FusedTopK(logits.f32(), rows, n, bias.defined() ? bias.f32() : nullptr, excluded[0],
                      excluded[1], k, normalize, splits, part_values.f32(), part_columns.i32(),
                      part_max.f32(), part_sum.f32(), values.f32(), columns.i32(), lse.f32());
}

void UnfusedTopK(const Tensor& logits, const Tensor& bias, int k, const int32_t excluded[2],
                 const Tensor& log_probs, const Tensor& values, const Tensor& columns) {
  CheckArguments(logits, bias, k, values, columns);
  if (bias.defined()) AddBias(logits, bias);
  LogSoftmax(logits, log_probs);
  Tensor lse = Tensor::Empty({logits.dim(0)}, DType::kFloat32, logits.device());
  FusedTopK(log_probs, Tensor(), k, /*normalize=*/false, excluded, values, columns, lse);
}

void WaitForDevice(Device device) {
  if (device == Device::kCuda && !GpuEmulated()) gpu_impl::Synchronize();
}

}  // namespace tern::inference
