// The fused output pass (Hoang et al.) over a whole batch of rows at once, on the tensors' device:
// per row, bias added, the k best columns kept and the softmax denominator summed with running-max
// rescaling, in one sweep over the logits. On the CPU it is FusedRowTopK (output_layer.h) row by
// row; on a CUDA GPU (inference/search/cuda/fused_top_k.cu) a row is split across thread blocks
// that each keep their own top k and (max, sum), merged by a second, small kernel.
#pragma once

#include <cstdint>

#include "tensor/tensor.h"

namespace tern::inference {

// The largest k the GPU kernels take (a beam wider than this decodes on the CPU).
inline constexpr int kMaxGpuTopK = 16;

// logits (rows, n) float32; bias (n) float32 or undefined (no bias); 1 <= k (<= kMaxGpuTopK on a
// GPU). Writes values (rows, k) float32: the biased logits of the k best columns, best first, ties
// to the lower column; columns (rows, k) int32: their indices, -1 (and value -inf) past the row's
// producible columns; lse (rows) float32: log(sum exp(logit + bias)) over all n columns, or 0
// when normalize is false (then no exponential is computed: the argmax of beam 1). Columns
// excluded[0..1] (-1 for none) are never kept but count in the sum. Every tensor on one device;
// on a GPU the call is asynchronous on the current stream.
void FusedTopK(const Tensor& logits, const Tensor& bias, int k, bool normalize,
               const int32_t excluded[2], const Tensor& values, const Tensor& columns,
               const Tensor& lse);

// The unfused sequence the fused pass replaces, for benchmarks and tests: x += bias, log_probs =
// log_softmax(x) (both written in full), then the same top-k selection over log_probs. values
// are then log-probabilities, and lse is left alone. Modifies logits.
void UnfusedTopK(const Tensor& logits, const Tensor& bias, int k, const int32_t excluded[2],
                 const Tensor& log_probs, const Tensor& values, const Tensor& columns);

// Blocks until the device's queued work is done (nothing to wait for on the CPU).
void WaitForDevice(Device device);

namespace gpu_impl {
// Defined by inference/search/cuda/fused_top_k.cu in CUDA builds, by fused_top_k_none.cc otherwise
// (where they throw tern::Error). Pointers are device pointers; the caller checked the shapes.
int Splits(int64_t rows, int64_t n);  // thread blocks per row for the first kernel
void FusedTopK(const float* logits, int64_t rows, int64_t n, const float* bias, int32_t exclude0,
               int32_t exclude1, int k, bool normalize, int splits, float* part_values,
               int32_t* part_columns, float* part_max, float* part_sum, float* values,
               int32_t* columns, float* lse);
void Synchronize();
}  // namespace gpu_impl

}  // namespace tern::inference
