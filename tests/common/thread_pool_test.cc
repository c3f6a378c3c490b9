#include "common/thread_pool.h"

#include <gtest/gtest.h>
#include <sched.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

namespace tern {
namespace {

TEST(ThreadPoolTest, CoversEveryIndexOnce) {
  SetNumThreads(2);
  std::vector<std::atomic<int>> hits(10007);
  for (int round = 0; round < 50; ++round) {
    ParallelFor(hits.size(), 100, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) hits[i]++;
    });
  }
  for (auto& h : hits) EXPECT_EQ(h.load(), 50);
}

TEST(ThreadPoolTest, NestedCallsRunSerially) {
  SetNumThreads(2);
  std::atomic<int64_t> total{0};
  ParallelFor(100, 10, [&](int64_t b, int64_t e) {
    ParallelFor(e - b, 1, [&](int64_t b2, int64_t e2) { total += e2 - b2; });
  });
  EXPECT_EQ(total.load(), 100);
}

TEST(ThreadPoolTest, ManyTinyRegionsInARowEachCoverEveryIndex) {
  // As a decoder step calls it: many regions of little work, back to back, the pool's threads
  // spinning between them.
  SetNumThreads(2);
  for (int round = 0; round < 20000; ++round) {
    std::atomic<int64_t> total{0};
    ParallelFor(4, 1, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) total += i + 1;
    });
    ASSERT_EQ(total.load(), 10) << "round " << round;
  }
}

TEST(ThreadPoolTest, ThreadsThatWentToSleepAreWokenForTheNextRegion) {
  SetNumThreads(2);
  for (int round = 0; round < 5; ++round) {
    // Longer than the threads spin: they sleep, and the next region must wake them.
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    std::vector<std::atomic<int>> hits(1000);
    std::atomic<int> callers{0};
    ParallelFor(hits.size(), 100, [&](int64_t b, int64_t e) {
      ++callers;
      for (int64_t i = b; i < e; ++i) hits[i]++;
    });
    EXPECT_EQ(callers.load(), 2);
    for (auto& h : hits) ASSERT_EQ(h.load(), 1);
  }
}

TEST(ThreadPoolTest, ResizingBetweenRegionsKeepsCoverage) {
  for (int threads : {2, 1, 3, 2}) {
    SetNumThreads(threads);
    std::atomic<int64_t> total{0};
    ParallelFor(1000, 10, [&](int64_t b, int64_t e) { total += e - b; });
    EXPECT_EQ(total.load(), 1000) << threads << " threads";
  }
  SetNumThreads(2);
}

TEST(ThreadPoolTest, UsableCoresFollowTheAffinity) {
  EXPECT_GE(UsableCores(), 1);
  EXPECT_LE(UsableCores(), static_cast<int>(std::thread::hardware_concurrency()));
  // A thread bound to one core (as taskset or mpirun --bind-to core bind a rank) sees one.
  int seen = 0;
  std::thread bound([&] {
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(sched_getcpu(), &one);
    if (sched_setaffinity(0, sizeof(one), &one) == 0) seen = UsableCores();
  });
  bound.join();
  EXPECT_EQ(seen, 1);
}

}  // namespace
}  // namespace tern
