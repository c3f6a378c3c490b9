// Asynchronous SGD over the sharded parameter server (Bogoychev's thesis, ch. 5).
//
// Threads per rank:
//  - the worker (the trainer's thread) calls Step: it sums gradients into a local accumulator
//    and every tau mini-batches hands the sum (lr scaled by tau, optionally clipped and
//    gradient-dropped) to
//  - the communication thread, which pushes each shard's part to its owner, applies its own
//    shard directly, and collects the owners' fresh shards into a staging buffer; the worker
//    copies them into its parameters at its next Step, so it never idles while shards travel
//    (StrategyOptions::overlap = false does the round inline instead);
//  - the server thread receives other ranks' pushes for this rank's shard and applies them
//    under the shard's lock; a reply thread sends the fresh shard back, so the server never
//    blocks on a slow client (and no cycle of blocked sends can form). With dropped pulls
//    (StrategyOptions::drop_pulls) the reply to a sparse push is sparse too (ps/pull_drop.h):
//    the worker's staging buffer then holds its view of every shard, and is always where
//    pulls land.
// For the first local_optimizer_updates mini-batches a local optimizer also steps the worker's
// copy with each mini-batch gradient (ps/local_warmup.h). Asynchronous local SGD
// (StrategyOptions::local_sgd) steps it with every mini-batch, and every tau-th pushes that
// copy's change since the group began, the pseudo-gradient, to the shards' outer optimizers.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "common/timer.h"
#include "ps/grad_drop.h"
#include "ps/local_warmup.h"
#include "ps/pull_drop.h"
#include "ps/shard.h"
#include "ps/strategy.h"

namespace tern::ps {

class AsyncSgd final : public Strategy {
 public:
  AsyncSgd(const StrategyOptions& options, const config::OptimConfig& optim,
           comm::Communicator* comm, int64_t num_params);
  ~AsyncSgd() override;

  void Init(const Tensor& params) override;
  StepResult Step(const Tensor& grads, const Tensor& params, const StepInfo& info) override;
  void Flush(const Tensor& params, const StepInfo& info) override;
  void Finish() override;
  const ShardMap& shard_map() const override { return map_; }
  StrategyStats stats() const override;
  std::string SaveShardState() const override { return shard_->SaveState(); }
  void LoadShardState(const std::string& bytes) override { shard_->LoadState(bytes); }
  std::string SaveWorkerState() const override;
  void LoadWorkerState(const std::string& bytes) override;

  // Null unless drop_rate > 0. Read only while no round runs (after Flush).
  const GradientDropper* dropper() const { return dropper_.get(); }

 private:
  enum class RoundState { kIdle, kPending, kRunning, kDone };

  // Worker side.
  // gradient: the summed gradient (n) to push, accum_ or a mini-batch gradient that stays
  // unchanged until the round ends; params: the worker's (n).
  void StartPush(const StepInfo& info, int batches, const float* gradient, float* params,
                 StepResult* result);
  // Pushes the group: `gradient`, the sum (StartPush's), or local SGD's pseudo-gradient.
  void PushGroup(const StepInfo& info, const float* gradient, float* params, StepResult* result);
  void StartRound(bool pull_only, const optim::StepOptions& options, float* params);
  void WaitRound();
  // Waits at most `seconds` for the running round; whether it is done.
  bool WaitRound(double seconds);
  bool TakeFresh(const Tensor& params, bool wait);

  // Communication thread side.
  void CommLoop();
  void RunRound();
  void ServerLoop();
  void ReplyLoop();

  const StrategyOptions options_;
  comm::Communicator* comm_;
  const ShardMap map_;
  const int rank_;
  std::unique_ptr<Shard> shard_;        // this rank's shard
  std::unique_ptr<LocalWarmup> local_;  // null without local-optimizer warm-up
  std::unique_ptr<GradientDropper> dropper_;
  // Server side, with dropped pulls: each worker's view of this rank's shard. Server thread only.
  std::unique_ptr<PullDropper> pull_dropper_;

  // Worker-owned.
  std::vector<float> accum_;  // (n)
  int accumulated_ = 0;
  std::vector<uint64_t> params_versions_;  // per shard: versions the worker's params hold
  // Per shard: the versions the first gradient of the current tau group was computed on, the
  // oldest in the sum. With overlap the worker's params lag its last push (that round is still
  // running while it computes), so these, not the versions pulled since, are a push's base.
  std::vector<uint64_t> group_base_versions_;
  bool initialized_ = false;
  Timer since_step_;            // since the last Step returned: the worker computing
  double compute_seconds_ = 0;  // the worker's time between its last two Steps
  bool finished_ = false;
  int64_t pushes_ = 0, entries_sent_ = 0, entries_total_ = 0;

  // Handed between worker and communication thread through round_: the worker writes them
  // only in kIdle, the communication thread only in kRunning.
  bool job_pull_only_ = false;
  bool job_sparse_ = false;
  optim::StepOptions job_options_;
  std::vector<uint64_t> job_base_versions_;
  std::vector<float> outgoing_;                  // (n) dense push
  const float* job_dense_ = nullptr;             // (n) what a dense push sends
  float* job_pull_into_ = nullptr;               // (n) where pulled shards go: fresh_ or params
  std::vector<SparseGradient> outgoing_sparse_;  // per shard
  std::vector<float> fresh_;                     // (n) pulled parameters
  std::vector<uint64_t> fresh_versions_;
  std::string send_buffer_, reply_buffer_, reply_payload_;

  std::mutex mu_;
  std::condition_variable round_changed_;
  RoundState round_ = RoundState::kIdle;  // GUARDED_BY(mu_)
  bool stop_comm_ = false;                // GUARDED_BY(mu_)

  std::mutex reply_mu_;
  std::condition_variable reply_ready_;
  struct Reply {
    int destination;
    std::string bytes;  // the first message's bytes, then the second's
    size_t header;      // the first message's size (protocol.h)
  };
  std::deque<Reply> replies_;  // GUARDED_BY(reply_mu_)
  // One reply buffer per source rank, reused: a fresh shard-sized allocation per reply costs
  // page faults and a memset on every push. Busy from the server's taking it until its send
  // completes.
  std::condition_variable reply_free_;
  std::vector<std::string> reply_buffers_;  // GUARDED_BY(reply_mu_) (ranks)
  std::vector<bool> reply_busy_;            // GUARDED_BY(reply_mu_) (ranks)
  bool stop_replies_ = false;               // GUARDED_BY(reply_mu_)

  std::atomic<int64_t> bytes_sent_{0};
  // Written by the communication thread (or the worker, rounds inline), read by stats().
  std::atomic<int64_t> bytes_pushed_{0}, bytes_pulled_{0};
  std::thread comm_thread_, server_thread_, reply_thread_;
};

}  // namespace tern::ps
