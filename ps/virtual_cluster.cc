// Virtual workers (see virtual_cluster.h).
#include "ps/virtual_cluster.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "common/error.h"
#include "optim/clip.h"
#include "ps/protocol.h"

namespace tern::ps {

// One worker: what AsyncSgd keeps on one rank's worker side, without threads.
struct VirtualCluster::Worker {
  enum class State {
    kNeedsGradient,    // its next mini-batch starts at `start`; the caller computes it
    kComputing,        // its kComputeDone is queued
    kWaitingToPush,    // a push is due, but its previous round is still out
    kWaitingForRound,  // after a push: waiting for the round (overlap never / auto)
  };
  State state = State::kNeedsGradient;
  double start = 0;             // when its current (or next) mini-batch began
  double compute_seconds = 0;   // its last mini-batch's, slowdown included
  std::vector<float> params;    // (n) what it computes on
  std::vector<float> grad;      // (n) the submitted gradient, until its kComputeDone
  std::vector<float> accum;     // (n) the tau group's sum
  std::vector<float> outgoing;  // (n) the dense push in flight
  std::vector<float> fresh;     // (n) the round's pulled shards
  std::vector<SparseGradient> outgoing_sparse;                                  // per shard
  std::vector<uint64_t> params_versions, group_base, job_base, fresh_versions;  // per shard
  int accumulated = 0;
  StepInfo info;  // of the submitted mini-batch
  optim::StepOptions job_options;
  bool job_sparse = false;
  int replies_pending = 0;
  bool round_out = false;    // a push's round is travelling
  bool fresh_ready = false;  // a finished round's shards wait to be taken
  uint64_t wait_token = 0;   // tells a stale kWaitOver from the current wait
  std::unique_ptr<GradientDropper> dropper;
  std::unique_ptr<LocalWarmup> local;  // null without local-optimizer warm-up
  WorkerStats stats;
};

VirtualCluster::VirtualCluster(const std::string& algorithm, const StrategyOptions& options,
                               const VirtualOptions& virtual_options,
                               const config::OptimConfig& optim, int64_t num_params)
    : async_(algorithm == "async"),
      options_(options),
      virtual_(virtual_options),
      map_(num_params, virtual_options.workers),
      links_(std::max(virtual_options.workers, 1), virtual_options.link_bytes_per_second,
             virtual_options.link_delay_seconds) {
  CHECK(algorithm == "async" || algorithm == "sync") << "virtual workers for '" << algorithm << "'";
  CHECK_GE(virtual_.workers, 1);
  CHECK_GE(options_.tau, 1);
  const int n = virtual_.workers;
  // Local SGD's workers (sync or async) step their copies through a local optimizer forever.
  const int64_t local_updates = options_.local_sgd ? INT64_MAX
                                : async_           ? options_.local_optimizer_updates
                                                   : 0;
  for (int s = 0; s < n; ++s) {
    const ShardRange& r = map_.range(s);
    shards_.push_back(std::make_unique<Shard>(r, MakeShardOptimizer(options_, optim, r.size())));
    if (async_ && options_.drop_pulls) {
      CHECK_GT(options_.drop_rate, 0.f) << "dropped pulls without gradient dropping";
      pull_droppers_.push_back(std::make_unique<PullDropper>(r.size(), n, options_.drop_rate,
                                                             PullDropSeed(options_.seed, s)));
    }
  }
  workers_.resize(n);
  for (int w = 0; w < n; ++w) {
    Worker& k = workers_[w];
    k.params.assign(num_params, 0.f);
    k.grad.assign(num_params, 0.f);
    k.accum.assign(num_params, 0.f);
    if (async_) {
      k.outgoing.assign(num_params, 0.f);
      k.fresh.assign(num_params, 0.f);
    }
    k.params_versions.assign(n, 0);
    k.group_base.assign(n, 0);
    k.job_base.assign(n, 0);
    k.fresh_versions.assign(n, 0);
    if (async_ && options_.drop_rate > 0) {
      // The seed of rank w's dropper in a real run.
      k.dropper = std::make_unique<GradientDropper>(num_params, options_.drop_rate,
                                                    options_.seed + static_cast<uint64_t>(w));
    }
    if (local_updates > 0)
      k.local = std::make_unique<LocalWarmup>(optim, num_params, local_updates);
  }
  if (!async_) {
    sync_sum_.assign(num_params, 0.f);
    sync_out_.assign(num_params, 0.f);
  }
}

VirtualCluster::~VirtualCluster() = default;

void VirtualCluster::Init(const float* params) {
  for (int s = 0; s < map_.num_shards(); ++s) {
    shards_[s]->Init(params + map_.range(s).begin);
    if (!pull_droppers_.empty()) pull_droppers_[s]->Init(params + map_.range(s).begin);
  }
  for (Worker& k : workers_) {
    std::memcpy(k.params.data(), params, k.params.size() * sizeof(float));
    k.state = Worker::State::kNeedsGradient;
    k.start = 0;
  }
}

void VirtualCluster::Schedule(double time, Queued::Kind kind, int worker, int shard,
                              uint64_t token) {
  queue_.push(Queued{time, seq_++, kind, worker, shard, token});
}

VirtualCluster::Event VirtualCluster::Next() {
  for (;;) {
    if (!ready_.empty()) {
      const Event e = ready_.front();
      ready_.erase(ready_.begin());
      return e;
    }
    if (!async_) {
      // Sync: the workers of an update in turn, all from the update's start.
      return Event{Event::Kind::kComputeGradient, sync_submitted_ % virtual_.workers, sync_start_};
    }
    // The earliest mini-batch to start. Its gradient depends only on its worker's parameters,
    // which change only at that worker's own step ends, so it may be computed as soon as no
    // earlier event is left (a later one cannot change it).
    int next = -1;
    for (int w = 0; w < virtual_.workers; ++w) {
      const Worker& k = workers_[w];
      if (k.state == Worker::State::kNeedsGradient && (next < 0 || k.start < workers_[next].start))
        next = w;
    }
    if (next >= 0 && (queue_.empty() || workers_[next].start <= queue_.top().time))
      return Event{Event::Kind::kComputeGradient, next, workers_[next].start};
    CHECK(!queue_.empty()) << "virtual workers: nothing to compute and nothing under way";
    const Queued e = queue_.top();
    queue_.pop();
    Handle(e);
  }
}

void VirtualCluster::Submit(int w, const float* grad, double compute_seconds,
                            const StepInfo& info) {
  Worker& k = workers_[w];
  const double slow = w == virtual_.workers - 1 ? std::max(virtual_.slowdown, 1.0) : 1.0;
  k.compute_seconds = compute_seconds * slow;
  const int64_t n = map_.num_params();
  if (!async_) {
    // Sync: the worker's mini-batches run one after another on the update's parameters; the
    // update ends with the slowest worker.
    CHECK_EQ(w, sync_submitted_ % virtual_.workers) << "sync workers out of turn";
    const int round = sync_submitted_ / virtual_.workers;  // which of the tau mini-batches
    if (round == 0) k.start = sync_start_;
    k.start += k.compute_seconds;
    float* a = k.accum.data();
    if (options_.local_sgd) {  // each worker steps its own copy
      k.info = info;
      StepLocally(k, grad);
    } else if (round == 0) {
      if (grad != a) std::memcpy(a, grad, n * sizeof(float));
    } else {
      for (int64_t i = 0; i < n; ++i) a[i] += grad[i];
    }
    k.info = info;  // each shard steps with its owner's options, as a sync rank does
    if (++sync_submitted_ == virtual_.workers * options_.tau) {
      SyncUpdate();
    } else if (options_.local_sgd && sync_submitted_ % virtual_.workers == 0) {
      // Each local step is a mini-batch done, on the worker's own copy, told once every worker
      // has taken it: a run that stops there has every worker at the same step, as real ranks
      // are, and Finish ends the round as their Flush does. The round's last ends with the
      // update.
      for (int v = 0; v < virtual_.workers; ++v)
        ready_.push_back(Event{Event::Kind::kStepDone, v, workers_[v].start});
    }
    return;
  }
  CHECK(k.state == Worker::State::kNeedsGradient) << "Submit for worker " << w << " unasked";
  if (grad != k.grad.data()) std::memcpy(k.grad.data(), grad, n * sizeof(float));
  k.info = info;
  k.state = Worker::State::kComputing;
  Schedule(k.start + k.compute_seconds, Queued::Kind::kComputeDone, w);
}

void VirtualCluster::SyncUpdate() {
  const int n_workers = virtual_.workers;
  const int64_t n = map_.num_params();
  // Local SGD: the workers' pseudo-gradients, summed as the gradients are.
  if (options_.local_sgd) {
    for (Worker& k : workers_) {
      k.local->PseudoGradient(k.accum.data());
      k.local->GroupPushed();
    }
  }
  // The sum in worker order, as a reduce adds the ranks' gradients.
  std::memcpy(sync_sum_.data(), workers_[0].accum.data(), n * sizeof(float));
  for (int w = 1; w < n_workers; ++w) {
    const float* a = workers_[w].accum.data();
    for (int64_t i = 0; i < n; ++i) sync_sum_[i] += a[i];
  }
  // Sync SGD's clip: the squared norm summed over shards as a float (sync_sgd.cc).
  float squared_norm = 0;
  if (options_.clip_norm > 0 && !options_.local_sgd) {  // local SGD clips each inner step
    for (int s = 0; s < n_workers; ++s) {
      const ShardRange& r = map_.range(s);
      squared_norm += static_cast<float>(optim::SquaredNorm(
          Tensor(sync_sum_.data() + r.begin, Shape{r.size()}, DType::kFloat32, Device::kCpu)));
    }
  }
  double end = sync_start_;
  for (const Worker& k : workers_) end = std::max(end, k.start);
  for (int s = 0; s < n_workers; ++s) {
    const ShardRange& r = map_.range(s);
    const optim::StepOptions o =
        options_.local_sgd ? OuterOptions(options_, 1.f / static_cast<float>(n_workers))
                           : PushOptions(workers_[s].info, options_.tau, squared_norm, options_);
    shards_[s]->ApplyDense(sync_sum_.data() + r.begin, o, shards_[s]->version(),
                           sync_out_.data() + r.begin);
  }
  // A ring all-reduce: a reduce-scatter and an all-gather, N - 1 steps each of 1/N of the
  // gradient over every link at once.
  const int64_t bytes = n * static_cast<int64_t>(sizeof(float));
  if (n_workers > 1) {
    const double rate = virtual_.link_bytes_per_second;
    const double step = (rate > 0 ? static_cast<double>(bytes) / n_workers / rate : 0.0) +
                        virtual_.link_delay_seconds;
    end += 2.0 * (n_workers - 1) * step;
  }
  for (int w = 0; w < n_workers; ++w) {
    Worker& k = workers_[w];
    std::memcpy(k.params.data(), sync_out_.data(), n * sizeof(float));
    ++k.stats.pushes;
    const int64_t moved = bytes * (n_workers - 1) / n_workers;
    k.stats.bytes_pushed += moved;
    k.stats.bytes_pulled += moved;
    ready_.push_back(Event{Event::Kind::kStepDone, w, end});
  }
  sync_start_ = end;
  sync_submitted_ = 0;
}

void VirtualCluster::Finish() {
  if (!async_ && options_.local_sgd && sync_submitted_ > 0) {
    // A shorter round of the local steps every worker has taken (a real run's Flush).
    CHECK_EQ(sync_submitted_ % virtual_.workers, 0) << "Finish in the middle of a local step";
    SyncUpdate();
  }
  CHECK(async_ || sync_submitted_ == 0) << "Finish in the middle of a sync update";
  auto drain = [this] {
    while (!queue_.empty()) {
      const Queued e = queue_.top();
      queue_.pop();
      Handle(e);
    }
  };
  drain();
  for (int w = 0; w < virtual_.workers; ++w) {
    Worker& k = workers_[w];
    if (k.accumulated == 0) continue;
    const double at = std::max(k.start, 0.0);
    TakeFresh(k);
    Push(w, at);
    drain();
  }
  ready_.clear();
}

bool VirtualCluster::TakeFresh(Worker& k) {
  if (!k.fresh_ready) return false;
  k.fresh_ready = false;
  if (pull_droppers_.empty()) {
    std::swap(k.params, k.fresh);
  } else {
    // fresh is the worker's view of the shards, which sparse replies update in place.
    std::memcpy(k.params.data(), k.fresh.data(), k.params.size() * sizeof(float));
  }
  k.params_versions = k.fresh_versions;
  return true;
}

void VirtualCluster::Handle(const Queued& e) {
  Worker& k = workers_[e.worker];
  switch (e.kind) {
    case Queued::Kind::kComputeDone:
      StepDone(e.worker, e.time);
      break;
    case Queued::Kind::kPushArrives: {
      // The owner's server applies it as it comes (instantly: its time is not modelled) and
      // replies with the fresh shard.
      const int s = e.shard;
      const ShardRange& r = map_.range(s);
      Shard& shard = *shards_[s];
      float* out = k.fresh.data() + r.begin;
      int64_t reply;
      if (k.job_sparse && !pull_droppers_.empty()) {
        // Dropped pulls: what the worker's view lacks most (AsyncSgd::ServerLoop).
        updated_.resize(r.size());
        k.fresh_versions[s] =
            shard.ApplySparse(k.outgoing_sparse[s], k.job_options, k.job_base[s], updated_.data());
        pull_droppers_[s]->Select(e.worker, updated_.data(), &picked_);
        for (size_t j = 0; j < picked_.indices.size(); ++j)
          out[picked_.indices[j]] = picked_.values[j];
        reply = static_cast<int64_t>(sizeof(protocol::SparseReplyHeader) +
                                     picked_.indices.size() * (sizeof(int32_t) + sizeof(float)));
      } else {
        k.fresh_versions[s] =
            k.job_sparse
                ? shard.ApplySparse(k.outgoing_sparse[s], k.job_options, k.job_base[s], out)
                : shard.ApplyDense(k.outgoing.data() + r.begin, k.job_options, k.job_base[s], out);
        if (!pull_droppers_.empty()) pull_droppers_[s]->Resync(e.worker, out);
        reply = static_cast<int64_t>(protocol::kDenseReplyHeaderBytes + r.size() * sizeof(float));
      }
      k.stats.bytes_pulled += reply;
      Schedule(links_.Transfer(s, e.worker, reply, e.time), Queued::Kind::kReplyArrives, e.worker,
               s);
      break;
    }
    case Queued::Kind::kReplyArrives:
      if (--k.replies_pending == 0) RoundDone(e.worker, e.time);
      break;
    case Queued::Kind::kWaitOver:
      // overlap auto: the round did not come back within the wait; go on without it.
      if (k.state == Worker::State::kWaitingForRound && e.token == k.wait_token) {
        k.state = Worker::State::kNeedsGradient;
        k.start = e.time;
      }
      break;
  }
}

void VirtualCluster::StepDone(int w, double time) {
  Worker& k = workers_[w];
  const int64_t n = map_.num_params();
  const bool first = k.accumulated == 0;
  if (first) k.group_base = k.params_versions;  // what this gradient was computed on
  if (options_.local_sgd) {
    // Nothing to sum: the push carries the local steps' change.
  } else if (first && k.local == nullptr) {
    // The group's sum is this gradient: its buffer becomes the sum's, the sum's takes the next
    // gradient (neither is in flight: a push travels in `outgoing`).
    std::swap(k.accum, k.grad);
  } else if (first) {  // StepLocally reads the gradient from k.grad below
    std::memcpy(k.accum.data(), k.grad.data(), n * sizeof(float));
  } else {
    for (int64_t i = 0; i < n; ++i) k.accum[i] += k.grad[i];
  }
  ready_.push_back(Event{Event::Kind::kStepDone, w, time});
  if (++k.accumulated < options_.tau) {
    TakeFreshAndStepLocally(k);
    k.state = Worker::State::kNeedsGradient;
    k.start = time;
    return;
  }
  if (k.round_out) {  // AsyncSgd's TakeFresh(wait): the last round must be back first
    k.state = Worker::State::kWaitingToPush;
    return;
  }
  TakeFreshAndStepLocally(k);
  Push(w, time);
}

void VirtualCluster::TakeFreshAndStepLocally(Worker& k) {
  // As AsyncSgd::Step: fresh values lack this group's local steps; this mini-batch's goes on top.
  const bool fresh = TakeFresh(k);
  if (k.local == nullptr) return;
  if (fresh) k.local->Reapply(k.params.data());
  if (k.local->active(k.info.update)) StepLocally(k, k.grad.data());
}

void VirtualCluster::StepLocally(Worker& k, const float* grad) {
  const int64_t n = map_.num_params();
  const Tensor g(const_cast<float*>(grad), Shape{n}, DType::kFloat32, Device::kCpu);
  // Local SGD's inner steps are its optimizer's steps, clipped as a plain one is.
  const optim::StepOptions o =
      options_.local_sgd ? InnerOptions(k.info, g, options_) : k.info.options;
  k.local->Step(Tensor(k.params.data(), Shape{n}, DType::kFloat32, Device::kCpu), g, o);
}

void VirtualCluster::Push(int w, double time) {
  Worker& k = workers_[w];
  const int64_t n = map_.num_params();
  const int shards = map_.num_shards();
  const Tensor accum(k.accum.data(), Shape{n}, DType::kFloat32, Device::kCpu);
  if (options_.local_sgd) {
    k.local->PseudoGradient(k.accum.data());
    k.job_options = OuterOptions(options_, 1.f);
  } else {
    k.job_options = PushOptions(k.info, k.accumulated,
                                options_.clip_norm > 0 ? optim::SquaredNorm(accum) : 0.0, options_);
  }
  k.job_sparse = k.dropper != nullptr && k.info.update > options_.drop_warmup;
  if (k.job_sparse) {
    k.stats.sent_fraction = k.dropper->Drop(accum, map_, &k.outgoing_sparse);
  } else {
    std::swap(k.outgoing, k.accum);  // in flight while the next group accumulates
    k.stats.sent_fraction = 1.f;
  }
  k.job_base = k.group_base;
  k.accumulated = 0;
  if (k.local != nullptr) k.local->GroupPushed();
  ++k.stats.pushes;
  k.round_out = true;
  k.replies_pending = shards - 1;
  // The own shard at once, no message (as the communication thread applies it).
  const ShardRange& mine = map_.range(w);
  float* own = k.fresh.data() + mine.begin;
  k.fresh_versions[w] = k.job_sparse ? shards_[w]->ApplySparse(k.outgoing_sparse[w], k.job_options,
                                                               k.job_base[w], own)
                                     : shards_[w]->ApplyDense(k.outgoing.data() + mine.begin,
                                                              k.job_options, k.job_base[w], own);
  std::string header;
  for (int s = 0; s < shards; ++s) {
    if (s == w) continue;
    const ShardRange& r = map_.range(s);
    int64_t bytes;
    if (k.job_sparse) {
      protocol::EncodeSparse(k.job_options, k.job_base[s], k.outgoing_sparse[s], &header);
      bytes = static_cast<int64_t>(header.size());
    } else {
      protocol::EncodeDense(k.job_options, k.job_base[s], r.size(), &header);
      bytes = static_cast<int64_t>(header.size() + r.size() * sizeof(float));
    }
    k.stats.bytes_pushed += bytes;
    Schedule(links_.Transfer(w, s, bytes, time), Queued::Kind::kPushArrives, w, s);
  }
  if (k.replies_pending == 0) {
    RoundDone(w, time);
  }
  // What the worker does while its round travels (AsyncSgd::Step after StartPush): never: it
  // waits; auto: it waits up to a tenth of its compute time; always: it goes on, and takes the
  // fresh shards at the end of its next mini-batch.
  if (options_.overlap && options_.overlap_wait == 0) {
    k.state = Worker::State::kNeedsGradient;
    k.start = time;
  } else if (k.fresh_ready) {
    TakeFresh(k);
    k.state = Worker::State::kNeedsGradient;
    k.start = time;
  } else {
    k.state = Worker::State::kWaitingForRound;
    if (options_.overlap) {
      Schedule(time + options_.overlap_wait * k.compute_seconds, Queued::Kind::kWaitOver, w, 0,
               ++k.wait_token);
    }
  }
}

void VirtualCluster::RoundDone(int w, double time) {
  Worker& k = workers_[w];
  k.round_out = false;
  k.fresh_ready = true;
  if (k.state == Worker::State::kWaitingToPush) {
    TakeFreshAndStepLocally(k);
    Push(w, time);
  } else if (k.state == Worker::State::kWaitingForRound) {
    TakeFresh(k);
    k.state = Worker::State::kNeedsGradient;
    k.start = time;
  }
}

const float* VirtualCluster::params(int worker) const { return workers_[worker].params.data(); }

float* VirtualCluster::gradient_buffer(int worker) {
  Worker& k = workers_[worker];
  // Async: a worker asked for a gradient has used its last (StepDone, StepLocally).
  if (async_) return k.grad.data();
  // Sync: an update's first mini-batch of each worker is copied into its sum, which the last
  // update has used.
  if (options_.local_sgd || sync_submitted_ / virtual_.workers > 0) return nullptr;
  return k.accum.data();
}

VirtualCluster::WorkerStats VirtualCluster::stats(int worker) const {
  return workers_[worker].stats;
}

void VirtualCluster::ReadGlobal(float* out) const {
  for (int s = 0; s < map_.num_shards(); ++s) shards_[s]->Read(out + map_.range(s).begin);
}

StalenessHistogram VirtualCluster::staleness(int shard) const {
  return shards_[shard]->staleness();
}

std::string VirtualCluster::SaveShardState(int shard) const {
  const std::string state = shards_[shard]->SaveState();
  return async_ ? state : Shard::DecodeState(state).optimizer;
}

std::string VirtualCluster::SaveWorkerState(int worker) const {
  const Worker& k = workers_[worker];
  if (options_.local_sgd) return EncodeInnerState(k.local->SaveOptimizerState());
  if (k.dropper == nullptr) return std::string();
  const std::vector<float>& r = k.dropper->residual();
  const uint64_t drops = k.dropper->drops();
  std::string out(sizeof(drops) + r.size() * sizeof(float), '\0');
  std::memcpy(out.data(), &drops, sizeof(drops));
  std::memcpy(out.data() + sizeof(drops), r.data(), r.size() * sizeof(float));
  return out;
}

}  // namespace tern::ps
