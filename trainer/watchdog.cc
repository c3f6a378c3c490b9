// The stall watchdog (see watchdog.h).
#include "trainer/watchdog.h"

#include <glog/logging.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "common/error.h"

namespace tern::trainer {
namespace {

struct HeartbeatMessage {
  int64_t pid, update, phase;
};

std::string Seconds(double s) {
  char text[32];
  std::snprintf(text, sizeof(text), s < 10 ? "%.1f s" : "%.0f s", s);
  return text;
}

}  // namespace

Watchdog::Watchdog(comm::Communicator* comm, double stall_seconds)
    : comm_(comm),
      stall_seconds_(stall_seconds),
      interval_(std::clamp(stall_seconds / 5, 0.01, 5.0)),
      start_(std::chrono::steady_clock::now()),
      peers_(comm->size()) {
  CHECK_GT(stall_seconds, 0);
  for (int r = 0; r < comm->size(); ++r) {
    // Rank 0 watches everyone else; the others watch rank 0.
    peers_[r].watched = r != comm->rank() && (comm->rank() == 0 || r == 0);
  }
  thread_ = std::thread([this] { Loop(); });
}

Watchdog::~Watchdog() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  stop_cv_.notify_all();
  thread_.join();
}

std::vector<std::string> Watchdog::reports() const {
  std::lock_guard<std::mutex> lock(mu_);
  return reports_;
}

double Watchdog::Now() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

void Watchdog::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    lock.unlock();
    const double now = Now();
    if (now - last_loop_ >= stall_seconds_) {
      // This process itself was stopped or frozen: the silence of the others is its own.
      LOG(WARNING) << "[watchdog] this rank (" << comm_->rank() << ") was paused for "
                   << Seconds(now - last_loop_);
      for (Peer& p : peers_) p.last_beat = p.update_since = now;
    }
    last_loop_ = now;
    try {
      Beat(waiting_.load(std::memory_order_relaxed) > 0 ? kWaitingForOthers : kComputing);
      Receive(now);
    } catch (const Error& e) {
      // A peer died: the worker's own calls fail and end the job; the watchdog only stops.
      LOG(WARNING) << "[watchdog] stopped: " << e.what();
      return;
    }
    Check(now);
    lock.lock();
    stop_cv_.wait_for(lock, std::chrono::duration<double>(interval_), [this] { return stop_; });
  }
  lock.unlock();
  try {
    Beat(kDone);
  } catch (const Error&) {
  }
}

void Watchdog::Beat(int64_t phase) {
  const HeartbeatMessage beat{static_cast<int64_t>(::getpid()),
                              update_.load(std::memory_order_relaxed), phase};
  for (int r = 0; r < comm_->size(); ++r) {
    if (r == comm_->rank() || !(comm_->rank() == 0 || r == 0)) continue;
    comm_->Send(r, kTagHeartbeat, &beat, sizeof(beat));
  }
}

void Watchdog::Receive(double now) {
  std::string bytes;
  int source = -1;
  while (comm_->TryRecv(comm::kAnySource, kTagHeartbeat, &bytes, &source)) {
    CHECK_EQ(bytes.size(), sizeof(HeartbeatMessage));
    HeartbeatMessage beat;
    std::memcpy(&beat, bytes.data(), sizeof(beat));
    Peer& p = peers_[source];
    // Back from silence: its progress clock restarts (it could not progress while stopped).
    if (now - p.last_beat >= stall_seconds_) p.update_since = now;
    p.pid = beat.pid;
    p.last_beat = now;
    p.phase = beat.phase;
    p.done = p.done || beat.phase == kDone;
    if (beat.update != p.update) {
      p.update = beat.update;
      p.update_since = now;
    }
  }
}

void Watchdog::Check(double now) {
  for (size_t r = 0; r < peers_.size(); ++r) {
    Peer& p = peers_[r];
    if (!p.watched || p.done) continue;
    const std::string who = "rank " + std::to_string(r) +
                            (p.pid ? " (pid " + std::to_string(p.pid) + ")" : std::string());
    const bool silent = now - p.last_beat >= stall_seconds_;
    const bool stuck =
        !silent && p.phase == kComputing && p.update >= 0 && now - p.update_since >= stall_seconds_;
    if (silent && !p.silent_reported) {
      Report(who + " has sent no heartbeat for " + Seconds(now - p.last_beat) +
             (p.update >= 0 ? " (last seen at update " + std::to_string(p.update) + ")"
                            : " (never heard from)") +
             ": stalled or stopped? Every other rank waits for it");
    }
    if (stuck && !p.stuck_reported) {
      Report(who + " has made no progress for " + Seconds(now - p.update_since) + " (update " +
             std::to_string(p.update) + ") while computing: stalled?");
    }
    if ((p.silent_reported && !silent) || (p.stuck_reported && !stuck && !silent)) {
      Report(who + " is alive again (update " + std::to_string(p.update) + ")");
    }
    p.silent_reported = silent;
    p.stuck_reported = stuck;
  }
}

void Watchdog::Report(const std::string& line) {
  LOG(WARNING) << "[watchdog] " << line;
  std::lock_guard<std::mutex> lock(mu_);
  reports_.push_back(line);
}

}  // namespace tern::trainer
