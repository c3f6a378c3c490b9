// The local-optimizer warm-up (see local_warmup.h).
#include "ps/local_warmup.h"

#include <algorithm>
#include <cstring>

#include "common/thread_pool.h"

namespace tern::ps {

LocalWarmup::LocalWarmup(const config::OptimConfig& optim, int64_t size, int64_t updates)
    : updates_(updates),
      optimizer_(optim::MakeOptimizer(optim, size)),
      before_(size),
      delta_(size, 0.f) {}

void LocalWarmup::Step(const Tensor& params, const Tensor& grads,
                       const optim::StepOptions& options) {
  const int64_t n = static_cast<int64_t>(delta_.size());
  CHECK_EQ(params.numel(), n);
  float* p = params.f32();
  std::memcpy(before_.data(), p, n * sizeof(float));
  optimizer_->Step(params, grads, options);
  const float* b = before_.data();
  float* d = delta_.data();
  ParallelFor(n, 1 << 14, [=](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) d[i] += p[i] - b[i];
  });
  has_delta_ = true;
}

void LocalWarmup::Reapply(float* params) const {
  if (!has_delta_) return;
  const float* d = delta_.data();
  ParallelFor(static_cast<int64_t>(delta_.size()), 1 << 14, [=](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) params[i] += d[i];
  });
}

void LocalWarmup::GroupPushed() {
  if (!has_delta_) return;
  std::fill(delta_.begin(), delta_.end(), 0.f);
  has_delta_ = false;
}

void LocalWarmup::PseudoGradient(float* out) const {
  const float* d = delta_.data();
  ParallelFor(static_cast<int64_t>(delta_.size()), 1 << 14, [=](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) out[i] = -d[i];
  });
}

}  // namespace tern::ps
