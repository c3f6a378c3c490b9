// N workers of asynchronous (or synchronous) SGD simulated in one process, deterministically.
//
// A sweep on a 2-core machine cannot run 8 or 16 real workers without the operating system's
// scheduler, and everyone else's load, deciding who pushes when. Here the workers' gradients are
// computed one at a time by the caller (the trainer, on the real model and data), while this
// class keeps each worker's copy of the parameters and plays the parameter server with the real
// parts: one ps::Shard per worker (parameters, optimizer state, versions, staleness histogram),
// a GradientDropper per worker, and the push options of the real strategies (ps::PushOptions).
// Time is simulated: a mini-batch takes the compute time the caller measured or modelled
// (times the slowdown on the last worker), and a message takes its bytes over the link rate
// plus the link's delay, each host's link carrying one message at a time in each direction
// (ps/virtual_links.h).
// Events (a gradient done, a push reaching its shard, a reply reaching its worker) are handled
// in time order, ties by the order they were scheduled, so the same inputs give the same run.
//
// What a worker does at the end of a mini-batch is AsyncSgd::Step's: accumulate; every tau
// mini-batches push the sum (its own shard at once, the others' over the link) and pull the
// fresh shards (sparse replies with distributed.drop_pulls, from each shard's PullDropper), with
// distributed.overlap deciding whether it waits for them (never), goes on (always) or waits up to a
// tenth of its compute time (auto). Sync: every worker computes tau mini-batches on the same
// parameters, the sums are added in worker order, each shard steps, and the update ends after the
// slowest worker plus a ring all-reduce over the link.
//
// Local SGD (StrategyOptions::local_sgd): every mini-batch steps the worker's own copy through its
// local optimizer; async pushes carry the copy's change since the group began (start - end) to
// the shards' outer optimizers, and sync rounds sum every worker's change and step the shards
// with its mean; each worker then starts from the shards' values.
//
// Not modelled: the shard owner's optimizer step and the copies (no time), contention for the
// host's memory or cores, message headers' time on the wire (their bytes are counted).
#pragma once

#include <cstdint>
#include <memory>
#include <queue>
#include <string>
#include <vector>

#include "configs/tern.pb.h"
#include "optim/optimizer.h"
#include "ps/grad_drop.h"
#include "ps/local_warmup.h"
#include "ps/pull_drop.h"
#include "ps/shard.h"
#include "ps/shard_map.h"
#include "ps/staleness.h"
#include "ps/strategy.h"
#include "ps/virtual_links.h"

namespace tern::ps {

struct VirtualOptions {
  int workers = 0;                   // 0: no virtual workers
  double seconds_per_token = 0;      // 0: the caller's measured compute time
  double link_bytes_per_second = 0;  // each host's link, each direction; 0: unlimited
  double link_delay_seconds = 0;     // one way
  double slowdown = 1;               // the last worker computes this many times slower
};

class VirtualCluster {
 public:
  // algorithm: "async" or "sync"; options as the real strategy takes them.
  VirtualCluster(const std::string& algorithm, const StrategyOptions& options,
                 const VirtualOptions& virtual_options, const config::OptimConfig& optim,
                 int64_t num_params);
  ~VirtualCluster();
  VirtualCluster(const VirtualCluster&) = delete;
  VirtualCluster& operator=(const VirtualCluster&) = delete;

  // params (n): every worker's and shard's starting values.
  void Init(const float* params);

