#include "inference/serve/scheduler.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "common/error.h"
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

Scheduler::Scheduler(std::string name, std::shared_ptr<const LoadedModel> model,
                     const SchedulerOptions& options, ServeMetrics* metrics)
    : name_(std::move(name)),
      options_(options),
      metrics_(metrics),
      labels_(Labels({{"model", name_}})) {
  CHECK(model != nullptr && metrics != nullptr);
  served_.push_back(std::make_unique<Served>());
  served_.front()->model = std::move(model);
  PublishQueue();
  thread_ = std::thread([this] { Run(); });
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
      const double rate = std::max(tokens_per_second_, 1.0);
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
    auto request = std::make_shared<Request>(model, std::move(sources), beam, n_best);
    Lane& lane = (*served)->lanes[beam];
    for (size_t i = 0; i < request->sources().size(); ++i) {
      if (request->sources()[i].empty()) continue;
      lane.queue.push_back({request, i});
      ++queued_sentences_;
    }
    queued_tokens_ += tokens;
    PublishQueue();
    wake_.notify_one();
    return {.status = Submission::kAccepted, .request = std::move(request), .tokens = tokens};
  }
}

void Scheduler::Swap(std::shared_ptr<const LoadedModel> model) {
  std::lock_guard<std::mutex> lock(mutex_);
  served_.push_front(std::make_unique<Served>());
  served_.front()->model = std::move(model);
  wake_.notify_one();
}

void Scheduler::Drain() {
  std::lock_guard<std::mutex> lock(mutex_);
  draining_ = true;
}

bool Scheduler::WaitIdle(Clock::time_point until) {
  std::unique_lock<std::mutex> lock(mutex_);
  return idle_.wait_until(lock, until, [&] {
    return stop_ || (queued_sentences_ == 0 && running_sentences_ == 0 && !stepping_);
  });
}

void Scheduler::Stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stop_ && !thread_.joinable()) return;
    stop_ = true;
    wake_.notify_all();
    idle_.notify_all();
  }
  if (thread_.joinable()) thread_.join();
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

void Scheduler::Run() {
  std::unique_lock<std::mutex> lock(mutex_);
  std::vector<std::pair<Served*, Lane*>> work;
  std::deque<std::pair<Clock::time_point, int64_t>> admitted;  // for the recent pace
  for (;;) {
    wake_.wait(lock, [&] { return stop_ || HasWork(); });
    if (stop_) break;
    // A model that was swapped out leaves once its requests are done.
    for (size_t i = 1; i < served_.size();) {
      bool busy = false;
      for (auto& [beam, lane] : served_[i]->lanes)
        busy |= !lane.queue.empty() || !lane.running.empty();
      if (busy) {
        ++i;
      } else {
        served_.erase(served_.begin() + static_cast<std::ptrdiff_t>(i));
      }
    }
    work.clear();
    for (auto& served : served_) {
      for (auto& [beam, lane] : served->lanes) {
        if (!lane.queue.empty() || !lane.running.empty()) work.push_back({served.get(), &lane});
      }
    }
    stepping_ = true;
    lock.unlock();
    for (auto [served, lane] : work) StepLane(*served, *lane);
    lock.lock();
    stepping_ = false;
    int running = 0;
    for (auto& served : served_) {
      for (auto& [beam, lane] : served->lanes) running += static_cast<int>(lane.running.size());
    }
    running_sentences_ = running;
    // Tokens admitted over the last ten seconds, for Retry-After.
    const Clock::time_point now = Clock::now();
    admitted.push_back({now, admitted_tokens_});
    admitted_tokens_ = 0;
    int64_t sum = 0;
    while (now - admitted.front().first > std::chrono::seconds(10)) admitted.pop_front();
    for (const auto& a : admitted) sum += a.second;
    const double span = std::chrono::duration<double>(now - admitted.front().first).count();
    tokens_per_second_ = span > 0.5 ? static_cast<double>(sum) / span : tokens_per_second_;
    PublishQueue();
    if (!HasWork()) idle_.notify_all();
  }
  // Stopped: whatever is left is answered as cancelled.
  for (auto& served : served_) {
    for (auto& [beam, lane] : served->lanes) {
      for (auto& w : lane.queue) w.request->Cancel(Cancelled::kShutdown);
      for (auto& [id, w] : lane.running) w.request->Cancel(Cancelled::kShutdown);
      lane.queue.clear();
      lane.running.clear();
      lane.search.reset();
    }
  }
  queued_sentences_ = queued_tokens_ = 0;
  running_sentences_ = 0;
  idle_.notify_all();
}

