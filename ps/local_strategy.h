// One rank with nothing to share: the optimizer steps the worker's parameters in place, on the
// device they live on, so a single-GPU run keeps its parameters and optimizer state on the GPU
// with no host round trip per update. It stands in for async or sync SGD on one rank without
// tau, gradient dropping or local optimizers (ps/plan.h decides), step for step equal to them
// and with the same checkpoint bytes, so a run can resume on either.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "ps/strategy.h"

namespace tern::ps {

class LocalStrategy final : public Strategy {
 public:
  // kind: "async" or "sync", whose clipping and checkpoint format it keeps.
  LocalStrategy(const std::string& kind, const StrategyOptions& options,
                const config::OptimConfig& optim, int64_t num_params);

  void Init(const Tensor& params) override;
  StepResult Step(const Tensor& grads, const Tensor& params, const StepInfo& info) override;
  void Flush(const Tensor& params, const StepInfo& info) override;
  void Finish() override {}
  const ShardMap& shard_map() const override { return map_; }
  StrategyStats stats() const override { return stats_; }
  std::string SaveShardState() const override;
  void LoadShardState(const std::string& bytes) override;

 private:
  const bool async_;
  const StrategyOptions options_;
  const ShardMap map_;
  std::unique_ptr<optim::Optimizer> optimizer_;
  Tensor params_;  // the worker's parameters (any device), from Init/Step/Flush
  uint64_t version_ = 0;
  StrategyStats stats_;
};

}  // namespace tern::ps
