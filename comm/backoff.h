// How a thread waits on a nonblocking MPI call it polls (mpi_communicator.cc): Open MPI's blocking
// calls spin on a core each, which starves the compute and other communication threads when
// ranks share cores. Spin briefly for latency, then yield, then sleep in naps that double up to a
// cap: a thread that waits long (a parameter server's shard thread between requests, a worker
// between rounds) wakes about 1,500 times a second instead of 50,000, each wake a
// syscall and a pass of MPI's progress engine on a core the compute threads need.
#pragma once

#include <algorithm>
#include <chrono>
#include <thread>

namespace tern::comm {

class Backoff {
 public:
  static constexpr int kSpins = 64;    // polls before the first yield
  static constexpr int kYields = 256;  // polls before the first nap
  static constexpr std::chrono::microseconds kFirstNap{20};
  static constexpr std::chrono::microseconds kLongestNap{640};

  // What the next wait is: zero (spin), a yield (returned as zero with *yield set) or a nap.
  std::chrono::microseconds Next(bool* yield) {
    *yield = false;
    ++polls_;
    if (polls_ < kSpins) return std::chrono::microseconds(0);
    if (polls_ < kYields) {
      *yield = true;
      return std::chrono::microseconds(0);
    }
    const std::chrono::microseconds nap = nap_;
    nap_ = std::min(nap_ * 2, kLongestNap);
    return nap;
  }

  void Wait() {
    bool yield = false;
    const std::chrono::microseconds nap = Next(&yield);
    if (yield) {
      std::this_thread::yield();
    } else if (nap.count() > 0) {
      std::this_thread::sleep_for(nap);
    }
  }

 private:
  int polls_ = 0;
  std::chrono::microseconds nap_ = kFirstNap;
};

}  // namespace tern::comm
