#include "trainer/smoothing.h"

#include <algorithm>

#include "common/error.h"
#include "tensor/ops.h"

namespace tern::trainer {

float SmoothingDecay(float smoothing, int64_t update) {
  CHECK_GE(update, 1) << "updates are numbered from 1";
  const double warm = (1.0 + static_cast<double>(update)) / (10.0 + static_cast<double>(update));
  return static_cast<float>(std::min(1.0 - static_cast<double>(smoothing), warm));
}

void ParamSmoother::Update(const Tensor& values, int64_t update) {
  CHECK(active());
  if (!average_.defined()) {
    average_ = Tensor::Empty(values.shape(), DType::kFloat32, values.device());
    Copy(values, average_);
    return;
  }
  CHECK(average_.shape() == values.shape() && average_.device() == values.device());
  const float decay = SmoothingDecay(smoothing_, update);
  Add(average_, values, average_, decay, 1.f - decay);
}

void ParamSmoother::Restore(const Tensor& host, Device device) {
  average_ = Tensor::Empty(host.shape(), DType::kFloat32, device);
  Copy(host, average_);
}

}  // namespace tern::trainer
