// The serving core's scheduler: one per served model, with one or more worker threads, each of
// which owns one batch per beam size and keeps it full (continuous batching across requests).
//
// Request threads call Submit, which encodes the text with the model serving at that moment and
// queues its sentences; they then wait on the Request. A worker thread, at every decoder-step
// boundary of its batch: drops the sentences of cancelled requests (a client that left, a deadline
// passed), admits waiting sentences into its running batch up to the batch limits when the join
// policy lets them (the top-up path: BeamSearch::Admit), runs one decoder step and answers the
// sentences that finished.
// Requests of different beam sizes run in separate batches ("lanes"), stepped in turn.
//
// Workers (CPU): with N workers, N batches decode at once, each on its own thread with serial
// products (SerialRegion), as tern-translate's --workers. They share each lane's queue; a worker
// admits up to an even share of the lane's sentences (running and waiting, over the workers), so
// one-sentence requests spread over the threads instead of piling into one batch. On a small
// model a sentence costs about the same in a batch as alone, and two threads each decoding a
// batch beat two threads splitting every product of one (docs/serving.md).
//
// Batching modes, for comparison: continuous (the above); static (a batch is formed from the
// waiting sentences when the previous batch has finished, and nothing joins it while it runs:
// request-level batching across requests, as a batch-at-a-time runtime gives); serial (one
// request at a time, its sentences batched together: Marian's server; always one worker).
//
// A reload (Swap) serves new requests with the new model at once; requests already submitted
// finish on the model that encoded them, whose batch keeps stepping until it is empty.
#pragma once

#include <atomic>
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
  // Batches decoded at once, a thread each (CPU models; serial batching uses one). The caller
  // sets the compute threads to 1 when this is above 1.
  int workers = 1;
  // Continuous batching: waiting sentences join a running batch when at least join_ratio x its
  // running sentences can join at once, or once the batch has taken join_wait_steps steps since
  // sentences last joined it (text-generation-inference's waiting_served_ratio and
  // max_waiting_tokens); an empty batch takes them at once. Every join runs the encoder on the
  // newcomers and widens the decoder's state: on a GPU, where a step costs its launches more than
  // its rows, joining a sentence or two at every step boundary slows every step. 0: they join
  // at every boundary.
  double join_ratio = 0;
  int join_wait_steps = 20;  // with join_wait_steps 0 the ratio would never hold sentences back
};

// Whether `can_join` waiting sentences join a batch of `running` sentences that has taken
// `steps_since_join` steps since sentences last joined it (see SchedulerOptions::join_ratio).
bool JoinNow(const SchedulerOptions& options, int64_t running, int64_t can_join,
             int steps_since_join);

// The pace at which a scheduler admits source tokens, over a sliding window (ten seconds), for
// Retry-After. Add runs after every decoder step (thousands a second), so it keeps a running sum:
// constant work a step, however many steps the window holds.
class AdmissionPace {
 public:
  explicit AdmissionPace(Clock::duration window = std::chrono::seconds(10)) : window_(window) {}
  // `tokens` admitted since the last call, at `now` (non-decreasing).
  void Add(Clock::time_point now, int64_t tokens);
  // Tokens a second over the window, once it spans half a second; until then the last value (0).
  double tokens_per_second() const { return tokens_per_second_; }
  size_t entries() const { return entries_.size(); }

 private:
  Clock::duration window_;
  std::deque<std::pair<Clock::time_point, int64_t>> entries_;
  int64_t sum_ = 0;
  double tokens_per_second_ = 0;
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
  // Ends the threads; requests still waiting or running are cancelled (kShutdown), which wakes
  // their waiters. Idempotent.
  void Stop();

  const std::string& name() const { return name_; }
  const SchedulerOptions& options() const { return options_; }
  int64_t queued_sentences() const;
  int64_t queued_tokens() const;

 private:
  struct Waiting {
    std::shared_ptr<Request> request;
    size_t index;
  };
  // One worker's batch of a lane: the search (made at first use) and its running sentences are
  // that worker's thread's alone; `size` is what the others may read.
  struct Batch {
    std::unique_ptr<BeamSearch> search;
    std::unordered_map<int64_t, Waiting> running;
    int64_t next_id = 0;
    int steps_since_join = 0;   // decoder steps since sentences last joined the running batch
    uint64_t cancels_seen = 0;  // cancels_ when this batch's worker last looked for the cancelled
    int size = 0;  // GUARDED_BY(mutex_): running sentences, counted at admission and after steps
  };
  // One beam size of one model: the sentences waiting for it and each worker's batch.
  struct Lane {
    std::deque<Waiting> queue;   // GUARDED_BY(mutex_)
    std::vector<Batch> batches;  // one per worker, sized when the lane is made
  };
  // A model and its lanes; the first of served_ takes new requests, the others finish theirs.
  // Held by shared_ptr so that a worker stepping a lane keeps it alive when it is retired.
  struct Served {
    std::shared_ptr<const LoadedModel> model;
    std::map<int, Lane> lanes;  // by beam; GUARDED_BY(mutex_) (nodes are stable)
  };

  void Run(int worker);
  // One boundary and one step of a worker's batch of a lane: drop the cancelled, admit, step,
  // answer.
  void StepLane(Served& served, Lane& lane, int worker);
  // Scans the lane's queue and the batch only when a request was cancelled since the batch's
  // worker last looked (cancels_), not at every step.
  void DropCancelled(Lane& lane, Batch& batch);
  // Takes the waiting sentences that join `batch` now (by the batching mode and the worker's
  // share) off lane's queue.
  std::vector<Waiting> TakeAdmissions(Lane& lane, Batch& batch);
  // Publishes batch.running's size after its worker's step changed it. REQUIRES: mutex_ held
  void PublishRunning(Batch& batch);
  // Sentences wait for the lane or run in the worker's batch. REQUIRES: mutex_ held
  static bool LaneHasWork(const Lane& lane, int worker);
  bool HasWork() const;            // REQUIRES: mutex_ held
  bool HasWork(int worker) const;  // REQUIRES: mutex_ held
  void RetireServed();             // REQUIRES: mutex_ held
  void UpdatePace();               // REQUIRES: mutex_ held
  void PublishQueue();             // REQUIRES: mutex_ held
  void CountCancelled(const char* reason, int64_t n);

  const std::string name_;
  const SchedulerOptions options_;
  const int workers_;
  ServeMetrics* metrics_;
  const std::string labels_;  // {model="name"}
  mutable std::mutex mutex_;
  std::condition_variable wake_, idle_;
  std::deque<std::shared_ptr<Served>> served_;  // GUARDED_BY(mutex_)
  int64_t queued_sentences_ = 0;                // GUARDED_BY(mutex_)
  int64_t queued_tokens_ = 0;                   // GUARDED_BY(mutex_)
  bool draining_ = false;                       // GUARDED_BY(mutex_)
  bool stop_ = false;                           // GUARDED_BY(mutex_)
  bool stopped_ = false;                        // GUARDED_BY(mutex_): Stop has cleaned up
  int stepping_ = 0;                            // GUARDED_BY(mutex_): workers in a step
  int64_t running_sentences_ = 0;               // GUARDED_BY(mutex_): in every batch
  int64_t admitted_tokens_ = 0;                 // GUARDED_BY(mutex_): since the last step
  AdmissionPace pace_;                          // GUARDED_BY(mutex_)
  // Requests cancelled so far (Request::Cancel counts them).
  const std::shared_ptr<std::atomic<uint64_t>> cancels_ =
      std::make_shared<std::atomic<uint64_t>>(0);
  std::vector<std::thread> threads_;
};

}  // namespace tern::inference::serve
