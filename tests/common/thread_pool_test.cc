#include "common/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
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

}  // namespace
}  // namespace tern
