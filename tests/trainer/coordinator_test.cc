// AsyncCoordinator over the in-process communicator (whose small sends, like MPI's, complete
// without the receiver): a follower never waits to report or to look for orders, rank 0 never
// waits to collect, orders arrive in the order given, and the stop waits for every follower's
// last report.
#include "trainer/coordinator.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "comm/in_process.h"

namespace tern::trainer {
namespace {

using Order = AsyncCoordinator::Order;

void WaitFor(const std::atomic<bool>& flag) {
  while (!flag.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

void WaitFor(const std::atomic<int>& count, int n) {
  while (count.load() < n) std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

TEST(AsyncCoordinatorTest, NobodyWaitsForReportsOrOrders) {
  std::atomic<int> reported{0};
  std::atomic<bool> looked{false}, ordered{false};
  comm::RunInProcess(3, [&](comm::Communicator& comm) {
    AsyncCoordinator c(&comm);
    if (comm.rank() == 0) {
      c.Collect();  // nothing has come: returns at once
      EXPECT_EQ(c.Rates(7.f), (std::vector<float>{7.f, 0.f, 0.f}));
      EXPECT_EQ(c.Sentences(10), 10);
      looked = true;
      c.Send(Order::kSave);
      c.Send(Order::kStalled);
      ordered = true;
      WaitFor(reported, 2);
      c.Collect();
      EXPECT_EQ(c.Rates(7.f), (std::vector<float>{7.f, 100.f, 400.f}));
      EXPECT_EQ(c.Sentences(10), 10 + 11 + 12);
      EXPECT_EQ(c.latest(2).update, 22);
    } else {
      const int r = comm.rank();
      WaitFor(looked);
      // Rank 1 reports before rank 0 collects, and twice: the latest counts.
      c.Report({5, 1, 50, 1.0});
      c.Report({10 * r + 2, 10 + r, 200 * r * r, 2.0});
      ++reported;
      WaitFor(ordered);
      std::vector<Order> orders;
      while (orders.size() < 2)
        for (Order o : c.Orders()) orders.push_back(o);
      EXPECT_EQ(orders, (std::vector<Order>{Order::kSave, Order::kStalled}));
      EXPECT_TRUE(c.Orders().empty());
    }
    comm.Barrier();
  });
}

TEST(AsyncCoordinatorTest, TheStopWaitsForEveryLastReport) {
  comm::RunInProcess(3, [](comm::Communicator& comm) {
    AsyncCoordinator c(&comm);
    if (comm.rank() == 0) {
      c.Send(Order::kStop);
      c.AwaitLastReports();
      EXPECT_EQ(c.latest(1).update, 31);
      EXPECT_EQ(c.latest(2).update, 32);  // sent last, after a pause
      EXPECT_EQ(c.Rates(1.f), (std::vector<float>{1.f, 21.f, 22.f}));
      EXPECT_EQ(c.FollowerUpdates(), "rank 1: 31, rank 2: 32");
    } else {
      std::vector<Order> orders;
      while (orders.empty()) orders = c.Orders();
      EXPECT_EQ(orders, std::vector<Order>{Order::kStop});
      c.Report({20 + comm.rank(), 0, 20 + comm.rank(), 1.0});
      if (comm.rank() == 2) std::this_thread::sleep_for(std::chrono::milliseconds(50));
      c.Report({30 + comm.rank(), 0, 0, 1.0}, /*last=*/true);  // no words: the rate stays
    }
    comm.Barrier();
  });
}

// A follower that caught a stop signal asks rank 0 in a report; the first request is the one
// kept, and the stop order that follows says why.
TEST(AsyncCoordinatorTest, AFollowersStopRequestReachesRankZero) {
  // Rank 2 asks only after rank 0's first Collect, which must find no request.
  std::atomic<bool> collected{false}, asked{false};
  comm::RunInProcess(3, [&](comm::Communicator& comm) {
    AsyncCoordinator c(&comm);
    if (comm.rank() == 0) {
      c.Collect();
      EXPECT_EQ(c.stop_request().rank, 0);  // none yet
      collected = true;
      WaitFor(asked);
      c.Collect();
      EXPECT_EQ(c.stop_request().rank, 2);
      EXPECT_EQ(c.stop_request().signal, 10);
      c.Send(Order::kStopOnSignal);
      c.AwaitLastReports();
      EXPECT_EQ(c.stop_request().rank, 2);  // rank 1's later request does not replace it
      EXPECT_EQ(c.latest(1).stop_signal, 15);
    } else {
      if (comm.rank() == 2) {
        WaitFor(collected);
        c.Report({5, 1, 50, 1.0, /*stop_signal=*/10});
        asked = true;
      }
      std::vector<Order> orders;
      while (orders.empty()) orders = c.Orders();
      EXPECT_EQ(orders, std::vector<Order>{Order::kStopOnSignal});
      c.Report({6, 1, 0, 1.0, comm.rank() == 1 ? 15 : 10}, /*last=*/true);
    }
    comm.Barrier();
  });
}

TEST(AsyncCoordinatorTest, ReportsCarryTheMetricsRecordToRankZeroOnce) {
  comm::RunInProcess(2, [](comm::Communicator& comm) {
    AsyncCoordinator c(&comm);
    if (comm.rank() == 1) {
      RankProgress r;
      r.update = 40;
      r.epoch = 2;
      r.elapsed_seconds = 12.25;
      r.target_words = 7000;
      r.cost_per_word = 4.5;
      r.sent_fraction = 0.01f;
      r.staleness = StalenessSummary{30, 1.5, 1, 2, 5, 9};
      r.bytes_pushed = 1 << 20;
      c.Report({40, 100, 500, 1.0, 0, r});
    } else {
      std::vector<AsyncCoordinator::Progress> reports;
      while (reports.empty()) {
        c.Collect();
        reports = c.TakeNewReports();
      }
      ASSERT_EQ(reports.size(), 1u);
      const RankProgress& r = reports[0].record;
      EXPECT_EQ(r.rank, 1) << "the sender's rank";
      EXPECT_EQ(r.update, 40);
      EXPECT_EQ(r.epoch, 2);
      EXPECT_EQ(r.elapsed_seconds, 12.25);
      EXPECT_EQ(r.target_words, 7000);
      EXPECT_EQ(r.cost_per_word, 4.5);
      EXPECT_EQ(r.sent_fraction, 0.01f);
      ASSERT_TRUE(r.staleness.has_value());
      EXPECT_EQ(r.staleness->p99, 5);
      EXPECT_EQ(r.staleness->max, 9);
      EXPECT_EQ(r.bytes_pushed, 1 << 20);
      EXPECT_EQ(MetricsLine(r), MetricsLine(DecodeRankProgress(EncodeRankProgress(r))));
      c.Collect();
      EXPECT_TRUE(c.TakeNewReports().empty()) << "each report once";
    }
    comm.Barrier();
  });
}

}  // namespace
}  // namespace tern::trainer
