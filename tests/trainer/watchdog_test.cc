// The stall watchdog over the in-process communicator: a rank that stops beating, or beats but
// makes no progress while computing, is named within the stall time, and its recovery too; ranks
// that progress or wait for others are never named.
#include "trainer/watchdog.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "comm/in_process.h"

namespace tern::trainer {
namespace {

using std::chrono::milliseconds;
constexpr double kStall = 0.3;  // seconds

// Whether one of `lines` starts with `who` and contains `what`.
bool Contains(const std::vector<std::string>& lines, const std::string& who,
              const std::string& what) {
  for (const std::string& l : lines)
    if (l.rfind(who, 0) == 0 && l.find(what) != std::string::npos) return true;
  return false;
}

// Waits (bounded) until `w` has reported such a line.
bool WaitForReport(const Watchdog& w, const std::string& who, const std::string& what) {
  for (int i = 0; i < 200; ++i) {
    if (Contains(w.reports(), who, what)) return true;
    std::this_thread::sleep_for(milliseconds(20));
  }
  return false;
}

TEST(WatchdogTest, NamesARankThatSendsNoHeartbeatAndItsReturn) {
  comm::RunInProcess(2, [](comm::Communicator& comm) {
    if (comm.rank() == 0) {
      Watchdog w(&comm, kStall);
      Watchdog::Waiting waiting(&w);  // rank 0 only waits here, so rank 1 never names it
      // Rank 1 has no watchdog yet: as if its process were stopped.
      EXPECT_TRUE(WaitForReport(w, "rank 1 ", "has sent no heartbeat for"));
      comm.Barrier();  // rank 1 starts beating
      EXPECT_TRUE(WaitForReport(w, "rank 1 ", "is alive again"));
      comm.Barrier();
    } else {
      comm.Barrier();
      Watchdog w(&comm, kStall);
      Watchdog::Waiting waiting(&w);
      comm.Barrier();
      EXPECT_TRUE(w.reports().empty()) << w.reports()[0];  // rank 0 beat all along
    }
  });
}

TEST(WatchdogTest, NamesARankStuckComputingButNotOneWaitingForIt) {
  comm::RunInProcess(2, [](comm::Communicator& comm) {
    Watchdog w(&comm, kStall);
    if (comm.rank() == 0) {
      w.Progress(7);
      {
        // Waiting on rank 1 (as in a collective) for far longer than the stall time.
        Watchdog::Waiting waiting(&w);
        EXPECT_TRUE(WaitForReport(w, "rank 1 ", "has made no progress for"));
        EXPECT_TRUE(Contains(w.reports(), "rank 1 ", "(update 3) while computing"));
        comm.Barrier();
      }
    } else {
      w.Progress(3);
      // "Computing" update 4 without finishing it, beats still going.
      std::this_thread::sleep_for(milliseconds(static_cast<int>(kStall * 1000 * 4)));
      comm.Barrier();
      EXPECT_FALSE(Contains(w.reports(), "rank 0", "")) << "rank 0 only waited";
    }
  });
}

TEST(WatchdogTest, QuietWhileEveryRankProgresses) {
  comm::RunInProcess(3, [](comm::Communicator& comm) {
    Watchdog w(&comm, kStall);
    for (int update = 1; update <= 40; ++update) {
      w.Progress(update);
      std::this_thread::sleep_for(milliseconds(20));
    }
    comm.Barrier();
    EXPECT_TRUE(w.reports().empty()) << w.reports()[0];
  });
}

}  // namespace
}  // namespace tern::trainer
