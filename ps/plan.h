// The one owner of the strategy decision. It reads and checks distributed training's settings
// (distributed.*, with optim.clip_norm and training.seed), and decides which strategy a job runs
// and where it steps: ps::LocalStrategy on one rank with nothing to share, sync SGD over the
// device's collectives (NCCL on GPUs), or the strategy on host memory. The trainer asks the plan;
// nothing else decides, and nothing else checks these fields.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "comm/communicator.h"
#include "configs/tern.pb.h"
#include "ps/strategy.h"
#include "ps/virtual_cluster.h"

namespace tern::ps {

// The distributed settings as the strategies take them.
struct DistributedSettings {
  std::string algorithm;  // distributed.strategy: "async" or "sync"
  StrategyOptions options;
  // distributed.debug_slowdown: the last rank's (or virtual worker's) compute time is
  // multiplied by this (1: off).
  double slowdown = 1;
  VirtualOptions virtual_workers;  // workers 0: a real run
};

// tern::Error naming the first field out of range. tern-train calls it at start-up, before
// anything is allocated.
DistributedSettings ReadDistributedSettings(const config::TrainConfig& config);

// What the trainer knows of where its graph runs.
struct Placement {
  bool host_copy = false;  // the graph's parameters have a host copy (GPU runs, or a test's ask)
  // With host_copy: step the graph's parameters where they live when a strategy can (always on a
  // GPU; on the CPU a test's ask, TrainerOptions::strategy_on_device).
  bool prefer_device = false;
  bool cuda = false;         // the graph runs on a GPU
  bool nccl = false;         // NCCL is available (comm::NcclAvailable)
  bool gpus_shared = false;  // some ranks share a GPU, which NCCL refuses
};

struct StrategyPlan {
  DistributedSettings settings;
  int ranks = 1;
  bool local = false;               // ps::LocalStrategy
  bool steps_on_device = false;     // the strategy steps the graph's parameters where they live
  bool device_collectives = false;  // sync over the device's collectives (NCCL on a GPU run)
  // Set when the plan had to step back from the device path, for the log.
  std::string fallback_warning;

  const StrategyOptions& options() const { return settings.options; }
  bool is_async() const { return settings.algorithm == "async"; }
  // The ranks meet at every update (sync SGD on several ranks): the trainer's per-update
  // collectives (the loss's word count, fp16's skip decision, stop signals) run.
  bool ranks_meet_every_update() const { return ranks > 1 && !is_async(); }
  // Async SGD on several ranks: rank 0 leads and the others follow (trainer/coordinator.h).
  bool led_by_rank0() const { return ranks > 1 && is_async(); }
  // Versions can be stale, so the staleness histogram is worth logging.
  bool has_staleness() const { return ranks > 1 || is_async(); }
  // "2 rank(s), strategy async, tau 2" and how it steps, for the log.
  std::string Describe() const;
};

StrategyPlan PlanStrategy(const DistributedSettings& settings, int ranks,
                          const Placement& placement);

// The strategy the plan names, with the optimizer from `optim` (one per shard). `comm` is the
// job's communicator, or the device's collectives (NCCL) when plan.device_collectives; it must
// outlive the strategy.
std::unique_ptr<Strategy> MakeStrategy(const StrategyPlan& plan, const config::OptimConfig& optim,
                                       comm::Communicator* comm, int64_t num_params);

}  // namespace tern::ps
