// Adam with bias correction and decoupled weight decay, as a threaded CPU loop over a flat span.
#include <cmath>
#include <type_traits>
#include <vector>

#include "common/thread_pool.h"
#include "optim/optimizer.h"
#include "optim/state_io.h"

namespace tern::optim {
namespace {

constexpr int64_t kGrain = 1 << 14;

class Adam final : public Optimizer {
 public:
  Adam(int64_t size, const AdamOptions& options)
      : Optimizer(size), options_(options), m_(size, 0.f), v_(size, 0.f) {}

  void StepAndCopy(const Tensor& params, const Tensor& grads, const StepOptions& o,
                   float* out) override {
    CheckArgs(params, grads);
    ++steps_;
    const float b1 = o.beta1, b2 = o.beta2;
    const float c1 = 1.f - b1, c2 = 1.f - b2;
    // Bias corrections with the current betas (after a cooldown the new betas apply to t).
    const float inv_bc1 = static_cast<float>(1.0 / (1.0 - std::pow(double{b1}, steps_)));
    const float inv_bc2 = static_cast<float>(1.0 / (1.0 - std::pow(double{b2}, steps_)));
    const float lr = o.learning_rate, eps = options_.epsilon, scale = o.grad_scale;
    const float decay = o.learning_rate * options_.weight_decay;
    float* p = params.f32();
    const float* g = grads.f32();
    float* m = m_.data();
    float* v = v_.data();
    // One loop per case (with_copy a std::bool_constant), so the plain step pays no branch.
    auto update = [=](int64_t begin, int64_t end, auto with_copy) {
      for (int64_t i = begin; i < end; ++i) {
        const float gi = g[i] * scale;
        const float mi = b1 * m[i] + c1 * gi;
        const float vi = b2 * v[i] + c2 * gi * gi;
        m[i] = mi;
        v[i] = vi;
        const float pi =
            p[i] - (lr * (mi * inv_bc1) / (std::sqrt(vi * inv_bc2) + eps) + decay * p[i]);
        p[i] = pi;
        if constexpr (decltype(with_copy)::value) out[i] = pi;
      }
    };
    ParallelFor(size_, kGrain, [&](int64_t begin, int64_t end) {
      if (out != nullptr) {
        update(begin, end, std::true_type{});
      } else {
        update(begin, end, std::false_type{});
      }
    });
  }

  std::string SaveState() const override {
    return internal::EncodeState(internal::StateKind::kAdam, size_, steps_, {&m_, &v_});
  }
  void LoadState(const std::string& bytes) override {
    internal::DecodeState(bytes, internal::StateKind::kAdam, size_, &steps_, {&m_, &v_});
  }
  int64_t state_size() const override { return 2 * size_; }
  const char* name() const override { return "adam"; }

 private:
  AdamOptions options_;
  std::vector<float> m_;  // (n) first moment
  std::vector<float> v_;  // (n) second moment
};

}  // namespace

std::unique_ptr<Optimizer> MakeAdam(int64_t size, const AdamOptions& options) {
  CHECK_GE(size, 0);
  return std::make_unique<Adam>(size, options);
}

}  // namespace tern::optim
