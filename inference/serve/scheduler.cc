#include "inference/serve/scheduler.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <utility>

#include "common/error.h"
#include "common/thread_pool.h"
#include "inference/format/special_ids.h"

namespace tern::inference::serve {
namespace {

const char* ReasonName(Cancelled why) {
  switch (why) {
    case Cancelled::kClient:
      return "client";
    case Cancelled::kDeadline:
      return "deadline";
    case Cancelled::kShutdown:
      return "shutdown";
    case Cancelled::kFailed:
      return "failed";
    case Cancelled::kNo:
      break;
  }
  return "none";
}

}  // namespace

Batching ParseBatching(const std::string& name) {
  if (name == "continuous") return Batching::kContinuous;
  if (name == "static") return Batching::kStatic;
  if (name == "serial") return Batching::kSerial;
  Fail("--batching '", name, "' is not continuous, static or serial");
}

bool JoinNow(const SchedulerOptions& options, int64_t running, int64_t can_join,
             int steps_since_join) {
  if (can_join <= 0) return false;
  if (running == 0 || options.join_ratio <= 0) return true;
  if (steps_since_join >= options.join_wait_steps) return true;
  return static_cast<double>(can_join) >= options.join_ratio * static_cast<double>(running);
}

Scheduler::Scheduler(std::string name, std::shared_ptr<const LoadedModel> model,
                     const SchedulerOptions& options, ServeMetrics* metrics)
    : name_(std::move(name)),
      options_(options),
      workers_(options.batching == Batching::kSerial ? 1 : options.workers),
      metrics_(metrics),
      labels_(Labels({{"model", name_}})) {
  CHECK(model != nullptr && metrics != nullptr);
  if (options.workers < 1) Fail("workers must be at least 1, got ", options.workers);
  if (!(options.join_ratio >= 0) || options.join_wait_steps < 0) {
    Fail("join_ratio and join_wait_steps must be at least 0, got ", options.join_ratio, " and ",
         options.join_wait_steps);
  }
  if (options.workers > 1 && model->translator->model().device() != Device::kCpu) {
    Fail("workers (batches decoded at once, a thread each) are for the CPU; a GPU model decodes ",
         "one batch at a time: leave --workers at 1");
  }
  served_.push_back(std::make_shared<Served>());
  served_.front()->model = std::move(model);
  PublishQueue();
  for (int w = 0; w < workers_; ++w) threads_.emplace_back([this, w] { Run(w); });
}

Scheduler::~Scheduler() { Stop(); }

std::shared_ptr<const LoadedModel> Scheduler::current() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return served_.front()->model;
}

Scheduler::Submission Scheduler::Submit(const std::vector<std::string>& texts, int beam,
                                        int n_best) {
  CHECK(beam >= 1 && beam <= options_.max_beam && n_best >= 1 && n_best <= beam);
  for (;;) {
    const std::shared_ptr<const LoadedModel> model = current();
    const TextCodec& codec = model->translator->codec();
    std::vector<std::vector<int32_t>> sources(texts.size());
    int64_t tokens = 0;
    for (size_t i = 0; i < texts.size(); ++i) {
      sources[i] = codec.Encode(texts[i]);
      if (sources[i].empty()) continue;  // an empty line: an empty translation
      sources[i].push_back(kEosId);
      const int64_t n = static_cast<int64_t>(sources[i].size());
      if (n > options_.max_sentence_tokens) {
        return {
            .status = Submission::kSentenceTooLong, .request = nullptr, .sentence = i, .tokens = n};
      }
      tokens += n;
    }
    std::lock_guard<std::mutex> lock(mutex_);
    if (draining_ || stop_) return {.status = Submission::kDraining, .request = nullptr};
    if (tokens > options_.max_queue_tokens) {
      return {.status = Submission::kTooLarge, .request = nullptr, .tokens = tokens};
    }
    if (queued_tokens_ + tokens > options_.max_queue_tokens) {
      // The queue's wait at the pace of the last seconds' admissions.
      const double rate = std::max(pace_.tokens_per_second(), 1.0);
      const double wait = std::ceil(static_cast<double>(queued_tokens_) / rate);
      return {.status = Submission::kQueueFull,
              .request = nullptr,
              .tokens = tokens,
              .retry_after_seconds = static_cast<int>(std::clamp(wait, 1.0, 60.0))};
    }
    // The model may have been swapped since `model` was read: queue with the one that encoded,
    // while it still serves; else encode again with the new one.
    auto served = std::find_if(served_.begin(), served_.end(),
                               [&](const auto& s) { return s->model == model; });
    if (served == served_.end()) continue;
    auto request = std::make_shared<Request>(model, std::move(sources), beam, n_best, cancels_);
    Lane& lane = (*served)->lanes[beam];
    if (lane.batches.empty()) lane.batches.resize(static_cast<size_t>(workers_));
    for (size_t i = 0; i < request->sources().size(); ++i) {
      if (request->sources()[i].empty()) continue;
      lane.queue.push_back({request, i});
      ++queued_sentences_;
    }
    queued_tokens_ += tokens;
    PublishQueue();
    // Every idle worker may take a share.
    if (workers_ > 1) {
      wake_.notify_all();
    } else {
      wake_.notify_one();
    }
    return {.status = Submission::kAccepted, .request = std::move(request), .tokens = tokens};
  }
}

