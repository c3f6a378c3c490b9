// Checks every Communicator implementation must pass, run by the in-process test (threads) and
// the MPI test (processes). Values are small integers, so sums are exact in float32.
#pragma once

#include <gtest/gtest.h>

#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "comm/communicator.h"

namespace tern::comm::testing {

// Uneven counts, as a shard map with a remainder produces (one rank may own nothing).
inline std::vector<int64_t> UnevenCounts(int size) {
  std::vector<int64_t> counts(size);
  for (int r = 0; r < size; ++r) counts[r] = r == 1 ? 0 : 5 + 3 * r;
  return counts;
}

inline void CheckPointToPoint(Communicator& comm) {
  const int r = comm.rank(), n = comm.size();
  // Ordered messages to every rank (self included) with two tags interleaved, from a second
  // thread: Send may block until the receiver takes the message (MPI rendezvous).
  std::thread sender([&] {
    for (int peer = 0; peer < n; ++peer) {
      for (int i = 0; i < 5; ++i) {
        comm.Send(peer, 1, std::to_string(r * 100 + i));
        comm.Send(peer, 2, std::string(i * 30000, static_cast<char>('a' + r)));
      }
    }
  });
  std::string bytes;
  for (int peer = n - 1; peer >= 0; --peer) {
    for (int i = 0; i < 5; ++i) {
      EXPECT_EQ(comm.Recv(peer, 2, &bytes), peer);
      EXPECT_EQ(bytes, std::string(i * 30000, static_cast<char>('a' + peer)));
    }
    for (int i = 0; i < 5; ++i) {
      EXPECT_EQ(comm.Recv(peer, 1, &bytes), peer);
      EXPECT_EQ(bytes, std::to_string(peer * 100 + i));
    }
  }
  sender.join();
  int source = -1;
  EXPECT_FALSE(comm.TryRecv(kAnySource, 3, &bytes, &source));
  comm.Barrier();
  // Any-source receives see one message from each rank.
  comm.Send((r + 1) % n, 4, std::to_string(r));
  comm.Barrier();
  EXPECT_TRUE(comm.TryRecv(kAnySource, 4, &bytes, &source) ||
              comm.Recv(kAnySource, 4, &bytes) >= 0);
  EXPECT_EQ(bytes, std::to_string((r + n - 1) % n));
  comm.Barrier();
}

inline void CheckCollectives(Communicator& comm) {
  const int r = comm.rank(), n = comm.size();
  // AllReduce of an odd length (not divisible by n).
  std::vector<float> data(1001);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<float>((r + 1) * (i % 7));
  comm.AllReduceSum(Tensor(data.data(), Shape{1001}));
  const float rank_sum = n * (n + 1) / 2.f;
  for (size_t i = 0; i < data.size(); ++i) ASSERT_EQ(data[i], rank_sum * (i % 7)) << i;

  const std::vector<int64_t> counts = UnevenCounts(n);
  const int64_t total = std::accumulate(counts.begin(), counts.end(), int64_t{0});
  const std::vector<int64_t> offsets = Offsets(counts);
  std::vector<float> in(total);
  for (int64_t i = 0; i < total; ++i) in[i] = static_cast<float>(i + 1000 * r);
  std::vector<float> mine(counts[r] + 1, -1.f);  // +1: a guard that must stay untouched
  comm.ReduceScatterSum(Tensor(in.data(), Shape{total}), counts,
                        Tensor(mine.data(), Shape{counts[r]}));
  for (int64_t j = 0; j < counts[r]; ++j) {
    EXPECT_EQ(mine[j], n * static_cast<float>(offsets[r] + j) + 1000.f * (n * (n - 1) / 2));
  }
  EXPECT_EQ(mine.back(), -1.f);

  std::vector<float> part(counts[r]);
  for (int64_t j = 0; j < counts[r]; ++j) part[j] = static_cast<float>(r * 10000 + j);
  std::vector<float> all(total, -1.f);
  comm.AllGather(Tensor(part.data(), Shape{counts[r]}), counts, Tensor(all.data(), Shape{total}));
  for (int owner = 0; owner < n; ++owner) {
    for (int64_t j = 0; j < counts[owner]; ++j) {
      EXPECT_EQ(all[offsets[owner] + j], static_cast<float>(owner * 10000 + j));
    }
  }

  std::string message = r == n - 1 ? std::string("from the last rank") : std::string(18, '?');
  comm.Broadcast(message.data(), message.size(), n - 1);
  EXPECT_EQ(message, "from the last rank");
  comm.Barrier();
}

}  // namespace tern::comm::testing
