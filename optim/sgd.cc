// SGD with (heavy-ball or Nesterov) momentum and decoupled weight decay; the elementwise update is
// the tensor kernel table's (tensor/ops.h SgdUpdate), on the spans' device. And local SGD's outer
// optimizer with delayed momentum, on the host.
#include <vector>

#include "common/error.h"
#include "common/thread_pool.h"
#include "optim/optimizer.h"
#include "optim/state_io.h"
#include "tensor/ops.h"

namespace tern::optim {
namespace {

class Sgd final : public Optimizer {
 public:
  Sgd(int64_t size, float weight_decay, bool nesterov)
      : Optimizer(size), weight_decay_(weight_decay), nesterov_(nesterov), u_(size) {}

  void StepAndCopy(const Tensor& params, const Tensor& grads, const StepOptions& o,
                   float* out) override {
    CheckArgs(params, grads);
    const Tensor gate = CountStep(o, params.device());
    SgdArgs a;
    a.learning_rate = o.learning_rate;
    a.momentum = o.beta1;
    a.grad_scale = o.grad_scale;
    a.decay = o.learning_rate * weight_decay_;
    a.nesterov = nesterov_;
    // Without momentum the buffer would only hold the last gradient: it is not kept (as in
    // PyTorch), which saves two of the step's passes over memory; momentum turned on later
    // starts from zero.
    const bool keep = a.momentum != 0.f;
    const Tensor u = u_.On(params.device());
    if (keep && momentum_dropped_) Fill(u, 0.f);
    momentum_dropped_ = !keep;
    SgdUpdate(params, grads, u, a, out, gate);
  }

  std::string SaveState() const override {
    if (momentum_dropped_) {
      const std::vector<float> zeros(size_, 0.f);
      return internal::EncodeState(internal::StateKind::kSgd, size_, steps(), {&zeros});
    }
    return internal::EncodeState(internal::StateKind::kSgd, size_, steps(), {&u_.Host()});
  }
  void LoadState(const std::string& bytes) override {
    internal::DecodeState(bytes, internal::StateKind::kSgd, size_, &steps_, {u_.MutableHost()});
    ResetGate();
    u_.Written();
    momentum_dropped_ = false;
  }
  int64_t state_size() const override { return size_; }
  const char* name() const override { return "sgd"; }

 private:
  float weight_decay_;
  bool nesterov_;
  internal::StateBuffer u_;        // (n) momentum buffer
  bool momentum_dropped_ = false;  // u_ is stale (the last step had no momentum): reads as 0
};

class DelayedMomentumSgd final : public Optimizer {
 public:
  DelayedMomentumSgd(int64_t size, int delay, bool nesterov)
      : Optimizer(size), delay_(delay), nesterov_(nesterov), u_(size, 0.f), b_(size, 0.f) {}

  void StepAndCopy(const Tensor& params, const Tensor& grads, const StepOptions& o,
                   float* out) override {
    CheckArgs(params, grads);
    CHECK(params.device() == Device::kCpu) << "delayed-momentum SGD steps host spans only";
    CHECK(!o.apply.defined()) << "delayed-momentum SGD takes no gated steps";
    ++steps_;
    const bool moves = steps_ % delay_ == 0;  // the momentum's turn
    const float lr = o.learning_rate, mu = o.beta1, scale = o.grad_scale;
    const float inv_delay = 1.f / static_cast<float>(delay_);
    const bool nesterov = nesterov_;
    float* p = params.f32();
    const float* g = grads.f32();
    float* u = u_.data();
    float* b = b_.data();
    ParallelFor(size_, 1 << 14, [=](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        const float gi = g[i] * scale;
        float step = gi * inv_delay;
        b[i] += gi;
        if (moves) {
          const float before = u[i];
          u[i] = mu * before + b[i] * inv_delay;
          step += mu * (nesterov ? u[i] : before);
          b[i] = 0.f;
        }
        p[i] -= lr * step;
        if (out != nullptr) out[i] = p[i];
      }
    });
  }

  std::string SaveState() const override {
    return internal::EncodeState(internal::StateKind::kDelayedMomentumSgd, size_, steps_,
                                 {&u_, &b_});
  }
  void LoadState(const std::string& bytes) override {
    internal::DecodeState(bytes, internal::StateKind::kDelayedMomentumSgd, size_, &steps_,
                          {&u_, &b_});
  }
  int64_t state_size() const override { return 2 * size_; }
  const char* name() const override { return "delayed-momentum sgd"; }

 private:
  const int delay_;
  const bool nesterov_;
  std::vector<float> u_;  // (n) momentum
  std::vector<float> b_;  // (n) the gradients since the momentum last moved
};

}  // namespace

std::unique_ptr<Optimizer> MakeSgd(int64_t size, float weight_decay, bool nesterov) {
  CHECK_GE(size, 0);
  return std::make_unique<Sgd>(size, weight_decay, nesterov);
}

std::unique_ptr<Optimizer> MakeDelayedMomentumSgd(int64_t size, int delay, bool nesterov) {
  CHECK_GE(size, 0);
  CHECK_GE(delay, 1);
  return std::make_unique<DelayedMomentumSgd>(size, delay, nesterov);
}

}  // namespace tern::optim
