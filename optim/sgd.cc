// SGD with (heavy-ball) momentum and decoupled weight decay over a flat span.
#include <algorithm>
#include <vector>

#include "common/thread_pool.h"
#include "optim/optimizer.h"
#include "optim/state_io.h"

namespace tern::optim {
namespace {

constexpr int64_t kGrain = 1 << 14;

// One loop per (momentum kept, copy wanted): p -= lr * step + decay * p, step = mu u + g scale
// (u = step when kept) or g scale; out gets the new p when wanted.
template <bool kMomentum, bool kCopy>
void Update(float* p, const float* g, float* u, float* out, int64_t begin, int64_t end, float mu,
            float lr, float scale, float decay) {
  for (int64_t i = begin; i < end; ++i) {
    float step = g[i] * scale;
    if constexpr (kMomentum) {
      step = mu * u[i] + step;
      u[i] = step;
    }
    const float pi = p[i] - (lr * step + decay * p[i]);
    p[i] = pi;
    if constexpr (kCopy) out[i] = pi;
  }
}

class Sgd final : public Optimizer {
 public:
  Sgd(int64_t size, float weight_decay)
      : Optimizer(size), weight_decay_(weight_decay), u_(size, 0.f) {}

  void StepAndCopy(const Tensor& params, const Tensor& grads, const StepOptions& o,
                   float* out) override {
    CheckArgs(params, grads);
    ++steps_;
    const float mu = o.beta1, lr = o.learning_rate, scale = o.grad_scale;
    const float decay = o.learning_rate * weight_decay_;
    float* p = params.f32();
    const float* g = grads.f32();
    // Without momentum the buffer would only hold the last gradient: it is not kept (as in
    // PyTorch), which saves two of the step's passes over memory; momentum turned on later
    // starts from zero.
    const bool keep = mu != 0.f;
    if (keep && momentum_dropped_) std::fill(u_.begin(), u_.end(), 0.f);
    momentum_dropped_ = !keep;
    float* u = u_.data();
    ParallelFor(size_, kGrain, [&](int64_t begin, int64_t end) {
      if (keep) {
        if (out != nullptr) {
          Update<true, true>(p, g, u, out, begin, end, mu, lr, scale, decay);
        } else {
          Update<true, false>(p, g, u, out, begin, end, mu, lr, scale, decay);
        }
      } else if (out != nullptr) {
        Update<false, true>(p, g, u, out, begin, end, mu, lr, scale, decay);
      } else {
        Update<false, false>(p, g, u, out, begin, end, mu, lr, scale, decay);
      }
    });
  }

  std::string SaveState() const override {
    if (momentum_dropped_) {
      const std::vector<float> zeros(size_, 0.f);
      return internal::EncodeState(internal::StateKind::kSgd, size_, steps_, {&zeros});
    }
    return internal::EncodeState(internal::StateKind::kSgd, size_, steps_, {&u_});
  }
  void LoadState(const std::string& bytes) override {
    internal::DecodeState(bytes, internal::StateKind::kSgd, size_, &steps_, {&u_});
    momentum_dropped_ = false;
  }
  int64_t state_size() const override { return size_; }
  const char* name() const override { return "sgd"; }

 private:
  float weight_decay_;
  std::vector<float> u_;           // (n) momentum buffer
  bool momentum_dropped_ = false;  // u_ is stale (the last step had no momentum): reads as 0
};

}  // namespace

std::unique_ptr<Optimizer> MakeSgd(int64_t size, float weight_decay) {
  CHECK_GE(size, 0);
  return std::make_unique<Sgd>(size, weight_decay);
}

}  // namespace tern::optim
