// Shared argument checks and the config-driven optimizer factory.
#include "optim/optimizer.h"

#include "common/error.h"
#include "tensor/ops.h"

namespace tern::optim {

void Optimizer::CheckArgs(const Tensor& params, const Tensor& grads) const {
  CHECK(params.defined() && grads.defined());
  CHECK_EQ(params.rank(), 1) << "optimizer works on flat spans, got " << params.shape().ToString();
  CHECK(params.shape() == grads.shape())
      << params.shape().ToString() << " vs " << grads.shape().ToString();
  CHECK_EQ(params.numel(), size_) << "span size differs from the optimizer's";
  CHECK(params.dtype() == DType::kFloat32 && grads.dtype() == DType::kFloat32);
  CHECK(params.device() == grads.device());
}

int64_t Optimizer::steps() const {
  if (!gate_.defined()) return steps_;
  return steps_ - static_cast<int64_t>(gate_.ToVector()[kStepSkipped]);
}

Tensor Optimizer::CountStep(const StepOptions& options, Device device) {
  if (!options.apply.defined()) {
    // An ungated step after gated ones: the skipped ones leave the count (a wait, once).
    if (gate_.defined()) {
      steps_ = steps();
      gate_ = Tensor();
    }
    ++steps_;
    return Tensor();
  }
  ++steps_;
  if (!gate_.defined() || gate_.device() != device) {
    CHECK(!gate_.defined()) << "gated steps on two devices";
    gate_ = Tensor::Zeros(Shape{kStepGateSize}, DType::kFloat32, device);
  }
  StepGate(options.apply, gate_, options.beta1, options.beta2, steps_);
  return gate_;
}

std::unique_ptr<Optimizer> MakeOptimizer(const config::OptimConfig& config, int64_t size) {
  if (config.optimizer() == "adam") {
    AdamOptions options;
    if (config.epsilon() > 0) options.epsilon = config.epsilon();
    options.weight_decay = config.weight_decay();
    return MakeAdam(size, options);
  }
  if (config.optimizer() == "sgd") return MakeSgd(size, config.weight_decay());
  Fail("optim.optimizer: unknown optimizer '", config.optimizer(), "' (known: adam, sgd)");
}

}  // namespace tern::optim
