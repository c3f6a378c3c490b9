// SGD with (heavy-ball) momentum and decoupled weight decay; the elementwise update is the tensor
// kernel table's (tensor/ops.h SgdUpdate), on the spans' device.
#include <vector>

#include "optim/optimizer.h"
#include "optim/state_io.h"
#include "tensor/ops.h"

namespace tern::optim {
namespace {

class Sgd final : public Optimizer {
 public:
  Sgd(int64_t size, float weight_decay) : Optimizer(size), weight_decay_(weight_decay), u_(size) {}

  void StepAndCopy(const Tensor& params, const Tensor& grads, const StepOptions& o,
                   float* out) override {
    CheckArgs(params, grads);
    const Tensor gate = CountStep(o, params.device());
    SgdArgs a;
    a.learning_rate = o.learning_rate;
    a.momentum = o.beta1;
    a.grad_scale = o.grad_scale;
    a.decay = o.learning_rate * weight_decay_;
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
  internal::StateBuffer u_;        // (n) momentum buffer
  bool momentum_dropped_ = false;  // u_ is stale (the last step had no momentum): reads as 0
};

}  // namespace

std::unique_ptr<Optimizer> MakeSgd(int64_t size, float weight_decay) {
  CHECK_GE(size, 0);
  return std::make_unique<Sgd>(size, weight_decay);
}

}  // namespace tern::optim
