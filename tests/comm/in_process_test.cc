// The in-process communicator: the shared point-to-point and collective checks over 1-4 ranks,
// concurrent senders, and no hang when a rank fails.
#include "comm/in_process.h"

#include <atomic>
#include <thread>

#include "common/error.h"
#include "tests/comm/collective_checks.h"

namespace tern::comm {
namespace {

class InProcessTest : public ::testing::TestWithParam<int> {};

TEST_P(InProcessTest, PointToPoint) { RunInProcess(GetParam(), testing::CheckPointToPoint); }

TEST_P(InProcessTest, Collectives) { RunInProcess(GetParam(), testing::CheckCollectives); }

TEST_P(InProcessTest, ConcurrentSendersOnEveryRank) {
  // Every rank runs 3 sender threads and one receiver that counts what arrives, as a parameter
  // server's worker and server threads share one communicator.
  constexpr int kThreads = 3, kMessages = 200;
  RunInProcess(GetParam(), [](Communicator& comm) {
    const int n = comm.size();
    std::thread receiver([&] {
      std::string bytes;
      std::vector<int> next(n * kThreads, 0);
      for (int i = 0; i < n * kThreads * kMessages; ++i) {
        const int source = comm.Recv(kAnySource, 7, &bytes);
        const int thread = bytes[0], seq = std::stoi(bytes.substr(1));
        // Order holds per (source, tag): each sender thread's messages arrive in order.
        EXPECT_EQ(seq, next[source * kThreads + thread]++);
      }
    });
    std::vector<std::thread> senders;
    for (int t = 0; t < kThreads; ++t) {
      senders.emplace_back([&, t] {
        for (int i = 0; i < kMessages * n; ++i) {
          comm.Send((comm.rank() + i) % n, 7,
                    std::string(1, static_cast<char>(t)) + std::to_string(i / n));
        }
      });
    }
    for (std::thread& s : senders) s.join();
    receiver.join();
    comm.Barrier();
  });
}

INSTANTIATE_TEST_SUITE_P(Ranks, InProcessTest, ::testing::Values(1, 2, 3, 4));

TEST(InProcessFailureTest, AFailingRankWakesBlockedReceivers) {
  EXPECT_THROW(RunInProcess(3,
                            [](Communicator& comm) {
                              if (comm.rank() == 1) Fail("rank 1 broke");
                              std::string bytes;
                              comm.Recv(1, 0, &bytes);  // would wait forever
                            }),
               Error);
}

}  // namespace
}  // namespace tern::comm
