// FusedTopK, the batched fused output pass: on the CPU against a sort and a log-sum-exp in double
// precision; UnfusedTopK against it; and on a CUDA GPU against the CPU on the same rows (ties,
// excluded columns, rows shorter than k, k up to the GPU's limit, vocabularies up to 64k). The GPU
// cases skip without a visible GPU; a CPU-only build must refuse a CUDA tensor with an Error.
#include "inference/search/fused_top_k.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "common/error.h"
#include "tensor/allocator.h"
#include "tensor/ops.h"

namespace tern::inference {
namespace {

struct Rows {
  Tensor logits, bias;
};

// rows x n normal logits; with `ties`, values are rounded to a coarse grid so many repeat.
Rows RandomRows(int64_t rows, int64_t n, bool ties, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.f, 3.f);
  Rows r{Tensor::Empty({rows, n}), Tensor::Empty({n})};
  for (int64_t i = 0; i < rows * n; ++i) {
    const float x = normal(rng);
    r.logits.f32()[i] = ties ? std::round(x) : x;
  }
  for (int64_t i = 0; i < n; ++i) r.bias.f32()[i] = ties ? 0.f : 0.1f * normal(rng);
  return r;
}

struct Result {
  Tensor values, columns, lse;
};

Result RunTopK(const Tensor& logits, const Tensor& bias, int k, bool normalize,
               const int32_t excluded[2], Device device) {
  const int64_t rows = logits.dim(0);
  Result out{Tensor::Empty({rows, k}, DType::kFloat32, device),
             Tensor::Empty({rows, k}, DType::kInt32, device),
             Tensor::Empty({rows}, DType::kFloat32, device)};
  FusedTopK(logits, bias, k, normalize, excluded, out.values, out.columns, out.lse);
  return out;
}

Tensor ToDevice(const Tensor& t, Device device) {
  if (!t.defined()) return t;
  Tensor out = Tensor::Empty(t.shape(), t.dtype(), device);
  Copy(t, out);
  return out;
}

// log(sum exp(logit + bias)) of each row in double precision.
std::vector<double> ExactLse(const Rows& r, bool bias) {
  const int64_t rows = r.logits.dim(0), n = r.logits.dim(1);
  std::vector<double> lse(rows);
  for (int64_t row = 0; row < rows; ++row) {
    auto x = [&](int64_t c) {
      return double{r.logits.f32()[row * n + c] + (bias ? r.bias.f32()[c] : 0.f)};
    };
    double max = -1e300, sum = 0;
    for (int64_t c = 0; c < n; ++c) max = std::max(max, x(c));
    for (int64_t c = 0; c < n; ++c) sum += std::exp(x(c) - max);
    lse[row] = max + std::log(sum);
  }
  return lse;
}

TEST(FusedTopKTest, CpuRowsMatchASortAndLogSumExp) {
  for (bool ties : {false, true}) {
    for (int k : {1, 4, 9}) {
      const int64_t rows = 5, n = 300;
      Rows r = RandomRows(rows, n, ties, 11 + k);
      const int32_t excluded[2] = {0, 7};
      Result got = RunTopK(r.logits, r.bias, k, /*normalize=*/true, excluded, Device::kCpu);
      const std::vector<double> exact = ExactLse(r, true);
      for (int64_t row = 0; row < rows; ++row) {
        std::vector<int32_t> order;
        auto x = [&](int32_t c) { return r.logits.f32()[row * n + c] + r.bias.f32()[c]; };
        for (int32_t c = 0; c < n; ++c) {
          if (c != excluded[0] && c != excluded[1]) order.push_back(c);
        }
        std::stable_sort(order.begin(), order.end(),
                         [&](int32_t a, int32_t b) { return x(a) > x(b); });
        for (int j = 0; j < k; ++j) {
          EXPECT_EQ(got.columns.i32()[row * k + j], order[j]) << "row " << row << " rank " << j;
          EXPECT_EQ(got.values.f32()[row * k + j], x(order[j]));
        }
        EXPECT_NEAR(got.lse.f32()[row], exact[row], 1e-4);
      }
    }
  }
}

TEST(FusedTopKTest, RowsShorterThanKArePaddedAndArgmaxSkipsTheSum) {
  Rows r = RandomRows(2, 3, false, 5);
  const int32_t excluded[2] = {1, -1};
  Result got = RunTopK(r.logits, r.bias, 4, /*normalize=*/false, excluded, Device::kCpu);
  for (int64_t row = 0; row < 2; ++row) {
    EXPECT_EQ(got.lse.f32()[row], 0.f);
    EXPECT_EQ(got.columns.i32()[row * 4 + 2], -1);
    EXPECT_EQ(got.columns.i32()[row * 4 + 3], -1);
    EXPECT_EQ(got.values.f32()[row * 4 + 3], -std::numeric_limits<float>::infinity());
    for (int j = 0; j < 2; ++j) EXPECT_NE(got.columns.i32()[row * 4 + j], 1);
  }
}

// -inf logits (a masked column) add nothing to the sum, also where a row starts with them: the
// running sum's first term was exp(-inf - -inf), NaN. On the CPU, and on a GPU where one is
// visible, whose threads each start on their own columns.
TEST(FusedTopKTest, MinusInfinityAddsNothingToTheSum) {
  const float inf = std::numeric_limits<float>::infinity();
  const int64_t n = 600;
  Tensor logits = Tensor::Empty({3, n});
  for (int64_t c = 0; c < n; ++c) {
    logits.f32()[c] = c < 300 ? -inf : 0.01f * static_cast<float>(c % 7);  // -inf first
    logits.f32()[n + c] = c % 2 == 0 ? -inf : 0.02f * static_cast<float>(c % 5);
    logits.f32()[2 * n + c] = c == 599 ? 1.f : -inf;  // one finite column, last
  }
  std::vector<double> exact(3, 0.0);
  for (int64_t row = 0; row < 3; ++row) {
    double sum = 0;
    for (int64_t c = 0; c < n; ++c) sum += std::exp(double{logits.f32()[row * n + c]});
    exact[row] = std::log(sum);
  }
  const int32_t excluded[2] = {-1, -1};
  std::vector<Device> devices = {Device::kCpu};
  if (CudaAvailable()) devices.push_back(Device::kCuda);
  for (Device device : devices) {
    Result got =
        RunTopK(ToDevice(logits, device), Tensor(), 2, /*normalize=*/true, excluded, device);
    const Tensor lse = ToDevice(got.lse, Device::kCpu),
                 columns = ToDevice(got.columns, Device::kCpu);
    for (int64_t row = 0; row < 3; ++row) {
      EXPECT_NEAR(lse.f32()[row], exact[row], 1e-5) << DeviceName(device) << " row " << row;
    }
    EXPECT_EQ(columns.i32()[2 * 2], 599) << DeviceName(device);  // the one finite column first
  }
}

TEST(FusedTopKTest, UnfusedKeepsTheSameColumnsWithLogProbabilities) {
  Rows r = RandomRows(6, 1000, false, 8);
  const int32_t excluded[2] = {0, 2};
  const int k = 5;
  Result fused = RunTopK(r.logits, r.bias, k, true, excluded, Device::kCpu);
  Tensor logits = ToDevice(r.logits, Device::kCpu);  // UnfusedTopK adds the bias in place
  Tensor log_probs = Tensor::Empty({6, 1000});
  Tensor values = Tensor::Empty({6, k}), columns = Tensor::Empty({6, k}, DType::kInt32);
  UnfusedTopK(logits, r.bias, k, excluded, log_probs, values, columns);
  for (int64_t i = 0; i < 6 * k; ++i) {
    EXPECT_EQ(columns.i32()[i], fused.columns.i32()[i]);
    EXPECT_NEAR(values.f32()[i], fused.values.f32()[i] - fused.lse.f32()[i / k], 1e-4);
  }
}

TEST(FusedTopKDeathTest, BadShapesAreCaught) {
  Rows r = RandomRows(2, 10, false, 1);
  const int32_t excluded[2] = {-1, -1};
  Tensor values = Tensor::Empty({2, 3}), columns = Tensor::Empty({2, 3}, DType::kInt32);
  Tensor lse = Tensor::Empty({2});
  EXPECT_DEATH(FusedTopK(r.logits, r.bias, 4, true, excluded, values, columns, lse),
               "values must be \\(2, 4\\)");
  EXPECT_DEATH(FusedTopK(r.logits, Tensor::Empty({9}), 3, true, excluded, values, columns, lse),
               "bias must be \\(10\\)");
}

TEST(FusedTopKTest, CpuLseOfWideRowsIsWithinASequentialSumsRounding) {
  // The CPU sums a row's n exponentials one after another in float: the relative error of the
  // sum (the absolute error of its log) is bounded by about n units of float rounding.
  for (int64_t n : {int64_t{1000}, int64_t{32000}, int64_t{65536}}) {
    Rows r = RandomRows(64, n, false, static_cast<uint32_t>(n));
    const int32_t excluded[2] = {-1, -1};
    Result cpu = RunTopK(r.logits, r.bias, 4, true, excluded, Device::kCpu);
    const std::vector<double> exact = ExactLse(r, true);
    for (int64_t row = 0; row < 64; ++row) {
      ASSERT_NEAR(cpu.lse.f32()[row], exact[row], n * 0x1p-24) << "n " << n << " row " << row;
    }
  }
}

// The GPU against the CPU: identical columns and values (the same float additions). lse against
// double precision: the GPU sums short runs and merges them in a tree, so it stays within 1e-5
// where the CPU's one long float sum may drift further (the test above).
void ExpectGpuMatchesCpu(int64_t rows, int64_t n, int k, bool normalize, bool ties, bool bias) {
  Rows r = RandomRows(rows, n, ties, static_cast<uint32_t>(rows * 131 + n + k));
  const int32_t excluded[2] = {0, n > 2 ? 2 : -1};
  Tensor b = bias ? r.bias : Tensor();
  Result cpu = RunTopK(r.logits, b, k, normalize, excluded, Device::kCpu);
  Result gpu = RunTopK(ToDevice(r.logits, Device::kCuda), ToDevice(b, Device::kCuda), k, normalize,
                       excluded, Device::kCuda);
  Tensor values = ToDevice(gpu.values, Device::kCpu), columns = ToDevice(gpu.columns, Device::kCpu);
  Tensor lse = ToDevice(gpu.lse, Device::kCpu);
  const std::string where = "rows " + std::to_string(rows) + " n " + std::to_string(n) + " k " +
                            std::to_string(k) + (normalize ? "" : " argmax") +
                            (ties ? " ties" : "");
  for (int64_t i = 0; i < rows * k; ++i) {
    ASSERT_EQ(columns.i32()[i], cpu.columns.i32()[i]) << where << " at " << i;
    ASSERT_EQ(values.f32()[i], cpu.values.f32()[i]) << where << " at " << i;
  }
  if (!normalize) {
    for (int64_t row = 0; row < rows; ++row) ASSERT_EQ(lse.f32()[row], 0.f) << where;
    return;
  }
  const std::vector<double> exact = ExactLse(r, bias);
  for (int64_t row = 0; row < rows; ++row) {
    // The emulated GPU (allocator.h) sums as the CPU does: the CPU's bound (the test above).
    const double gpu_bound = 1e-5 * std::max(1.0, std::fabs(exact[row]));
    const double bound =
        GpuEmulated() ? std::max(gpu_bound, static_cast<double>(n) * 0x1p-24) : gpu_bound;
    ASSERT_NEAR(lse.f32()[row], exact[row], bound) << where << " row " << row;
  }
}

TEST(FusedTopKTest, GpuMatchesCpu) {
  if (!CudaAvailable()) GTEST_SKIP() << "no CUDA GPU visible";
  for (int64_t n : {int64_t{3}, int64_t{1000}, int64_t{8000}, int64_t{32000}, int64_t{65536}}) {
    for (int k : {1, 4, 8, 16}) {
      ExpectGpuMatchesCpu(1, n, k, true, false, true);
      ExpectGpuMatchesCpu(64 * std::min(k, 8), n, k, true, false, true);
    }
  }
  ExpectGpuMatchesCpu(7, 50000, 1, /*normalize=*/false, false, true);
  ExpectGpuMatchesCpu(33, 9000, 8, true, /*ties=*/true, /*bias=*/false);
  ExpectGpuMatchesCpu(2, 10, 16, true, false, true);  // 8 producible columns for k = 16
}

TEST(FusedTopKTest, GpuRefusesAWiderBeamThanItsKernels) {
  if (!CudaAvailable()) GTEST_SKIP() << "no CUDA GPU visible";
  Rows r = RandomRows(1, 100, false, 2);
  const int32_t excluded[2] = {-1, -1};
  EXPECT_THROW(RunTopK(ToDevice(r.logits, Device::kCuda), Tensor(), kMaxGpuTopK + 1, true, excluded,
                       Device::kCuda),
               Error);
}

}  // namespace
}  // namespace tern::inference
