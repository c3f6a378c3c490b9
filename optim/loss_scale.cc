// Dynamic loss scaling (see loss_scale.h).
#include "optim/loss_scale.h"

#include <glog/logging.h>

#include <algorithm>
#include <cmath>

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

bool LossScaler::Update(bool finite) {
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
}

}  // namespace tern::optim
