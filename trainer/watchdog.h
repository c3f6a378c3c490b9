// The stall watchdog: names a rank that stops making progress without dying (kill -STOP, a
// frozen host, a hung kernel), which otherwise leaves every other rank waiting silently in a
// collective or for a reply.
//
// Every rank runs a heartbeat thread. Each beat sends (pid, update, phase) point-to-point on
// kTagHeartbeat: rank 0 beats to every rank, the others to rank 0. Rank 0 watches every rank and
// the others watch rank 0, so a stall of any one rank (rank 0 included) is reported. A watched
// rank is reported when
//  - no beat has come from it for stall_seconds ("has sent no heartbeat": the process is
//    stopped or frozen; its heartbeat thread does not run), or
//  - its beats say it is computing (not waiting for others) and its update has not moved for
//    stall_seconds ("has made no progress": hung in compute or data).
// Each stall is reported once, and its end once ("is alive again"). Ranks waiting in
// communication are never reported: they are waiting for the one that stalled. A watchdog that
// finds itself paused (its own process was stopped) restarts its clocks instead of reporting.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "comm/communicator.h"

namespace tern::trainer {

class Watchdog {
 public:
  // Below comm::kMaxUserTag, apart from ps/'s and the checkpoint transfer's tags.
  static constexpr int kTagHeartbeat = 9201;

  // Starts the heartbeat thread. Beats every stall_seconds / 5 (at most every 5 s).
  // `comm` must outlive the watchdog; its point-to-point calls must be thread-safe.
  Watchdog(comm::Communicator* comm, double stall_seconds);
  // Sends a last beat saying this rank is done (so its exit is not a stall) and stops.
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  // The worker finished update `update`.
  void Progress(int64_t update) { update_.store(update, std::memory_order_relaxed); }

  // While one lives, this rank waits for others (communication, or rank 0's validation).
  class Waiting {
   public:
    explicit Waiting(Watchdog* w) : w_(w) {
      if (w_) w_->waiting_.fetch_add(1, std::memory_order_relaxed);
    }
    ~Waiting() {
      if (w_) w_->waiting_.fetch_sub(1, std::memory_order_relaxed);
    }
    Waiting(const Waiting&) = delete;
    Waiting& operator=(const Waiting&) = delete;

   private:
    Watchdog* w_;
  };

  // The lines reported so far (they also go to the log as warnings).
  std::vector<std::string> reports() const;

 private:
  enum Phase : int64_t { kComputing = 0, kWaitingForOthers = 1, kDone = 2 };
  struct Peer {
    bool watched = false;
    bool done = false;
    int64_t pid = 0;
    int64_t update = -1;
    int64_t phase = kComputing;
    double last_beat = 0;     // seconds on the watchdog's clock
    double update_since = 0;  // when `update` was first seen
    bool silent_reported = false;
    bool stuck_reported = false;
  };

  void Loop();
  void Beat(int64_t phase);
  void Receive(double now);
  void Check(double now);
  void Report(const std::string& line);
  double Now() const;

  comm::Communicator* comm_;
  const double stall_seconds_;
  const double interval_;
  const std::chrono::steady_clock::time_point start_;
  std::atomic<int64_t> update_{0};
  std::atomic<int> waiting_{0};
  std::vector<Peer> peers_;  // heartbeat thread only
  double last_loop_ = 0;     // heartbeat thread only: when its last round ran

  mutable std::mutex mu_;
  std::condition_variable stop_cv_;
  bool stop_ = false;                 // GUARDED_BY(mu_)
  std::vector<std::string> reports_;  // GUARDED_BY(mu_)
  std::thread thread_;
};

}  // namespace tern::trainer
