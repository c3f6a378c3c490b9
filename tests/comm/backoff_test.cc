#include "comm/backoff.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>

namespace tern::comm {
namespace {

using std::chrono::microseconds;

// Spins, then yields, then naps that double from the first to the longest and stay there.
TEST(BackoffTest, SpinsThenYieldsThenNapsThatDoubleToTheCap) {
  Backoff b;
  bool yield = false;
  int poll = 1;
  for (; poll < Backoff::kSpins; ++poll) {
    EXPECT_EQ(b.Next(&yield).count(), 0) << poll;
    EXPECT_FALSE(yield) << poll;
  }
  for (; poll < Backoff::kYields; ++poll) {
    EXPECT_EQ(b.Next(&yield).count(), 0) << poll;
    EXPECT_TRUE(yield) << poll;
  }
  microseconds want = Backoff::kFirstNap;
  for (int nap = 0; nap < 12; ++nap) {
    EXPECT_EQ(b.Next(&yield), want) << nap;
    EXPECT_FALSE(yield);
    want = std::min(want * 2, Backoff::kLongestNap);
  }
  EXPECT_EQ(want, Backoff::kLongestNap);
  EXPECT_EQ(b.Next(&yield), Backoff::kLongestNap);
}

// A fresh wait starts from spinning again: each blocking call has its own Backoff.
TEST(BackoffTest, AFreshBackoffSpinsFirst) {
  Backoff b;
  bool yield = true;
  EXPECT_EQ(b.Next(&yield).count(), 0);
  EXPECT_FALSE(yield);
}

}  // namespace
}  // namespace tern::comm
