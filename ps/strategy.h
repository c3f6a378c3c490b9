// The worker-facing API of distributed training. Per mini-batch the trainer calls
//   strategy->Step(grads_flat, params_flat, step_info);
// and the strategy decides what travels: async SGD pushes accumulated gradients to the shard
// owners every tau mini-batches and pulls fresh shards; sync SGD reduce-scatters, updates the
// owned shard and all-gathers. With one rank both reduce to a plain optimizer.
//
// Every rank calls Init, Flush, Finish (and the checkpoint calls) at the same points: they
// include collectives.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "comm/communicator.h"
#include "configs/tern.pb.h"
#include "optim/optimizer.h"
#include "ps/shard_map.h"
#include "ps/staleness.h"
#include "tensor/tensor.h"

namespace tern::ps {

struct StepInfo {
  int64_t update = 0;          // 1-based number of this mini-batch on this worker
  optim::StepOptions options;  // lr and betas from the trainer's schedule for this mini-batch
};

struct StepResult {
  bool pushed = false;          // this call sent an update (every tau-th mini-batch)
  bool params_changed = false;  // params_flat now holds newer values
  float sent_fraction = 1.f;    // of the gradient entries in the last push (gradient dropping)
};

// How a push (or sync update) of tau summed mini-batches scales the learning rate
// (distributed.tau_lr_scaling). The sum is pushed as a mean, so for SGD the step per mini-batch
// stays the schedule's with kLinear; Adam divides out the gradient's scale, so its step is about
// the rate itself: kLinear moves as far per mini-batch as tau = 1, in tau times fewer steps.
enum class TauLrScaling { kLinear, kSqrt, kNone };

struct StrategyOptions {
  // Mini-batches per push (async) or update (sync): tau's accumulated gradients, or with
  // local_sgd the local steps H between pushes of their change.
  int tau = 1;
  // Local SGD (distributed.local_steps; docs/distributed.md): each mini-batch steps the worker's
  // own copy through an inner optimizer (optim's); every tau-th pushes start - end, the
  // pseudo-gradient, to the shards, whose optimizer is the outer one below.
  bool local_sgd = false;
  float outer_learning_rate = 0.7f;
  float outer_momentum = 0.9f;
  bool outer_nesterov = true;
  int outer_momentum_delay = 1;  // async: pushes per move of a shard's outer momentum
  TauLrScaling tau_lr_scaling = TauLrScaling::kLinear;
  int64_t local_optimizer_updates = 0;  // async: local-optimizer warm-up for the first K
  float drop_rate = 0.f;                // async: gradient dropping; 0 = dense
  int64_t drop_warmup = 0;              // async: dense pushes for the first updates
  bool drop_pulls = false;  // async with drop_rate: a sparse push gets a sparse reply (pull_drop.h)
  float clip_norm = 0.f;    // global-norm clipping of each pushed/reduced gradient
  bool overlap = true;      // async: communicate on a thread while the worker computes
  // async with overlap: after a push, wait for its round up to this fraction of the time the
  // worker computed since its previous Step; when the round is back by then, the next gradient
  // is computed on the fresh parameters. 0: never wait.
  double overlap_wait = 0;
  uint64_t seed = 1;  // gradient-dropping sample
  // async: where this rank's shard (parameters and optimizer state) lives and is updated. cuda
  // on a GPU run; pushes and pulls still travel through host memory.
  Device shard_device = Device::kCpu;
};

// distributed.overlap "auto": StrategyOptions::overlap_wait.
inline constexpr double kAutoOverlapWait = 0.1;

struct StrategyStats {
  StalenessHistogram staleness;  // of this rank's shard
  int64_t pushes = 0;            // by this rank
  int64_t entries_sent = 0;      // gradient entries this rank sent (all shards)
  int64_t entries_total = 0;     // ... out of
  int64_t bytes_sent = 0;        // point-to-point payload bytes this rank sent
  // This rank as a worker: the bytes of its pushes to other ranks' shards (requests, gradients)
  // and of the fresh shards it pulled from them. Sync SGD counts its reduce-scatter's and
  // all-gather's payload as a ring moves it: (N - 1) / N of the buffer each way.
  int64_t bytes_pushed = 0;
  int64_t bytes_pulled = 0;
};

class Strategy {
 public:
  virtual ~Strategy() = default;

  // params (n): the initial parameters; rank 0's are broadcast so every rank starts equal.
  virtual void Init(const Tensor& params) = 0;
  // grads (n): this mini-batch's gradient (read, not kept). params (n): this worker's copy,
  // refreshed in place when newer values are available.
  virtual StepResult Step(const Tensor& grads, const Tensor& params, const StepInfo& info) = 0;
  // Pushes anything accumulated, finishes communication and pulls the newest parameters into
  // params (before validation and checkpoints).
  virtual void Flush(const Tensor& params, const StepInfo& info) = 0;
  // Stops communication threads; collective. Called by the destructor if not before.
  virtual void Finish() = 0;

  virtual const ShardMap& shard_map() const = 0;
  virtual StrategyStats stats() const = 0;
  // This rank's shard (parameters, version, optimizer state) for checkpoints.
  virtual std::string SaveShardState() const = 0;
  virtual void LoadShardState(const std::string& bytes) = 0;
  // This worker's own state (the gradient-dropping residual; empty when there is none). Call
  // after Flush, which leaves nothing accumulated.
  virtual std::string SaveWorkerState() const { return std::string(); }
  virtual void LoadWorkerState(const std::string& bytes) {}
};

// What a push (async) or an update (sync) of the sum of `batches` mini-batch gradients carries:
// the schedule's options for the last of them, a gradient scale of 1 / batches (the mean is
// applied), the learning rate scaled for the batch count (options.tau_lr_scaling), and the
// global-norm clip of that mean (squared_norm: the sum's, with options.clip_norm). The real
// strategies and the virtual workers (virtual_cluster.h) all build their updates here.
optim::StepOptions PushOptions(const StepInfo& info, int batches, double squared_norm,
                               const StrategyOptions& options);

// A shard's optimizer: local SGD's outer one (Nesterov or heavy-ball SGD, its momentum delayed
// for async pushes), else optim's.
std::unique_ptr<optim::Optimizer> MakeShardOptimizer(const StrategyOptions& options,
                                                     const config::OptimConfig& optim,
                                                     int64_t size);
// Local SGD: what an inner step of the worker's own optimizer takes: the schedule's options for
// this mini-batch, its gradient clipped as a plain step's (options.clip_norm).
optim::StepOptions InnerOptions(const StepInfo& info, const Tensor& grads,
                                const StrategyOptions& options);
// Local SGD: what a pseudo-gradient's outer step takes: the outer rate and momentum, the
// pseudo-gradient times `scale` (sync: 1 / the workers, their mean).
optim::StepOptions OuterOptions(const StrategyOptions& options, float scale);

// Local SGD's worker state (Strategy::SaveWorkerState): the inner optimizer's, tagged, so that a
// checkpoint's worker file says what it holds. Decode throws tern::Error on other bytes.
std::string EncodeInnerState(const std::string& optimizer_state);
std::string DecodeInnerState(const std::string& bytes);
bool IsInnerState(const std::string& bytes);

// The strategy of `kind`, "async" or "sync", with settings already checked (ps/plan.h reads
// and checks them from a config); the optimizer from optim (one per shard). `comm` must outlive
// the strategy.
std::unique_ptr<Strategy> MakeStrategy(const std::string& kind, const StrategyOptions& options,
                                       const config::OptimConfig& optim, comm::Communicator* comm,
                                       int64_t num_params);

}  // namespace tern::ps
