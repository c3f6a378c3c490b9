// Synchronous SGD (see sync_sgd.h).
#include "ps/sync_sgd.h"

#include <algorithm>
#include <cstring>

#include "common/thread_pool.h"
#include "optim/clip.h"

namespace tern::ps {

SyncSgd::SyncSgd(const StrategyOptions& options, const config::OptimConfig& optim,
                 comm::Communicator* comm, int64_t num_params)
    : options_(options),
      comm_(comm),
      map_(num_params, comm->size()),
      mine_(map_.range(comm->rank())),
      optimizer_(optim::MakeOptimizer(optim, mine_.size())),
      shard_grad_(mine_.size()),
      shard_out_(mine_.size()) {
  if (options_.tau > 1) accum_.assign(num_params, 0.f);
}

void SyncSgd::Init(const Tensor& params) {
  CHECK_EQ(params.numel(), map_.num_params());
  comm_->Broadcast(params.raw(), params.bytes(), 0);
}

StepResult SyncSgd::Step(const Tensor& grads, const Tensor& params, const StepInfo& info) {
  CHECK_EQ(grads.numel(), map_.num_params());
  StepResult result;
  if (options_.tau == 1) {
    ReduceAndUpdate(grads, params, info, 1);
  } else {
    const float* g = grads.f32();
    float* a = accum_.data();
    ParallelFor(map_.num_params(), 1 << 14, [=](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) a[i] += g[i];
    });
    if (++accumulated_ < options_.tau) return result;
    ReduceAndUpdate(Tensor(accum_.data(), Shape{map_.num_params()}), params, info, options_.tau);
  }
  result.pushed = result.params_changed = true;
  return result;
}

void SyncSgd::Flush(const Tensor& params, const StepInfo& info) {
  // Every rank has accumulated the same number of mini-batches, so all or none update here.
  if (accumulated_ > 0) {
    ReduceAndUpdate(Tensor(accum_.data(), Shape{map_.num_params()}), params, info, accumulated_);
  }
}

void SyncSgd::ReduceAndUpdate(const Tensor& grads, const Tensor& params, const StepInfo& info,
                              int batches) {
  const int64_t n = mine_.size();
  Tensor shard_grad(shard_grad_.data(), Shape{n});
  comm_->ReduceScatterSum(grads, map_.counts(), shard_grad);
  optim::StepOptions o = info.options;
  o.learning_rate *= static_cast<float>(batches);  // lr scaled by tau, as in async
  if (options_.clip_norm > 0) {
    float sq = static_cast<float>(optim::SquaredNorm(shard_grad));
    comm_->AllReduceSum(Tensor(&sq, Shape{1}));
    o.grad_scale *= optim::ClipScale(sq, options_.clip_norm);
  }
  if (n > 0) std::memcpy(shard_out_.data(), params.f32() + mine_.begin, n * sizeof(float));
  Tensor shard_out(shard_out_.data(), Shape{n});
  optimizer_->Step(shard_out, shard_grad, o);
  comm_->AllGather(shard_out, map_.counts(), params);
  if (!accum_.empty()) std::fill(accum_.begin(), accum_.end(), 0.f);
  accumulated_ = 0;
  ++stats_.pushes;
  stats_.entries_sent += map_.num_params();
  stats_.entries_total += map_.num_params();
  stats_.staleness.Record(0);
}

std::string SyncSgd::SaveShardState() const { return optimizer_->SaveState(); }

void SyncSgd::LoadShardState(const std::string& bytes) { optimizer_->LoadState(bytes); }

}  // namespace tern::ps