void Scheduler::Swap(std::shared_ptr<const LoadedModel> model) {
  std::lock_guard<std::mutex> lock(mutex_);
  served_.push_front(std::make_shared<Served>());
  served_.front()->model = std::move(model);
  wake_.notify_all();
}

void Scheduler::Drain() {
  std::lock_guard<std::mutex> lock(mutex_);
  draining_ = true;
}

bool Scheduler::WaitIdle(Clock::time_point until) {
  std::unique_lock<std::mutex> lock(mutex_);
  return idle_.wait_until(lock, until, [&] {
    return stop_ || (queued_sentences_ == 0 && running_sentences_ == 0 && stepping_ == 0);
  });
}

void Scheduler::Stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopped_) return;
    stop_ = true;
    wake_.notify_all();
    idle_.notify_all();
  }
  for (std::thread& t : threads_) {
    if (t.joinable()) t.join();
  }
  // Whatever is left is answered as cancelled; the workers are gone, so their batches are ours.
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& served : served_) {
    for (auto& [beam, lane] : served->lanes) {
      for (auto& w : lane.queue) w.request->Cancel(Cancelled::kShutdown);
      lane.queue.clear();
      for (Batch& batch : lane.batches) {
        for (auto& [id, w] : batch.running) w.request->Cancel(Cancelled::kShutdown);
        batch.running.clear();
        batch.size = 0;
        batch.search.reset();
      }
    }
  }
  queued_sentences_ = queued_tokens_ = 0;
  running_sentences_ = 0;
  stopped_ = true;
  PublishQueue();
  idle_.notify_all();
}

int64_t Scheduler::queued_sentences() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return queued_sentences_;
}

int64_t Scheduler::queued_tokens() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return queued_tokens_;
}

bool Scheduler::HasWork() const { return queued_sentences_ > 0 || running_sentences_ > 0; }

bool Scheduler::LaneHasWork(const Lane& lane, int worker) {
  return !lane.queue.empty() || lane.batches[static_cast<size_t>(worker)].size > 0;
}

bool Scheduler::HasWork(int worker) const {
  for (const auto& served : served_) {
    for (const auto& [beam, lane] : served->lanes) {
      if (LaneHasWork(lane, worker)) return true;
    }
  }
  return false;
}

void Scheduler::RetireServed() {
  // A model that was swapped out leaves once its requests are done; a worker still stepping one
  // of its lanes holds it alive.
  for (size_t i = 1; i < served_.size();) {
    bool busy = false;
    for (auto& [beam, lane] : served_[i]->lanes) {
      busy |= !lane.queue.empty();
      for (const Batch& batch : lane.batches) busy |= batch.size > 0;
    }
    if (busy) {
      ++i;
    } else {
      served_.erase(served_.begin() + static_cast<std::ptrdiff_t>(i));
    }
  }
}

void AdmissionPace::Add(Clock::time_point now, int64_t tokens) {
  entries_.push_back({now, tokens});
  sum_ += tokens;
  while (now - entries_.front().first > window_) {
    sum_ -= entries_.front().second;
    entries_.pop_front();
  }
  const double span = std::chrono::duration<double>(now - entries_.front().first).count();
  if (span > 0.5) tokens_per_second_ = static_cast<double>(sum_) / span;
}

