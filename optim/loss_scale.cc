// Dynamic loss scaling (see loss_scale.h).
#include "optim/loss_scale.h"

#include <glog/logging.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "tensor/ops.h"

namespace tern::optim {
namespace {

// The scale stays within float's normal range, so 1/scale is exact too.
constexpr float kMinScale = 1.f, kMaxScale = 1.f * (1 << 30) * (1 << 30);

}  // namespace

LossScaler::LossScaler(float initial_scale, int64_t window)
    : window_(window), scale_(initial_scale) {
  CHECK(window >= 1 && std::isfinite(initial_scale) && initial_scale >= kMinScale)
      << "loss scale " << initial_scale << ", window " << window;
}

float LossScaler::scale() const { return on_device() ? gate_.ToVector()[kGateScale] : scale_; }

int64_t LossScaler::good_steps() const {
  return on_device() ? static_cast<int64_t>(gate_.ToVector()[kGateGoodSteps]) : good_steps_;
}

int64_t LossScaler::skipped() const {
  return on_device() ? static_cast<int64_t>(gate_.ToVector()[kGateSkipped]) : skipped_;
}

bool LossScaler::Update(bool finite) {
  CHECK(!on_device()) << "LossScaler::Update on the host after MoveTo";
  if (!finite) {
    scale_ = std::max(kMinScale, scale_ * 0.5f);
    good_steps_ = 0;
    ++skipped_;
    return false;
  }
  if (++good_steps_ >= window_) {
    scale_ = std::min(kMaxScale, scale_ * 2.f);
    good_steps_ = 0;
  }
  return true;
}

void LossScaler::Restore(float scale, int64_t good_steps) {
  CHECK(std::isfinite(scale) && scale >= kMinScale && good_steps >= 0)
      << "loss scale " << scale << ", good steps " << good_steps;
  scale_ = scale;
  good_steps_ = good_steps;
  if (on_device()) {
    skipped_ = skipped();
    const Device device = gate_.device();
    gate_ = Tensor();
    MoveTo(device);
  }
}

void LossScaler::MoveTo(Device device) {
  CHECK(!on_device()) << "LossScaler::MoveTo twice";
  // Counts stay exact in float up to 2^24; the window is at most that (config validation).
  std::vector<float> state(kLossGateSize, 0.f);
  state[kGateScale] = scale_;
  state[kGateGoodSteps] = static_cast<float>(good_steps_);
  state[kGateSkipped] = static_cast<float>(skipped_);
  state[kGateApply] = 1.f;
  state[kGateInvScale] = 1.f / scale_;
  gate_ = Tensor::Empty(Shape{kLossGateSize}, DType::kFloat32, device);
  Copy(Tensor(state.data(), Shape{kLossGateSize}), gate_);
  squared_norm_ = Tensor::Empty(Shape{1}, DType::kFloat32, device);
}

Tensor LossScaler::Field(int field) const {
  CHECK(on_device()) << "LossScaler: not on a device";
  return gate_.Slice(field, field + 1);
}

Tensor LossScaler::SeedScale() const { return Field(kGateScale); }
Tensor LossScaler::Apply() const { return Field(kGateApply); }

void LossScaler::Decide(const Tensor& grads) {
  SumSquaresTo(grads, squared_norm_);
  LossScaleGate(squared_norm_, gate_, {static_cast<float>(window_), kMinScale, kMaxScale});
  // Exact (a power of two). A skipped step's gradients, inf or NaN, go through it too: the
  // optimizer's gated step does not read them.
  ScaleBy(grads, Field(kGateInvScale));
}

}  // namespace tern::optim
