// One translation request as the serving core sees it: shared by the HTTP thread that waits for
// it and the model's scheduler thread that decodes its sentences. The HTTP thread encodes the
// text with the model that accepted it (Scheduler::Submit) and decodes the answer with the same
// one, so a request never mixes models, even across a reload.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "inference/search/beam_search.h"
#include "inference/translator.h"

namespace tern::inference::serve {

using Clock = std::chrono::steady_clock;

// A loaded model: its Translator (the scheduler thread alone decodes with it; the codec is
// thread-safe) and when it was loaded.
struct LoadedModel {
  std::unique_ptr<Translator> translator;
  std::string path;
  double load_seconds = 0;
  int generation = 0;  // 1 for the first load, +1 per reload
};

// Why a request's sentences were dropped before they finished: the client left, its deadline
// passed, the server stopped, or the model failed while decoding them.
enum class Cancelled : int { kNo = 0, kClient = 1, kDeadline = 2, kShutdown = 3, kFailed = 4 };

class Request {
 public:
  // sources: token ids per sentence, each ending with eos; an empty one (an empty line) is
  // answered without decoding. `cancels`, when given, counts this request's cancellation (once),
  // so that the scheduler looks for cancelled sentences only after one happened.
  Request(std::shared_ptr<const LoadedModel> model, std::vector<std::vector<int32_t>> sources,
          int beam, int n_best, std::shared_ptr<std::atomic<uint64_t>> cancels = nullptr);
  Request(const Request&) = delete;
  Request& operator=(const Request&) = delete;

  const LoadedModel& model() const { return *model_; }
  const std::vector<std::vector<int32_t>>& sources() const { return sources_; }
  int beam() const { return beam_; }
  int n_best() const { return n_best_; }
  Clock::time_point arrival() const { return arrival_; }

  // The HTTP thread: waits until every sentence is answered or the request is cancelled (true),
  // or `until` passes (false).
  bool WaitUntil(Clock::time_point until);
  // Per sentence, up to n_best hypotheses, best first. REQUIRES: WaitUntil returned true.
  const std::vector<std::vector<Hypothesis>>& hypotheses() const { return hypotheses_; }

  // The client left or the deadline passed (the HTTP thread), or the server stopped or the model
  // failed (the scheduler). The first reason sticks; the scheduler drops the request's sentences,
  // waiting or running, at its next step boundary. Wakes the waiter.
  void Cancel(Cancelled why);
  Cancelled cancelled() const { return cancelled_.load(std::memory_order_acquire); }

  // The scheduler: sentence `index` is finished.
  void Answer(size_t index, std::vector<Hypothesis> hypotheses);
  bool answered() const;

 private:
  std::shared_ptr<const LoadedModel> model_;
  std::vector<std::vector<int32_t>> sources_;
  int beam_, n_best_;
  Clock::time_point arrival_ = Clock::now();
  std::atomic<Cancelled> cancelled_{Cancelled::kNo};
  std::shared_ptr<std::atomic<uint64_t>> cancels_;  // shared: a request may outlive its scheduler
  mutable std::mutex mutex_;
  std::condition_variable answered_;
  size_t left_;                                      // GUARDED_BY(mutex_)
  std::vector<std::vector<Hypothesis>> hypotheses_;  // GUARDED_BY(mutex_) until left_ is 0
};

}  // namespace tern::inference::serve
