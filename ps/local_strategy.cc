// The one-rank strategy (see local_strategy.h).
#include "ps/local_strategy.h"

#include <vector>

#include "common/error.h"
#include "optim/clip.h"
#include "ps/shard.h"
#include "tensor/ops.h"

namespace tern::ps {

LocalStrategy::LocalStrategy(const std::string& kind, const StrategyOptions& options,
                             const config::OptimConfig& optim, int64_t num_params)
    : async_(kind == "async"),
      options_(options),
      map_(num_params, 1),
      optimizer_(optim::MakeOptimizer(optim, num_params)) {
  CHECK(kind == "async" || kind == "sync") << "local strategy for '" << kind << "'";
  CHECK(options.tau == 1 && options.drop_rate == 0 && options.local_optimizer_updates == 0)
      << "the local strategy has no tau, gradient dropping or local optimizers";
}

void LocalStrategy::Init(const Tensor& params) {
  CHECK_EQ(params.numel(), map_.num_params());
  params_ = params;
}

StepResult LocalStrategy::Step(const Tensor& grads, const Tensor& params, const StepInfo& info) {
  CHECK_EQ(grads.numel(), map_.num_params());
  params_ = params;
  optim::StepOptions o = info.options;
  if (options_.clip_norm > 0 && grads.device() != Device::kCpu) {
    // On a GPU the norm and the clip stay there: the step queues on without waiting for it.
    ClipByNorm(grads, options_.clip_norm);
  } else if (options_.clip_norm > 0) {
    // As each strategy does it: async clips with the norm in double, sync (summed over ranks
    // as a float) in float.
    const double sq = optim::SquaredNorm(grads);
    o.grad_scale *= optim::ClipScale(async_ ? sq : static_cast<float>(sq), options_.clip_norm);
  }
  optimizer_->Step(params, grads, o);
  ++version_;
  ++stats_.pushes;
  stats_.entries_sent += map_.num_params();
  stats_.entries_total += map_.num_params();
  stats_.staleness.Record(0);
  StepResult result;
  result.pushed = result.params_changed = true;
  return result;
}

void LocalStrategy::Flush(const Tensor& params, const StepInfo& /*info*/) { params_ = params; }

std::string LocalStrategy::SaveShardState() const {
  if (!async_) return optimizer_->SaveState();  // sync's shard state
  // Async's: the shard's parameters, its version and its optimizer state.
  const int64_t n = map_.num_params();
  std::vector<float> host(n);
  if (n > 0) {
    CHECK(params_.defined()) << "SaveShardState before Init";
    Copy(params_, Tensor(host.data(), Shape{n}));
  }
  return Shard::EncodeState(host.data(), n, version_, optimizer_->SaveState());
}

void LocalStrategy::LoadShardState(const std::string& bytes) {
  if (!async_) {
    optimizer_->LoadState(bytes);
    return;
  }
  Shard::StateParts parts = Shard::DecodeState(bytes);
  if (static_cast<int64_t>(parts.params.size()) != map_.num_params()) {
    Fail("shard state: holds ", parts.params.size(), " parameters, the model has ",
         map_.num_params());
  }
  version_ = parts.version;
  optimizer_->LoadState(parts.optimizer);
  // The checkpoint's parameters are the worker's too (the trainer loaded them before Init).
}

}  // namespace tern::ps
