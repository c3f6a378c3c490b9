#include "trainer/divergence.h"

#include <cmath>
#include <vector>

#include "common/error.h"
#include "tensor/ops.h"

namespace tern::trainer {

DivergenceWatch::DivergenceWatch(const config::TrainConfig& config, Device device)
    : max_nonfinite_(config.training().max_nonfinite_updates()),
      learning_rate_(config.optim().learning_rate()),
      window_(config.training().disp_freq()),
      device_(device) {}

void DivergenceWatch::AddCost(const Tensor& loss) {
  if (!step_costs_.defined()) step_costs_ = Tensor::Zeros({window_}, DType::kFloat32, device_);
  CHECK_LT(steps_, step_costs_.numel());
  const Tensor slot = step_costs_.Slice(steps_, steps_ + 1);
  Add(slot, loss.Reshape(slot.shape()), slot);
  ++steps_;
}

double DivergenceWatch::TakeCost(int64_t update) {
  if (steps_ == 0) return 0;
  // Reading waits for the device's queued steps, so a rate after is true.
  const std::vector<float> costs = step_costs_.Slice(0, steps_).ToVector();
  const int64_t first = update - steps_ + 1;
  float sum = 0.f;  // in update order, in float: the sum the device once kept
  for (size_t i = 0; i < costs.size(); ++i) {
    sum += costs[i];
    Count(costs[i], first + static_cast<int64_t>(i));
  }
  Fill(step_costs_, 0.f);
  steps_ = 0;
  return sum;
}

void DivergenceWatch::Count(float cost, int64_t update) {
  if (std::isfinite(cost)) {
    nonfinite_run_ = 0;
  } else if (nonfinite_run_++ == 0) {
    nonfinite_from_ = update;
  }
}

std::string DivergenceWatch::Advice() const {
  return StrCat("lower optim.learning_rate (", learning_rate_,
                ") or set optim.clip_norm, and run again");
}

void DivergenceWatch::Fail(int rank) const {
  if (rank != 0) {
    tern::Fail("training diverged: rank 0's cost was not a finite number for ", max_nonfinite_,
               " or more updates in a row (its line says more)");
  }
  tern::Fail("training diverged: the cost was not a finite number for ", nonfinite_run_,
             " updates in a row, from update ", nonfinite_from_, "; ",
             last_saved_ > 0 ? "checkpoint-" + std::to_string(last_saved_) +
                                   " holds the last parameters saved, all finite"
                             : std::string("no checkpoint was saved"),
             "; ", Advice());
}

void DivergenceWatch::CheckParametersFinite(const graph::ParamStore& params, int64_t update) const {
  for (int i = 0; i < params.size(); ++i) {
    const Tensor value = params.value(i);
    const float* v = value.f32();
    for (int64_t j = 0; j < value.numel(); ++j) {
      if (std::isfinite(v[j])) continue;
      tern::Fail("training diverged: parameter '", params.info(i).name, "' holds ", v[j],
                 " at update ", update, "; nothing was saved, ",
                 last_saved_ > 0 ? "checkpoint-" + std::to_string(last_saved_) + " is the last"
                                 : std::string("no checkpoint was saved"),
                 "; ", Advice());
    }
  }
}

}  // namespace tern::trainer
