// SGD with (heavy-ball) momentum and decoupled weight decay over a flat span.
#include <vector>

#include "common/thread_pool.h"
#include "optim/optimizer.h"
#include "optim/state_io.h"

namespace tern::optim {
namespace {

constexpr int64_t kGrain = 1 << 14;

class Sgd final : public Optimizer {
 public:
  Sgd(int64_t size, float weight_decay)
      : Optimizer(size), weight_decay_(weight_decay), u_(size, 0.f) {}

  void Step(const Tensor& params, const Tensor& grads, const StepOptions& o) override {
    CheckArgs(params, grads);
    ++steps_;
    const float mu = o.beta1, lr = o.learning_rate, scale = o.grad_scale;
    const float decay = o.learning_rate * weight_decay_;
    float* p = params.f32();
    const float* g = grads.f32();
    float* u = u_.data();
    ParallelFor(size_, kGrain, [=](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        const float ui = mu * u[i] + g[i] * scale;
        u[i] = ui;
        p[i] -= lr * ui + decay * p[i];
      }
    });
  }

  std::string SaveState() const override {
    return internal::EncodeState(internal::StateKind::kSgd, size_, steps_, {&u_});
  }
  void LoadState(const std::string& bytes) override {
    internal::DecodeState(bytes, internal::StateKind::kSgd, size_, &steps_, {&u_});
  }
  int64_t state_size() const override { return size_; }
  const char* name() const override { return "sgd"; }

 private:
  float weight_decay_;
  std::vector<float> u_;  // (n) momentum buffer
};

}  // namespace

std::unique_ptr<Optimizer> MakeSgd(int64_t size, float weight_decay) {
  CHECK_GE(size, 0);
  return std::make_unique<Sgd>(size, weight_decay);
}

}  // namespace tern::optim