void Scheduler::UpdatePace() {
  pace_.Add(Clock::now(), admitted_tokens_);
  admitted_tokens_ = 0;
}

void Scheduler::PublishQueue() {
  metrics_->SetGauge("tern_queue_sentences", labels_, static_cast<double>(queued_sentences_));
  metrics_->SetGauge("tern_queue_tokens", labels_, static_cast<double>(queued_tokens_));
}

void Scheduler::CountCancelled(const char* reason, int64_t n) {
  if (n > 0) {
    metrics_->AddCounter("tern_sentences_cancelled_total",
                         Labels({{"model", name_}, {"reason", reason}}), static_cast<double>(n));
  }
}

void Scheduler::Run(int worker) {
  // With several workers each decodes its own batch alone on its thread.
  std::optional<SerialRegion> serial;
  if (workers_ > 1) serial.emplace();
  std::unique_lock<std::mutex> lock(mutex_);
  std::vector<std::pair<std::shared_ptr<Served>, Lane*>> work;
  for (;;) {
    wake_.wait(lock, [&] { return stop_ || HasWork(worker); });
    if (stop_) break;
    RetireServed();
    work.clear();
    for (auto& served : served_) {
      for (auto& [beam, lane] : served->lanes) {
        if (LaneHasWork(lane, worker)) work.push_back({served, &lane});
      }
    }
    ++stepping_;
    lock.unlock();
    for (auto& [served, lane] : work) StepLane(*served, *lane, worker);
    lock.lock();
    --stepping_;
    // What the step changed: until here the sizes overstate, which keeps a retired model alive.
    for (auto& [served, lane] : work) PublishRunning(lane->batches[static_cast<size_t>(worker)]);
    work.clear();  // the last reference to a retired model may go here
    UpdatePace();
    PublishQueue();
    if (!HasWork() && stepping_ == 0) idle_.notify_all();
  }
}

void Scheduler::PublishRunning(Batch& batch) {
  const int size = static_cast<int>(batch.running.size());
  running_sentences_ += size - batch.size;
  batch.size = size;
}

void Scheduler::StepLane(Served& served, Lane& lane, int worker) {
  Batch& batch = lane.batches[static_cast<size_t>(worker)];
  try {
    DropCancelled(lane, batch);
    std::vector<Waiting> joining = TakeAdmissions(lane, batch);
    if (!joining.empty()) {
      // Running from here, so that a failure below answers them too.
      const int beam = joining.front().request->beam();
      std::vector<std::vector<int32_t>> sources;
      std::vector<int64_t> ids;
      for (Waiting& w : joining) {
        sources.push_back(w.request->sources()[w.index]);
        ids.push_back(batch.next_id);
        batch.running.emplace(batch.next_id++, std::move(w));
      }
      if (!batch.search) batch.search = served.model->translator->NewSearch(beam);
      batch.search->set_batch_room(options_.max_batch_sentences);
      if (batch.running.size() > joining.size()) {
        metrics_->AddCounter("tern_batch_joins_total", labels_);
      }
      batch.search->Admit(sources, ids);
      batch.steps_since_join = 0;
    }
    if (batch.running.empty()) return;
    metrics_->Observe("tern_batch_sentences", labels_, static_cast<double>(batch.running.size()));
    std::vector<BeamSearch::FinishedSentence> finished;
    batch.search->Step(&finished);
    ++batch.steps_since_join;
    metrics_->AddCounter("tern_decoder_steps_total", labels_);
    for (BeamSearch::FinishedSentence& f : finished) {
      auto it = batch.running.find(f.id);
      CHECK(it != batch.running.end());
      it->second.request->Answer(it->second.index, std::move(f.hypotheses));
      batch.running.erase(it);
    }
  } catch (const std::exception& e) {
    // A failure inside the model (a GPU error): this batch's requests fail, it starts over.
    LOG(ERROR) << "model " << name_ << ": decoding failed: " << e.what();
    for (auto& [id, w] : batch.running) w.request->Cancel(Cancelled::kFailed);
    CountCancelled("failed", static_cast<int64_t>(batch.running.size()));
    batch.running.clear();
    batch.search.reset();
  }
}