void Scheduler::StepLane(Served& served, Lane& lane) {
  try {
    DropCancelled(lane);
    std::vector<Lane::Waiting> joining = TakeAdmissions(lane);
    if (!joining.empty()) {
      const int beam = joining.front().request->beam();
      if (!lane.search) lane.search = served.model->translator->NewSearch(beam);
      lane.search->set_batch_room(options_.max_batch_sentences);
      std::vector<std::vector<int32_t>> sources;
      std::vector<int64_t> ids;
      for (Lane::Waiting& w : joining) {
        sources.push_back(w.request->sources()[w.index]);
        ids.push_back(lane.next_id);
        lane.running.emplace(lane.next_id++, std::move(w));
      }
      lane.search->Admit(sources, ids);
    }
    if (lane.running.empty()) return;
    metrics_->Observe("tern_batch_sentences", labels_, static_cast<double>(lane.running.size()));
    std::vector<BeamSearch::FinishedSentence> finished;
    lane.search->Step(&finished);
    metrics_->AddCounter("tern_decoder_steps_total", labels_);
    for (BeamSearch::FinishedSentence& f : finished) {
      auto it = lane.running.find(f.id);
      CHECK(it != lane.running.end());
      it->second.request->Answer(it->second.index, std::move(f.hypotheses));
      lane.running.erase(it);
    }
  } catch (const std::exception& e) {
    // A failure inside the model (a GPU error): this batch's requests fail, the lane starts over.
    LOG(ERROR) << "model " << name_ << ": decoding failed: " << e.what();
    for (auto& [id, w] : lane.running) w.request->Cancel(Cancelled::kFailed);
    CountCancelled("failed", static_cast<int64_t>(lane.running.size()));
    lane.running.clear();
    lane.search.reset();
  }
}

void Scheduler::DropCancelled(Lane& lane) {
  int64_t counts[5] = {0, 0, 0, 0, 0};
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto gone = [&](const Lane::Waiting& w) {
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
  for (auto& [id, w] : lane.running) any |= w.request->cancelled() != Cancelled::kNo;
  if (any) {
    lane.search->Remove([&](int64_t id) {
      const Cancelled why = lane.running.at(id).request->cancelled();
      if (why == Cancelled::kNo) return false;
      ++counts[static_cast<int>(why)];
      lane.running.erase(id);
      return true;
    });
  }
  for (Cancelled why : {Cancelled::kClient, Cancelled::kDeadline, Cancelled::kShutdown}) {
    CountCancelled(ReasonName(why), counts[static_cast<int>(why)]);
  }
}

std::vector<Scheduler::Lane::Waiting> Scheduler::TakeAdmissions(Lane& lane) {
  std::vector<Lane::Waiting> taken;
  std::lock_guard<std::mutex> lock(mutex_);
  if (lane.queue.empty()) return taken;
  const bool batch_empty = lane.running.empty();
  if (options_.batching != Batching::kContinuous && !batch_empty) return taken;
  if (options_.batching == Batching::kSerial) {
    // One request at a time over every lane and model.
    for (auto& served : served_) {
      for (auto& [beam, other] : served->lanes) {
        if (!other.running.empty()) return taken;
      }
    }
  }
  int64_t n = static_cast<int64_t>(lane.running.size());
  int64_t longest = n > 0 ? lane.search->running_padded_tokens() / n : 0;
  while (!lane.queue.empty()) {
    const Lane::Waiting& w = lane.queue.front();
    if (options_.batching == Batching::kSerial && !taken.empty() &&
        w.request != taken.front().request) {
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
    --queued_sentences_;
    queued_tokens_ -= length;
    admitted_tokens_ += length;
    taken.push_back(std::move(lane.queue.front()));
    lane.queue.pop_front();
  }
  return taken;
}

}  // namespace tern::inference::serve
