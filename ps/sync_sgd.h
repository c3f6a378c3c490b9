// Synchronous SGD: the gradients of all ranks are reduce-scattered so each owner holds the sum
// for its shard, the owner updates its shard with its optimizer, and the shards are
// all-gathered so every rank again holds the same parameters. With tau > 1 each rank first
// sums tau mini-batches locally.
//
// It works where the parameters live: with CUDA tensors (and a communicator whose collectives
// take them, NCCL) the sum, the shard's optimizer update and the gather stay on the GPU; the
// buffers are made on the parameters' device at Init.
//
// With local SGD (StrategyOptions::local_sgd, DiLoCo's synchronous rounds) each rank steps its
// own copy with an inner optimizer every mini-batch; every tau-th the ranks' changes since the
// round's start are reduce-scattered, each owner steps the round's start with the outer optimizer
// and their mean, and the shards are all-gathered as the next round's start.
#pragma once

#include <memory>

#include "ps/strategy.h"

namespace tern::ps {

class SyncSgd final : public Strategy {
 public:
  SyncSgd(const StrategyOptions& options, const config::OptimConfig& optim,
          comm::Communicator* comm, int64_t num_params);

  void Init(const Tensor& params) override;
  StepResult Step(const Tensor& grads, const Tensor& params, const StepInfo& info) override;
  void Flush(const Tensor& params, const StepInfo& info) override;
  void Finish() override {}
  const ShardMap& shard_map() const override { return map_; }
  StrategyStats stats() const override { return stats_; }
  std::string SaveShardState() const override;
  void LoadShardState(const std::string& bytes) override;
  std::string SaveWorkerState() const override;
  void LoadWorkerState(const std::string& bytes) override;

 private:
  // Local SGD: the round's outer step of the ranks' changes since start_.
  void LocalRound(const Tensor& params);
  // The stats of an update or a round.
  void CountRound();
  void ReduceAndUpdate(const Tensor& grads, const Tensor& params, const StepInfo& info,
                       int batches);
  // f summed over the ranks (host collectives; GPUs sum in scalar_).
  float AllReduceScalar(float f);

  const StrategyOptions options_;
  comm::Communicator* comm_;
  const ShardMap map_;
  const ShardRange mine_;
  std::unique_ptr<optim::Optimizer> optimizer_;  // the shard's (local SGD: the outer one)
  std::unique_ptr<optim::Optimizer> inner_;      // (n) local SGD: the worker's own
  // On the parameters' device, from Init:
  Tensor start_;  // (n) local SGD: the round's starting parameters; then its change
  Tensor accum_;  // (n) summed gradients of the current tau group (tau > 1)
  int accumulated_ = 0;
  Tensor shard_grad_;  // (shard) reduced gradient
  Tensor shard_out_;   // (shard) updated parameters to gather
  Tensor scalar_;      // (1) the squared norm summed over the ranks, on a GPU
  StrategyStats stats_;
};

}  // namespace tern::ps
