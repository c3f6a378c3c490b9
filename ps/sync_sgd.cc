// Synchronous SGD (see sync_sgd.h).
#include "ps/sync_sgd.h"

#include <algorithm>
#include <vector>

#include "common/error.h"
#include "optim/clip.h"
#include "tensor/ops.h"

namespace tern::ps {

SyncSgd::SyncSgd(const StrategyOptions& options, const config::OptimConfig& optim,
                 comm::Communicator* comm, int64_t num_params)
    : options_(options),
      comm_(comm),
      map_(num_params, comm->size()),
      mine_(map_.range(comm->rank())),
      optimizer_(MakeShardOptimizer(options, optim, mine_.size())) {
  if (options_.local_sgd) inner_ = optim::MakeOptimizer(optim, num_params);
}

void SyncSgd::Init(const Tensor& params) {
  CHECK_EQ(params.numel(), map_.num_params());
  const Device device = params.device();
  if (device == Device::kCpu) {
    comm_->Broadcast(params.raw(), params.bytes(), 0);
  } else {  // Broadcast moves host bytes: through a host copy, once
    std::vector<float> host(params.numel());
    Tensor h(host.data(), params.shape());
    Copy(params, h);
    comm_->Broadcast(h.raw(), h.bytes(), 0);
    Copy(h, params);
  }
  shard_grad_ = Tensor::Empty(Shape{mine_.size()}, DType::kFloat32, device);
  shard_out_ = Tensor::Empty(Shape{mine_.size()}, DType::kFloat32, device);
  scalar_ = Tensor::Empty(Shape{1}, DType::kFloat32, device);
  if (options_.local_sgd) {
    start_ = Tensor::Empty(Shape{map_.num_params()}, DType::kFloat32, device);
    Copy(params, start_);
  } else if (options_.tau > 1) {
    accum_ = Tensor::Zeros(Shape{map_.num_params()}, DType::kFloat32, device);
  }
  accumulated_ = 0;
}

StepResult SyncSgd::Step(const Tensor& grads, const Tensor& params, const StepInfo& info) {
  CHECK_EQ(grads.numel(), map_.num_params());
  CHECK(shard_out_.defined() && shard_out_.device() == params.device() &&
        grads.device() == params.device())
      << "SyncSgd::Step before Init, or on another device than Init's";
  StepResult result;
  if (options_.local_sgd) {
    inner_->Step(params, grads, InnerOptions(info, grads, options_));
    result.params_changed = true;
    if (++accumulated_ < options_.tau) return result;
    LocalRound(params);
    result.pushed = true;
    return result;
  }
  if (options_.tau == 1) {
    ReduceAndUpdate(grads, params, info, 1);
  } else {
    Add(accum_, grads, accum_);
    if (++accumulated_ < options_.tau) return result;
    ReduceAndUpdate(accum_, params, info, options_.tau);
  }
  result.pushed = result.params_changed = true;
  return result;
}

void SyncSgd::Flush(const Tensor& params, const StepInfo& info) {
  // Every rank has accumulated the same number of mini-batches, so all or none update here.
  if (accumulated_ == 0) return;
  if (options_.local_sgd) {
    LocalRound(params);
  } else {
    ReduceAndUpdate(accum_, params, info, accumulated_);
  }
}

void SyncSgd::LocalRound(const Tensor& params) {
  const int64_t n = mine_.size();
  const int ranks = comm_->size();
  // The outer step starts from the round's start of the own shard.
  if (n > 0)
    Copy(Tensor(start_.f32() + mine_.begin, Shape{n}, DType::kFloat32, start_.device()),
         shard_out_);
  Add(start_, params, start_, 1.f, -1.f);  // start_ now holds the change start - end
  comm_->ReduceScatterSum(start_, map_.counts(), shard_grad_);
  optimizer_->Step(shard_out_, shard_grad_, OuterOptions(options_, 1.f / ranks));
  comm_->AllGather(shard_out_, map_.counts(), params);
  Copy(params, start_);
  accumulated_ = 0;
  CountRound();
}

float SyncSgd::AllReduceScalar(float f) {
  comm_->AllReduceSum(Tensor(&f, Shape{1}));
  return f;
}

void SyncSgd::ReduceAndUpdate(const Tensor& grads, const Tensor& params, const StepInfo& info,
                              int batches) {
  const int64_t n = mine_.size();
  comm_->ReduceScatterSum(grads, map_.counts(), shard_grad_);
  StrategyOptions clip = options_;
  float squared_norm = 0;  // summed over the ranks' shards, as a float
  if (options_.clip_norm > 0 && shard_grad_.device() != Device::kCpu) {
    // On GPUs the shards' squared norms are summed and the shard clipped there (NCCL queues on
    // the kernels' stream): the step never waits for its norm.
    SumSquaresTo(shard_grad_, scalar_);
    comm_->AllReduceSum(scalar_);
    // The sum, clipped at batches x the norm: its mean clipped at the norm, as PushOptions does.
    ClipToNorm(shard_grad_, scalar_, options_.clip_norm * static_cast<float>(batches));
    clip.clip_norm = 0;  // done
  } else if (options_.clip_norm > 0) {
    squared_norm = AllReduceScalar(static_cast<float>(optim::SquaredNorm(shard_grad_)));
  }
  const optim::StepOptions o = PushOptions(info, batches, squared_norm, clip);  // lr x tau
  if (n > 0) {
    Copy(Tensor(params.f32() + mine_.begin, Shape{n}, DType::kFloat32, params.device()),
         shard_out_);
  }
  optimizer_->Step(shard_out_, shard_grad_, o);
  comm_->AllGather(shard_out_, map_.counts(), params);
  if (accum_.defined()) Fill(accum_, 0.f);
  accumulated_ = 0;
  CountRound();
}

void SyncSgd::CountRound() {
  ++stats_.pushes;
  // A ring moves (N - 1) / N of the buffer out of and into each rank, in each collective.
  const int ranks = comm_->size();
  const int64_t moved =
      map_.num_params() * static_cast<int64_t>(sizeof(float)) * (ranks - 1) / std::max(ranks, 1);
  stats_.bytes_pushed += moved;
  stats_.bytes_pulled += moved;
  stats_.entries_sent += map_.num_params();
  stats_.entries_total += map_.num_params();
  stats_.staleness.Record(0);
}

std::string SyncSgd::SaveShardState() const { return optimizer_->SaveState(); }

void SyncSgd::LoadShardState(const std::string& bytes) { optimizer_->LoadState(bytes); }

std::string SyncSgd::SaveWorkerState() const {
  CHECK_EQ(accumulated_, 0) << "SaveWorkerState before Flush";
  return inner_ == nullptr ? std::string() : EncodeInnerState(inner_->SaveState());
}

void SyncSgd::LoadWorkerState(const std::string& bytes) {
  if (inner_ == nullptr && bytes.empty()) return;
  if (inner_ == nullptr)
    Fail("worker state: ", bytes.size(), " bytes, expected none (distributed.local_steps differs ",
         "from the checkpoint's)");
  inner_->LoadState(DecodeInnerState(bytes));
}

}  // namespace tern::ps
