// The serving core's scheduler: one per served model, one thread each, which owns the model's
// beam searches and keeps their batches full (continuous batching across requests).
//
// Request threads call Submit, which encodes the text with the model serving at that moment and
// queues its sentences; they then wait on the Request. The scheduler thread, at every decoder-step
// boundary of a batch: drops the sentences of cancelled requests (a client that left, a deadline
// passed), admits waiting sentences into the running batch up to the batch limits (the top-up
// path: BeamSearch::Admit), runs one decoder step and answers the sentences that finished.
// Requests of different beam sizes run in separate batches ("lanes"), stepped in turn.
//
// Batching modes, for comparison: continuous (the above); static (a batch is formed from the
// waiting sentences when the previous batch has finished, and nothing joins it while it runs:
// request-level batching across requests, as a batch-at-a-time runtime gives); serial (one
// request at a time, its sentences batched together: Marian's server).
//
// A reload (Swap) serves new requests with the new model at once; requests already submitted
// finish on the model that encoded them, whose batch keeps stepping until it is empty.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "inference/serve/metrics.h"
#include "inference/serve/request.h"

namespace tern::inference::serve {

enum class Batching { kContinuous, kStatic, kSerial };
// "continuous", "static", "serial"; tern::Error naming the flag otherwise.
Batching ParseBatching(const std::string& name);

struct SchedulerOptions {
  Batching batching = Batching::kContinuous;
  // A batch holds at most this many padded source tokens (sentences x longest source, as
  // tern-translate's --max-batch-tokens) and this many sentences; one sentence always fits.
  int max_batch_tokens = 4096;
  int max_batch_sentences = 128;
  // Source tokens waiting, over all requests of the model: a request that would pass it is
  // refused (HTTP 429), so the backlog stays bounded.
  int64_t max_queue_tokens = 20000;
  int max_sentence_tokens = 256;  // per sentence, eos included
  int max_beam = 8;               // a request's beam: 1 to this
};

class Scheduler {
 public:
  Scheduler(std::string name, std::shared_ptr<const LoadedModel> model,
            const SchedulerOptions& options, ServeMetrics* metrics);
  ~Scheduler();  // Stop()
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  struct Submission {
    enum Status { kAccepted, kQueueFull, kTooLarge, kSentenceTooLong, kDraining } status;
    std::shared_ptr<Request> request;  // when accepted
    size_t sentence = 0;               // kSentenceTooLong: which one
    int64_t tokens = 0;                // its tokens (kSentenceTooLong) or the request's
    int retry_after_seconds = 1;       // kQueueFull: the queue's wait at the recent pace
  };
  // Encodes `texts` (one sentence each) with the serving model and queues their sentences.
  // REQUIRES: 1 <= beam <= max_beam, 1 <= n_best <= beam (the caller validates). Thread-safe.
  Submission Submit(const std::vector<std::string>& texts, int beam, int n_best);

  // Serves new requests with `model` from now on. Thread-safe.
  void Swap(std::shared_ptr<const LoadedModel> model);
  std::shared_ptr<const LoadedModel> current() const;

  // From now on Submit refuses (kDraining); what was accepted still runs.
  void Drain();
  // True once nothing waits or runs; false if `until` passes first.
  bool WaitIdle(Clock::time_point until);
  // Ends the thread; requests still waiting or running are cancelled (kShutdown), which wakes
  // their waiters. Idempotent.
  void Stop();

  const std::string& name() const { return name_; }
  const SchedulerOptions& options() const { return options_; }
  int64_t queued_sentences() const;
  int64_t queued_tokens() const;

 private:
  // One beam size of one model: a batch and the sentences waiting for it.
  struct Lane {
    struct Waiting {
      std::shared_ptr<Request> request;
      size_t index;
    };
    std::deque<Waiting> queue;  // GUARDED_BY(mutex_)
    // The scheduler thread's alone: the search (made at first use) and its running sentences.
    std::unique_ptr<BeamSearch> search;
    std::unordered_map<int64_t, Lane::Waiting> running;
    int64_t next_id = 0;
  };
  // A model and its lanes; the first of served_ takes new requests, the others finish theirs.
  struct Served {
    std::shared_ptr<const LoadedModel> model;
    std::map<int, Lane> lanes;  // by beam; GUARDED_BY(mutex_) (nodes are stable)
  };

  void Run();
  // One boundary and one step of a lane: drop the cancelled, admit, step, answer.
  void StepLane(Served& served, Lane& lane);
  void DropCancelled(Lane& lane);
  // Takes the waiting sentences that join now (by the batching mode) off lane's queue.
  std::vector<Lane::Waiting> TakeAdmissions(Lane& lane);
  bool HasWork() const;  // REQUIRES: mutex_ held
  void PublishQueue();   // REQUIRES: mutex_ held
  void CountCancelled(const char* reason, int64_t n);

  const std::string name_;
  const SchedulerOptions options_;
  ServeMetrics* metrics_;
  const std::string labels_;  // {model="name"}
  mutable std::mutex mutex_;
  std::condition_variable wake_, idle_;
  std::deque<std::unique_ptr<Served>> served_;  // GUARDED_BY(mutex_)
  int64_t queued_sentences_ = 0;                // GUARDED_BY(mutex_)
  int64_t queued_tokens_ = 0;                   // GUARDED_BY(mutex_)
  bool draining_ = false;                       // GUARDED_BY(mutex_)
  bool stop_ = false;                           // GUARDED_BY(mutex_)
  bool stepping_ = false;                       // GUARDED_BY(mutex_): the thread is in a step
  int running_sentences_ = 0;                   // GUARDED_BY(mutex_): in every batch
  int64_t admitted_tokens_ = 0;                 // GUARDED_BY(mutex_): since the last step
  double tokens_per_second_ = 0;                // GUARDED_BY(mutex_): admitted, recent pace
  std::thread thread_;
};

}  // namespace tern::inference::serve
