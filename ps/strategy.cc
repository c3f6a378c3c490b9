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

std::unique_ptr<Strategy> MakeStrategy(const std::string& kind, const StrategyOptions& options,
                                       const config::OptimConfig& optim, comm::Communicator* comm,
                                       int64_t num_params) {
  if (kind == "async") return std::make_unique<AsyncSgd>(options, optim, comm, num_params);
  if (kind == "sync") return std::make_unique<SyncSgd>(options, optim, comm, num_params);
  Fail("distributed.strategy: unknown strategy '", kind, "' (known: async, sync)");
}

}  // namespace tern::ps