  struct Event {
    enum class Kind {
      kComputeGradient,  // compute `worker`'s next mini-batch gradient on params(worker), Submit
      // `worker`'s mini-batch finished at `time` (the state is that moment's). Sync: once per
      // update of tau mini-batches; with local SGD once per mini-batch, every worker's of a
      // local step together once all have taken it.
      kStepDone,
    };
    Kind kind;
    int worker = 0;
    double time = 0;  // simulated seconds
  };
  // Handles the simulation's events in time order until one needs the caller.
  Event Next();
  // The parameters (n) the worker computes its next gradient on (valid until Submit).
  const float* params(int worker) const;
  // grad (n): the worker's mini-batch gradient from Next()'s kComputeGradient, which took
  // compute_seconds (the slowdown is applied here); info: its update number and the schedule's
  // options. Sync: the workers of one update in the order Next() asked for them.
  void Submit(int worker, const float* grad, double compute_seconds, const StepInfo& info);
  // Where the worker's next gradient (Next()'s kComputeGradient) may be written (n floats) so
  // that Submit takes it where it lies instead of copying it; null where Submit must be given
  // another buffer (a sync update's later mini-batches, which it adds; sync local SGD).
  float* gradient_buffer(int worker);

  // The end of a run: lets every mini-batch under way finish and every push land, pushes what
  // each worker has accumulated of a tau group (as a real worker's Flush does; sync local SGD:
  // a shorter round of the local steps taken) and lets that land too. Starts no mini-batch; the
  // caller computes no more gradients after it.
  void Finish();

  // The global model now: every shard's parameters (pushes still travelling are not in it).
  void ReadGlobal(float* out) const;

  struct WorkerStats {
    int64_t pushes = 0;
    int64_t bytes_pushed = 0;   // to other workers' shards: headers, values (and indices)
    int64_t bytes_pulled = 0;   // fresh shards back: versions and values
    float sent_fraction = 1.f;  // of the entries in its last push
  };
  WorkerStats stats(int worker) const;
  StalenessHistogram staleness(int shard) const;
  int workers() const { return virtual_.workers; }
  const ShardMap& shard_map() const { return map_; }
  // Checkpoint parts in the real strategies' formats: shard s's state (async: Shard::SaveState;
  // sync: its optimizer state) and worker w's (the gradient-dropping residual, or empty).
  std::string SaveShardState(int shard) const;
  std::string SaveWorkerState(int worker) const;

 private:
  struct Worker;
  struct Queued {
    double time;
    uint64_t seq;
    enum class Kind { kComputeDone, kPushArrives, kReplyArrives, kWaitOver } kind;
    int worker, shard;
    uint64_t token;  // kWaitOver: the wait it ends
    bool operator>(const Queued& o) const { return time != o.time ? time > o.time : seq > o.seq; }
  };

  void Schedule(double time, Queued::Kind kind, int worker, int shard = 0, uint64_t token = 0);
  // The worker's side of a finished mini-batch (AsyncSgd::Step), at `time`.
  void StepDone(int w, double time);
  void Push(int w, double time);
  void RoundDone(int w, double time);
  bool TakeFresh(Worker& worker);
  // At the end of a mini-batch: the fresh shards if back, then the local warm-up's step.
  void TakeFreshAndStepLocally(Worker& worker);
  // The worker's local optimizer steps its copy with grad (n).
  void StepLocally(Worker& worker, const float* grad);
  void SyncUpdate();
  void Handle(const Queued& e);

  const bool async_;
  const StrategyOptions options_;
  const VirtualOptions virtual_;
  const ShardMap map_;
  std::vector<std::unique_ptr<Shard>> shards_;
  std::vector<std::unique_ptr<PullDropper>> pull_droppers_;  // per shard; empty: dense pulls
  std::vector<float> updated_;                               // a shard's values for a sparse reply
  SparseGradient picked_;
  std::vector<Worker> workers_;  // (workers)
  std::priority_queue<Queued, std::vector<Queued>, std::greater<Queued>> queue_;
  uint64_t seq_ = 0;
  VirtualLinks links_;
  std::vector<Event> ready_;  // kStepDone events for the caller
  // Sync: the update under way.
  double sync_start_ = 0;
  int sync_submitted_ = 0;
  std::vector<float> sync_sum_, sync_out_;
};

}  // namespace tern::ps