void Scheduler::DropCancelled(Lane& lane, Batch& batch) {
  // Read before the scan: a cancellation after this read is found at the next boundary.
  const uint64_t cancels = cancels_->load(std::memory_order_acquire);
  if (cancels == batch.cancels_seen) return;
  batch.cancels_seen = cancels;
  int64_t counts[5] = {0, 0, 0, 0, 0};
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto gone = [&](const Waiting& w) {
      const Cancelled why = w.request->cancelled();
      if (why == Cancelled::kNo) return false;
      ++counts[static_cast<int>(why)];
      --queued_sentences_;
      queued_tokens_ -= static_cast<int64_t>(w.request->sources()[w.index].size());
      return true;
    };
    lane.queue.erase(std::remove_if(lane.queue.begin(), lane.queue.end(), gone), lane.queue.end());
  }
  bool any = false;
  for (auto& [id, w] : batch.running) any |= w.request->cancelled() != Cancelled::kNo;
  if (any) {
    batch.search->Remove([&](int64_t id) {
      const Cancelled why = batch.running.at(id).request->cancelled();
      if (why == Cancelled::kNo) return false;
      ++counts[static_cast<int>(why)];
      batch.running.erase(id);
      return true;
    });
  }
  for (Cancelled why : {Cancelled::kClient, Cancelled::kDeadline, Cancelled::kShutdown}) {
    CountCancelled(ReasonName(why), counts[static_cast<int>(why)]);
  }
}

std::vector<Scheduler::Waiting> Scheduler::TakeAdmissions(Lane& lane, Batch& batch) {
  std::vector<Waiting> taken;
  std::lock_guard<std::mutex> lock(mutex_);
  if (lane.queue.empty()) return taken;
  const bool batch_empty = batch.running.empty();
  if (options_.batching != Batching::kContinuous && !batch_empty) return taken;
  if (options_.batching == Batching::kSerial) {
    // One request at a time over every lane and model (serial batching has one worker).
    for (auto& served : served_) {
      for (auto& [beam, other] : served->lanes) {
        if (other.batches.front().size > 0) return taken;
      }
    }
  }
  // This worker's share: the lane's sentences, running and waiting, spread evenly over the
  // workers; one always joins an empty batch.
  int64_t lane_sentences = static_cast<int64_t>(lane.queue.size());
  for (const Batch& b : lane.batches) lane_sentences += b.size;
  const int64_t share = std::max<int64_t>(1, (lane_sentences + workers_ - 1) / workers_);
  const int64_t running = static_cast<int64_t>(batch.running.size());
  int64_t n = running;
  int64_t longest = n > 0 ? batch.search->running_padded_tokens() / n : 0;
  size_t count = 0;  // the queue's first `count` sentences fit
  while (count < lane.queue.size() && n < share) {
    const Waiting& w = lane.queue[count];
    if (options_.batching == Batching::kSerial && count > 0 &&
        w.request != lane.queue.front().request) {
      break;
    }
    const int64_t length = static_cast<int64_t>(w.request->sources()[w.index].size());
    const int64_t next_longest = std::max(longest, length);
    if (n > 0 && (n + 1 > options_.max_batch_sentences ||
                  (n + 1) * next_longest > options_.max_batch_tokens)) {
      break;
    }
    ++n;
    longest = next_longest;
    ++count;
  }
  if (!JoinNow(options_, running, static_cast<int64_t>(count), batch.steps_since_join)) {
    return taken;
  }
  for (size_t i = 0; i < count; ++i) {
    const Waiting& w = lane.queue.front();
    const int64_t length = static_cast<int64_t>(w.request->sources()[w.index].size());
    --queued_sentences_;
    queued_tokens_ -= length;
    admitted_tokens_ += length;
    taken.push_back(std::move(lane.queue.front()));
    lane.queue.pop_front();
  }
  // Counted as running from now, so that the lane is never seen idle while they join.
  batch.size += static_cast<int>(taken.size());
  running_sentences_ += static_cast<int64_t>(taken.size());
  return taken;
}

}  // namespace tern::inference::serve
