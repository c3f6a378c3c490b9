// Adam with bias correction and decoupled weight decay; the elementwise update is the tensor
// kernel table's (tensor/ops.h AdamUpdate), on the spans' device.
#include <cmath>

#include "optim/optimizer.h"
#include "optim/state_io.h"
#include "tensor/ops.h"

namespace tern::optim {
namespace {

class Adam final : public Optimizer {
 public:
  Adam(int64_t size, const AdamOptions& options)
      : Optimizer(size), options_(options), m_(size), v_(size) {}

  void StepAndCopy(const Tensor& params, const Tensor& grads, const StepOptions& o,
                   float* out) override {
    CheckArgs(params, grads);
    const Tensor gate = CountStep(o, params.device());
    AdamArgs a;
    a.learning_rate = o.learning_rate;
    a.beta1 = o.beta1;
    a.beta2 = o.beta2;
    a.epsilon = options_.epsilon;
    a.grad_scale = o.grad_scale;
    a.decay = o.learning_rate * options_.weight_decay;
    // Bias corrections with the current betas (after a cooldown the new betas apply to t); a
    // gated step's come from its gate, which knows the steps skipped.
    a.inv_bc1 = static_cast<float>(1.0 / (1.0 - std::pow(double{o.beta1}, steps_)));
    a.inv_bc2 = static_cast<float>(1.0 / (1.0 - std::pow(double{o.beta2}, steps_)));
    AdamUpdate(params, grads, m_.On(params.device()), v_.On(params.device()), a, out, gate);
  }

  std::string SaveState() const override {
    return internal::EncodeState(internal::StateKind::kAdam, size_, steps(),
                                 {&m_.Host(), &v_.Host()});
  }
  void LoadState(const std::string& bytes) override {
    internal::DecodeState(bytes, internal::StateKind::kAdam, size_, &steps_,
                          {m_.MutableHost(), v_.MutableHost()});
    ResetGate();
    m_.Written();
    v_.Written();
  }
  int64_t state_size() const override { return 2 * size_; }
  const char* name() const override { return "adam"; }

 private:
  AdamOptions options_;
  internal::StateBuffer m_;  // (n) first moment
  internal::StateBuffer v_;  // (n) second moment
};

}  // namespace

std::unique_ptr<Optimizer> MakeAdam(int64_t size, const AdamOptions& options) {
  CHECK_GE(size, 0);
  return std::make_unique<Adam>(size, options);
}

}  // namespace tern::optim
