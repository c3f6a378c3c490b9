// The strategy factory (ps/plan.h decides which one a training job runs).
#include "ps/strategy.h"

#include <cmath>

#include "common/error.h"
#include "optim/clip.h"
#include "ps/async_sgd.h"
#include "ps/sync_sgd.h"

namespace tern::ps {

optim::StepOptions PushOptions(const StepInfo& info, int batches, double squared_norm,
                               const StrategyOptions& options) {
  optim::StepOptions o = info.options;
  if (batches == 1) {  // the common case, exactly as a plain optimizer steps
    if (options.clip_norm > 0) o.grad_scale *= optim::ClipScale(squared_norm, options.clip_norm);
    return o;
  }
  const double mean = 1.0 / batches;
  switch (options.tau_lr_scaling) {
    case TauLrScaling::kLinear:
      o.learning_rate *= static_cast<float>(batches);
      break;
    case TauLrScaling::kSqrt:
      o.learning_rate *= static_cast<float>(std::sqrt(static_cast<double>(batches)));
      break;
    case TauLrScaling::kNone:
      break;
  }
  o.grad_scale *= static_cast<float>(mean);
  if (options.clip_norm > 0)
    o.grad_scale *= optim::ClipScale(squared_norm * mean * mean, options.clip_norm);
  return o;
}

std::unique_ptr<optim::Optimizer> MakeShardOptimizer(const StrategyOptions& options,
                                                     const config::OptimConfig& optim,
                                                     int64_t size) {
  if (!options.local_sgd) return optim::MakeOptimizer(optim, size);
  if (options.outer_momentum_delay > 1)
    return optim::MakeDelayedMomentumSgd(size, options.outer_momentum_delay,
                                         options.outer_nesterov);
  return optim::MakeSgd(size, 0.f, options.outer_nesterov);
}

optim::StepOptions InnerOptions(const StepInfo& info, const Tensor& grads,
                                const StrategyOptions& options) {
  return PushOptions(info, 1, options.clip_norm > 0 ? optim::SquaredNorm(grads) : 0.0, options);
}

optim::StepOptions OuterOptions(const StrategyOptions& options, float scale) {
  optim::StepOptions o;
  o.learning_rate = options.outer_learning_rate;
  o.beta1 = options.outer_momentum;
  o.grad_scale = scale;
  return o;
}

namespace {
constexpr char kInnerStateMagic[] = "TERNLSGD";  // 8 bytes
constexpr size_t kInnerStateMagicBytes = sizeof(kInnerStateMagic) - 1;
}  // namespace

std::string EncodeInnerState(const std::string& optimizer_state) {
  return std::string(kInnerStateMagic, kInnerStateMagicBytes) + optimizer_state;
}

bool IsInnerState(const std::string& bytes) {
  return bytes.compare(0, kInnerStateMagicBytes, kInnerStateMagic) == 0;
}

std::string DecodeInnerState(const std::string& bytes) {
  if (!IsInnerState(bytes))
    Fail("worker state: ", bytes.size(), " bytes that are not local SGD's inner optimizer state ",
         "(distributed.local_steps differs from the checkpoint's)");
  return bytes.substr(kInnerStateMagicBytes);
}

std::unique_ptr<Strategy> MakeStrategy(const std::string& kind, const StrategyOptions& options,
                                       const config::OptimConfig& optim, comm::Communicator* comm,
                                       int64_t num_params) {
  if (kind == "async") return std::make_unique<AsyncSgd>(options, optim, comm, num_params);
  if (kind == "sync") return std::make_unique<SyncSgd>(options, optim, comm, num_params);
  Fail("distributed.strategy: unknown strategy '", kind, "' (known: async, sync)");
}

}  // namespace tern::ps
