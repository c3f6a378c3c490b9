// How the ranks of an asynchronous run stay together without waiting for each other.
//
// Async SGD's workers share nothing but the parameter server, so none should wait for another
// between updates: a slow rank (a busier core, a slower host) must not hold the fast ones back.
// Rank 0 therefore leads: it judges the budget on its own updates, clock and epochs, validates
// its own copy, and orders checkpoints and the stop. The other ranks follow: every log interval
// each sends rank 0 its progress (a small message that never waits), and at each update it
// carries out the orders that have arrived. A checkpoint waits at most one update of each
// follower; the stop too. A follower that catches a stop signal (common/stop_signal.h) reports
// at once, and rank 0 stops the job with a checkpoint. (Sync SGD's ranks meet at every update
// anyway: they decide together at the log points instead, through collectives.)
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "trainer/progress_log.h"

namespace tern::trainer {

class AsyncCoordinator {
 public:
  // Below comm::kMaxUserTag, apart from ps/'s, the checkpoint transfer's and the watchdog's.
  static constexpr int kTagProgress = 9301;  // follower -> rank 0
  static constexpr int kTagOrder = 9302;     // rank 0 -> followers
  // Sync ranks' metrics records to rank 0 at each log point (they meet there anyway).
  static constexpr int kTagSyncRecord = 9303;
  // Sync ranks' sentence and word counts to rank 0 at each validation.
  static constexpr int kTagSyncCounts = 9304;

  enum class Order : int32_t {
    kSave = 1,          // flush, send this rank's checkpoint parts to rank 0, go on
    kStop = 2,          // send the last progress report and the final checkpoint parts, then stop
    kStalled = 3,       // validation stalled (the cyclic schedule restarts)
    kStopOnSignal = 4,  // as kStop: the job stops early on a stop signal
  };

  struct Progress {
    int64_t update = 0;     // this rank's updates so far
    int64_t sentences = 0;  // this rank's sentences so far
    int64_t words = 0;      // target words since the previous report
    double seconds = 0;     // since the previous report
    int stop_signal = 0;    // a stop signal this rank caught: it asks rank 0 to stop the job
    RankProgress record{};  // the rank's metrics.jsonl record (its rank is the sender's)
  };

  // A follower's request to stop the job (rank 0).
  struct StopRequest {
    int rank = 0;    // 0: none
    int signal = 0;  // the signal it caught
  };

  // `comm` must outlive the coordinator.
  explicit AsyncCoordinator(comm::Communicator* comm);

  // ---- The followers (ranks other than 0).
  // Sends `p` to rank 0; `last` after a stop order, as the final report.
  void Report(const Progress& p, bool last = false);
  // The orders that have arrived since the last call, oldest first. Never waits.
  std::vector<Order> Orders();

  // ---- Rank 0.
  // Sends `order` to every follower.
  void Send(Order order);
  // Takes in the progress reports that have arrived. Never waits.
  void Collect();
  // After Send(kStop): waits for every follower's last report.
  void AwaitLastReports();
  // Words/s of every rank in rank order: `own` for rank 0, each follower's over its latest
  // report that covered any words (0 before the first).
  std::vector<float> Rates(float own) const;
  // The first follower's stop request among the reports collected so far.
  StopRequest stop_request() const { return stop_request_; }
  // Sentences trained by all ranks: `own` plus each follower's latest count.
  int64_t Sentences(int64_t own) const;
  // A follower's latest report (all zero before its first).
  const Progress& latest(int rank) const { return latest_[rank]; }
  // The reports taken in since the last call, in arrival order, for the metrics file.
  std::vector<Progress> TakeNewReports();
  // "rank 1: 1712, rank 2: 1650": each follower's update count in its latest report (a follower
  // trains at its own pace, so its count differs from rank 0's).
  std::string FollowerUpdates() const;

 private:
  void Take(int source, const std::string& bytes);

  comm::Communicator* comm_;
  std::vector<Progress> latest_;       // rank 0: per rank
  std::vector<float> rates_;           // rank 0: per rank, words/s (see Rates)
  std::vector<bool> last_;             // rank 0: the rank's last report has come
  std::vector<Progress> new_reports_;  // rank 0: since the last TakeNewReports
  StopRequest stop_request_;           // rank 0
};

// A metrics record as it travels between ranks (both ends are this program).
std::string EncodeRankProgress(const RankProgress& r);
RankProgress DecodeRankProgress(const std::string& bytes);

}  // namespace tern::trainer
