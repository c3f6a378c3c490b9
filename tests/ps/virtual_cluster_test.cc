// Virtual workers (ps/virtual_cluster.h): one worker steps exactly as the real one-rank async
// strategy; N workers lose and double no update; the same inputs give the same run; staleness,
// the straggler, the link's time and sync's update follow from the simulated clock.
#include "ps/virtual_cluster.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <string>
#include <tuple>
#include <vector>

#include "comm/in_process.h"
#include "ps/protocol.h"
#include "tests/ps/test_vectors.h"

namespace tern::ps {
namespace {

using testing::Adam;
using testing::Info;
using testing::RandomVector;
using testing::Sgd;
using testing::View;

// Runs the cluster until worker 0 has finished `updates` mini-batches (every worker's gradient
// from gradient(worker, its update, its parameters), each taking cost(worker) seconds). Returns
// the kStepDone events in order.
std::vector<VirtualCluster::Event> Drive(
    VirtualCluster& cluster, int64_t n, int updates,
    const std::function<std::vector<float>(int, int, const float*)>& gradient,
    const std::function<double(int)>& cost, float lr, float beta1 = 0.9f, bool in_place = false) {
  std::vector<int> started(cluster.workers(), 0);
  int finished = 0;
  std::vector<VirtualCluster::Event> steps;
  while (finished < updates) {
    const VirtualCluster::Event e = cluster.Next();
    if (e.kind == VirtualCluster::Event::Kind::kStepDone) {
      steps.push_back(e);
      if (e.worker == 0) ++finished;
      continue;
    }
    const int w = e.worker;
    ++started[w];
    std::vector<float> g = gradient(w, started[w], cluster.params(w));
    EXPECT_EQ(static_cast<int64_t>(g.size()), n);
    float* buffer = in_place ? cluster.gradient_buffer(w) : nullptr;
    if (buffer != nullptr) std::copy(g.begin(), g.end(), buffer);  // as the trainer writes it
    cluster.Submit(w, buffer != nullptr ? buffer : g.data(), cost(w), Info(started[w], lr, beta1));
  }
  return steps;
}

VirtualOptions Workers(int n) {
  VirtualOptions v;
  v.workers = n;
  return v;
}

TEST(VirtualClusterTest, OneWorkerStepsAsTheRealOneRankStrategy) {
  // Adam with clipping: the real AsyncSgd on one rank (inline rounds) and one virtual worker
  // must give the same bits, whatever their clocks; also with tau groups and local-optimizer
  // warm-up, and with each gradient written in the cluster's buffer (the trainer's way).
  const int64_t n = 333;
  for (const bool warm_up : {false, true}) {
    StrategyOptions options;
    options.overlap = false;
    options.clip_norm = 5.f;
    if (warm_up) {
      options.tau = 2;
      options.local_optimizer_updates = 5;
    }
    const std::vector<float> init = RandomVector(n, 1);
    auto gradient = [](int, int t, const float* p) {
      std::vector<float> g = RandomVector(333, 100 + t);
      for (int64_t i = 0; i < 333; ++i) g[i] += 0.5f * p[i];  // depends on the parameters
      return g;
    };
    std::vector<float> real = init;
    comm::RunInProcess(1, [&](comm::Communicator& comm) {
      auto strategy = MakeStrategy("async", options, Adam(), &comm, n);
      strategy->Init(View(real));
      for (int t = 1; t <= 8; ++t) {
        std::vector<float> g = gradient(0, t, real.data());
        strategy->Step(View(g), View(real), Info(t, 0.01f));
      }
      strategy->Finish();
    });
    for (const bool in_place : {false, true}) {
      VirtualCluster cluster("async", options, Workers(1), Adam(), n);
      cluster.Init(init.data());
      Drive(
          cluster, n, 8, gradient, [](int) { return 1.0; }, 0.01f, 0.9f, in_place);
      cluster.Finish();
      std::vector<float> global(n);
      cluster.ReadGlobal(global.data());
      EXPECT_EQ(global, real) << (warm_up ? "tau 2, warm-up" : "tau 1")
                              << (in_place ? ", in place" : "");
    }
  }
}

TEST(VirtualClusterTest, NoUpdateIsLostOrDoubled) {
  // SGD with gradients that ignore the parameters: whatever the interleaving, once Finish has
  // landed everything, the global model is init minus every gradient computed, each at the rate
  // its push carried (a whole tau group: 1 per mini-batch; Finish's partial group of k: k / tau).
  const int64_t n = 100;
  const int workers = 3;
  for (int tau : {1, 2, 4}) {
    for (const char* overlap : {"never", "always", "auto"}) {
      StrategyOptions options;
      options.tau = tau;
      options.overlap = std::string(overlap) != "never";
      options.overlap_wait = std::string(overlap) == "auto" ? kAutoOverlapWait : 0;
      VirtualOptions v = Workers(workers);
      v.link_bytes_per_second = 1e4;
      v.link_delay_seconds = 0.01;
      VirtualCluster cluster("async", options, v, Sgd(), n);
      std::vector<float> init(n, 0.f);
      cluster.Init(init.data());
      std::vector<std::vector<std::vector<float>>> computed(workers);
      auto gradient = [&](int w, int t, const float*) {
        std::vector<float> g(n);
        for (int64_t i = 0; i < n; ++i) g[i] = static_cast<float>((i * 7 + w * 3 + t) % 5 - 2);
        computed[w].push_back(g);
        return g;
      };
      Drive(
          cluster, n, 7, gradient, [](int w) { return 1.0 + 0.3 * w; }, 1.f, 0.f);
      cluster.Finish();
      std::vector<float> expected = init;
      for (const auto& gradients : computed)
        for (const std::vector<float>& g : gradients)
          for (int64_t i = 0; i < n; ++i) expected[i] -= g[i];
      std::vector<float> global(n);
      cluster.ReadGlobal(global.data());
      EXPECT_EQ(global, expected) << "tau " << tau << ", overlap " << overlap;
    }
  }
}

TEST(VirtualClusterTest, DroppedPullsLoseNoUpdateAndShrinkTheReplies) {
  // 99% dropping both ways, SGD at rate 1 on gradients that ignore the parameters: the global
  // model is init minus everything sent (every gradient less the residuals left), as with dense
  // pulls, while each reply after the first carries about 1% of its shard.
  const int64_t n = 6000;
  const int workers = 3;
  auto run = [&](bool drop_pulls, VirtualCluster::WorkerStats* stats) {
    StrategyOptions options;
    options.drop_rate = 0.99f;
    options.drop_pulls = drop_pulls;
    options.overlap_wait = kAutoOverlapWait;
    VirtualOptions v = Workers(workers);
    v.link_bytes_per_second = 1e5;
    v.link_delay_seconds = 0.001;
    VirtualCluster cluster("async", options, v, Sgd(), n);
    std::vector<float> expected(n, 0.f);
    cluster.Init(expected.data());
    auto gradient = [&](int w, int t, const float*) {
      std::vector<float> g(n);
      // Multiples of 2^-9 below 1 in magnitude (sums of them stay exact), of many magnitudes
      // (few ties at the quantile).
      for (int64_t i = 0; i < n; ++i)
        g[i] = static_cast<float>((i * 7919 + w * 104729 + t * 31) % 1021 - 510) / 512.f;
      for (int64_t i = 0; i < n; ++i) expected[i] -= g[i];
      return g;
    };
    Drive(
        cluster, n, 6, gradient, [](int w) { return 1.0 + 0.3 * w; }, 1.f, 0.f);
    cluster.Finish();
    for (int w = 0; w < workers; ++w) {
      const std::string state = cluster.SaveWorkerState(w);
      ASSERT_EQ(state.size(), sizeof(uint64_t) + n * sizeof(float));
      std::vector<float> residual(n);
      std::memcpy(residual.data(), state.data() + sizeof(uint64_t), n * sizeof(float));
      for (int64_t i = 0; i < n; ++i) expected[i] += residual[i];
    }
    std::vector<float> global(n);
    cluster.ReadGlobal(global.data());
    EXPECT_EQ(global, expected) << "drop_pulls " << drop_pulls;
    *stats = cluster.stats(0);
  };
  VirtualCluster::WorkerStats dense, dropped;
  run(false, &dense);
  run(true, &dropped);
  EXPECT_EQ(dropped.pushes, dense.pushes);
  EXPECT_LT(dropped.bytes_pulled * 20, dense.bytes_pulled);
}

// The same inputs give the same run, and a gradient written where gradient_buffer says (the
// trainer's way, no copy) the run of one handed over in another buffer: async with tau groups,
// dropping, local warm-up and a slow link; sync with tau.
TEST(VirtualClusterTest, TheSameInputsGiveTheSameRunWhereverTheGradientLies) {
  const int64_t n = 256;
  for (const std::string algorithm : {"async", "sync"}) {
    StrategyOptions options;
    options.tau = 2;
    if (algorithm == "async") {
      options.drop_rate = 0.9f;
      options.drop_warmup = 2;
      options.local_optimizer_updates = 3;
      options.overlap_wait = kAutoOverlapWait;
    }
    VirtualOptions v = Workers(4);
    v.link_bytes_per_second = 2e4;
    v.link_delay_seconds = 0.002;
    v.slowdown = 2;
    auto run = [&](bool in_place) {
      VirtualCluster cluster(algorithm, options, v, Adam(), n);
      const std::vector<float> init = RandomVector(n, 3);
      cluster.Init(init.data());
      auto gradient = [](int w, int t, const float* p) {
        std::vector<float> g = RandomVector(256, 1000 * w + t);
        for (int64_t i = 0; i < 256; ++i) g[i] += p[i];
        return g;
      };
      Drive(
          cluster, n, 20, gradient, [](int w) { return 0.1 + 0.01 * w; }, 0.01f, 0.9f, in_place);
      std::vector<float> global(n);
      cluster.ReadGlobal(global.data());
      return std::make_tuple(global, cluster.staleness(1).ToString(),
                             cluster.stats(1).bytes_pushed);
    };
    EXPECT_EQ(run(false), run(false)) << algorithm;
    EXPECT_EQ(run(true), run(false)) << algorithm << ", in place";
  }
}

TEST(VirtualClusterTest, EqualWorkersAreNMinusOneVersionsBehind) {
  // N workers of equal speed that wait for their rounds (overlap never) over an instant link:
  // after the first round every push misses exactly the other N - 1 workers' pushes of its
  // round, the classic staleness of asynchronous SGD.
  const int64_t n = 64;
  for (int workers : {2, 4, 8}) {
    StrategyOptions options;
    options.overlap = false;
    VirtualCluster cluster("async", options, Workers(workers), Sgd(), n);
    std::vector<float> init(n, 0.f);
    cluster.Init(init.data());
    const int rounds = 10;
    Drive(
        cluster, n, rounds, [&](int, int, const float*) { return std::vector<float>(n, 0.01f); },
        [](int) { return 1.0; }, 0.1f, 0.f);
    for (int s = 0; s < workers; ++s) {
      const StalenessHistogram h = cluster.staleness(s);
      EXPECT_GE(h.total(), (rounds - 1) * workers);
      EXPECT_EQ(h.Percentile(0.5), workers - 1) << h.ToString();
      EXPECT_EQ(h.max(), static_cast<uint64_t>(workers - 1)) << h.ToString();
    }
  }
}

TEST(VirtualClusterTest, TheStragglerPushesAtItsPace) {
  const int64_t n = 64;
  StrategyOptions options;
  VirtualOptions v = Workers(4);
  v.slowdown = 2;
  VirtualCluster cluster("async", options, v, Sgd(), n);
  std::vector<float> init(n, 0.f);
  cluster.Init(init.data());
  const std::vector<VirtualCluster::Event> steps = Drive(
      cluster, n, 40, [&](int, int, const float*) { return std::vector<float>(n, 0.01f); },
      [](int) { return 1.0; }, 0.1f, 0.f);
  EXPECT_EQ(cluster.stats(0).pushes, 40);
  EXPECT_NEAR(cluster.stats(3).pushes, 20, 1) << "the last worker runs at half speed";
  EXPECT_NEAR(cluster.stats(1).pushes, 40, 1);
  EXPECT_NEAR(steps.back().time, 40.0, 0.5) << "worker 0 computed 40 one-second mini-batches";
}

TEST(VirtualClusterTest, ALinksTimeIsItsBytesOverTheRateAndTheDelay) {
  // Two workers, one dense push each, waiting for the round: the step ends after the compute,
  // the push's bytes and the reply's bytes at the link's rate, and two delays.
  const int64_t n = 1000;
  StrategyOptions options;
  options.overlap = false;
  VirtualOptions v = Workers(2);
  v.link_bytes_per_second = 1e4;
  v.link_delay_seconds = 0.05;
  VirtualCluster cluster("async", options, v, Sgd(), n);
  std::vector<float> init(n, 0.f);
  cluster.Init(init.data());
  const std::vector<VirtualCluster::Event> steps = Drive(
      cluster, n, 2, [&](int, int, const float*) { return std::vector<float>(n, 0.01f); },
      [](int) { return 1.0; }, 0.1f, 0.f);
  EXPECT_EQ(cluster.stats(0).pushes, 2);
  // Worker 0's second mini-batch starts when its first round is back: its push over its link,
  // the delay, and the other shard's reply back with the delay.
  const int64_t other = cluster.shard_map().range(1).size();
  std::string header;
  protocol::EncodeDense(optim::StepOptions(), 0, other, &header);
  const double push = static_cast<double>(header.size() + other * sizeof(float));
  const double reply = static_cast<double>(sizeof(uint64_t) + other * sizeof(float));
  const double round = push / 1e4 + 0.05 + reply / 1e4 + 0.05;
  double second_done = -1;
  for (const VirtualCluster::Event& e : steps)
    if (e.worker == 0 && e.time > 1.0) second_done = e.time;
  EXPECT_NEAR(second_done, 1.0 + round + 1.0, 1e-9);
  EXPECT_EQ(cluster.stats(0).bytes_pushed, 2 * static_cast<int64_t>(push));
}

TEST(VirtualClusterTest, SyncStepsTheSumOnceAnUpdateAfterTheSlowestWorker) {
  const int64_t n = 90;
  const int workers = 3;
  StrategyOptions options;
  VirtualOptions v = Workers(workers);
  v.slowdown = 3;
  v.link_bytes_per_second = 1e4;
  VirtualCluster cluster("sync", options, v, Sgd(), n);
  std::vector<float> init(n, 0.f), expected(n, 0.f);
  cluster.Init(init.data());
  std::vector<float> seen;  // worker 0's parameters in the update under way
  auto gradient = [&](int w, int t, const float* p) {
    if (w == 0) seen.assign(p, p + n);
    EXPECT_EQ(std::vector<float>(p, p + n), seen) << "every worker sees the update's model";
    return std::vector<float>(n, static_cast<float>(w + t));
  };
  const std::vector<VirtualCluster::Event> steps = Drive(
      cluster, n, 4, gradient, [](int) { return 1.0; }, 1.f, 0.f);
  for (int t = 1; t <= 4; ++t)
    for (int w = 0; w < workers; ++w)
      for (int64_t i = 0; i < n; ++i) expected[i] -= static_cast<float>(w + t);
  std::vector<float> global(n);
  cluster.ReadGlobal(global.data());
  EXPECT_EQ(global, expected);
  EXPECT_EQ(cluster.stats(0).pushes, 4);
  // Each update: the slow worker's 3 s, then a ring all-reduce: 2 (N - 1) steps of n / N floats.
  const double update = 3.0 + 2 * (workers - 1) * (n * 4.0 / workers / 1e4);
  ASSERT_EQ(steps.size(), 3u * workers + 1);  // Drive stops at worker 0's 4th
  EXPECT_NEAR(steps.back().time, 4 * update, 1e-9);
  EXPECT_EQ(cluster.staleness(0).count(0), 4) << "sync: never stale";
}

}  // namespace
}  // namespace tern::ps
