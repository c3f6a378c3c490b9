// A training run's progress, on each rank: the log line and metrics.jsonl records (rank 0), the
// reports async followers send and the orders they take, sync ranks' counts, and stop signals.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "common/error.h"
#include "common/stop_signal.h"
#include "common/timer.h"
#include "trainer/progress_log.h"
#include "trainer/run.h"

namespace tern::trainer {

bool Run::RootDecides(bool decision) {
  if (ranks_ == 1 || coordinator_) return decision;  // a led run: only rank 0 decides
  Watchdog::Waiting waiting(watchdog_.get());
  char d = decision ? 1 : 0;
  comm_->Broadcast(&d, 1, 0);
  return d != 0;
}

bool Run::Follow(bool log_point) {
  const int signal = options_.stop_on_signals ? StopSignal() : 0;
  auto report = [&](bool last) {
    const double seconds = log_timer_.Seconds();
    coordinator_->Report({state_.update, state_.sentences, words_since_log_, seconds, signal,
                          OwnRecord(TakeCost(), seconds, time_offset_ + timer_.Seconds())},
                         last);
    words_since_log_ = 0;
    log_timer_.Reset();
  };
  const bool ask = signal != 0 && !stop_asked_;  // rank 0 stops the job: ask it, once
  if (log_point || ask) report(false);
  stop_asked_ |= ask;
  for (AsyncCoordinator::Order order : coordinator_->Orders()) {
    switch (order) {
      case AsyncCoordinator::Order::kStalled:
        OnValidationStalled();
        break;
      case AsyncCoordinator::Order::kSave:
        Save();
        break;
      case AsyncCoordinator::Order::kStop:
      case AsyncCoordinator::Order::kStopOnSignal:
        stopped_by_signal_ = order == AsyncCoordinator::Order::kStopOnSignal;
        report(/*last=*/true);
        Save();
        return true;  // rank 0 sends nothing after the stop
    }
  }
  return false;
}

void Run::StopFollowers() {
  Watchdog::Waiting waiting(watchdog_.get());
  coordinator_->Send(stopped_by_signal_ ? AsyncCoordinator::Order::kStopOnSignal
                                        : AsyncCoordinator::Order::kStop);
  coordinator_->AwaitLastReports();
}

bool Run::StopSignalled() {
  if (!options_.stop_on_signals) return false;
  const int own = StopSignal();
  std::string what;
  if (coordinator_) {  // rank 0 of an async run: its own signal or a follower's request
    coordinator_->Collect();
    const AsyncCoordinator::StopRequest r = coordinator_->stop_request();
    if (own == 0 && r.rank == 0) return false;
    what = own != 0 ? SignalName(own) + " on rank 0"
                    : SignalName(r.signal) + " on rank " + std::to_string(r.rank);
  } else if (ranks_ > 1) {  // sync: this update's collective told every rank
    if (signalled_ranks_ == 0) return false;
    what = own != 0 ? SignalName(own) + " on rank 0" : "a stop signal on another rank";
  } else {
    if (own == 0) return false;
    what = SignalName(own);
  }
  if (rank_ == 0)
    LOG(WARNING) << "[training] " << what << ": saving checkpoint-" << state_.update
                 << " and stopping; run the same command again to resume";
  stopped_by_signal_ = true;
  return true;
}

RankProgress Run::OwnRecord(double cost, double seconds, double elapsed) const {
  RankProgress r;
  r.rank = rank_;
  r.update = state_.update;
  r.epoch = state_.epoch + 1;
  r.elapsed_seconds = elapsed;
  r.sentences = state_.sentences;
  r.target_words = state_.target_words;
  r.cost_per_word = cost / std::max<int64_t>(words_since_log_, 1);
  r.learning_rate = last_lr_;
  r.words_per_second = static_cast<float>(words_since_log_ / std::max(seconds, 1e-9));
  if (settings_.options.drop_rate > 0) r.sent_fraction = sent_fraction_;
  const ps::StrategyStats stats = strategy_->stats();
  if (plan_.has_staleness()) r.staleness = SummarizeStaleness(stats.staleness);
  r.bytes_pushed = stats.bytes_pushed;
  r.bytes_pulled = stats.bytes_pulled;
  r.cpu_seconds = ProcessCpuSeconds();
  return r;
}

std::pair<int64_t, int64_t> Run::JobCounts() {
  int64_t counts[2] = {state_.sentences, state_.target_words};
  if (coordinator_) {
    coordinator_->Collect();
    for (int r = 1; r < ranks_; ++r) {
      counts[0] += coordinator_->latest(r).record.sentences;
      counts[1] += coordinator_->latest(r).record.target_words;
    }
  } else if (ranks_ > 1) {
    if (rank_ != 0) {
      comm_->Send(0, AsyncCoordinator::kTagSyncCounts, counts, sizeof(counts));
    } else {
      std::string bytes;
      for (int r = 1; r < ranks_; ++r) {
        comm_->Recv(r, AsyncCoordinator::kTagSyncCounts, &bytes);
        CHECK_EQ(bytes.size(), sizeof(counts));
        int64_t theirs[2];
        std::memcpy(theirs, bytes.data(), sizeof(theirs));
        counts[0] += theirs[0];
        counts[1] += theirs[1];
      }
    }
  }
  return {counts[0], counts[1]};
}

void Run::Log(double elapsed) {
  Watchdog::Waiting waiting(watchdog_.get());
  const double cost = TakeCost();
  const double seconds = log_timer_.Seconds();
  const RankProgress own = OwnRecord(cost, seconds, elapsed);
  const float rate = own.words_per_second;
  std::vector<float> rates(ranks_, rate);
  int64_t sentences = state_.sentences * ranks_;
  std::vector<RankProgress> records;  // rank 0: the lines for metrics.jsonl
  if (coordinator_) {
    coordinator_->Collect();
    rates = coordinator_->Rates(rate);
    sentences = coordinator_->Sentences(state_.sentences);
    for (const AsyncCoordinator::Progress& p : coordinator_->TakeNewReports())
      if (p.words > 0) records.push_back(p.record);  // a last report after a regular one: none
  } else if (ranks_ > 1) {
    // Sync ranks are all here: each sends rank 0 its record (a small message that never waits).
    if (rank_ != 0) {
      const std::string bytes = EncodeRankProgress(own);
      comm_->Send(0, AsyncCoordinator::kTagSyncRecord, bytes.data(), bytes.size());
    } else {
      sentences = state_.sentences;
      std::string bytes;
      for (int r = 1; r < ranks_; ++r) {
        comm_->Recv(r, AsyncCoordinator::kTagSyncRecord, &bytes);
        records.push_back(DecodeRankProgress(bytes));
        rates[r] = records.back().words_per_second;
        sentences += records.back().sentences;
      }
    }
  }
  if (rank_ == 0) {
    records.insert(records.begin(), own);
    for (const RankProgress& record : records) metrics_->Append(MetricsLine(record));
    ProgressRecord r;
    r.epoch = state_.epoch + 1;
    r.update = state_.update;
    r.sentences = sentences;
    r.cost_per_word = cost / std::max<int64_t>(words_since_log_, 1);
    r.elapsed_seconds = elapsed;
    r.words_per_second = rates;
    r.learning_rate = last_lr_;
    if (settings_.options.drop_rate > 0) r.sent_fraction = sent_fraction_;
    if (loss_scaler_) {
      r.loss_scale = loss_scaler_->scale();
      r.skipped_steps = loss_scaler_->skipped();
    }
    std::printf("%s\n", ProgressLine(r).c_str());
    std::fflush(stdout);
  }
  words_since_log_ = 0;
  log_timer_.Reset();
}

}  // namespace tern::trainer
