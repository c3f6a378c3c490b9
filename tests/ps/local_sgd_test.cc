// Local SGD (StrategyOptions::local_sgd): a sync round of one local SGD step with the outer
// optimizer at rate 1 without momentum is a sync SGD step; H local steps then the outer Nesterov
// step, as written out by hand; sync and async on ranks and on virtual workers agree; the inner
// optimizer travels in the worker state; the asynchronous variant is deterministic under virtual
// workers.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "comm/in_process.h"
#include "common/error.h"
#include "optim/optimizer.h"
#include "ps/strategy.h"
#include "ps/virtual_cluster.h"
#include "tests/ps/test_vectors.h"

namespace tern::ps {
namespace {

using testing::Adam;
using testing::Info;
using testing::RandomVector;
using testing::Sgd;
using testing::View;

StrategyOptions LocalSgd(int local_steps, float outer_lr, float outer_momentum) {
  StrategyOptions o;
  o.local_sgd = true;
  o.tau = local_steps;
  o.outer_learning_rate = outer_lr;
  o.outer_momentum = outer_momentum;
  o.overlap = false;
  return o;
}

void ExpectNear(const std::vector<float>& a, const std::vector<float>& b, float tolerance,
                const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (size_t i = 0; i < a.size(); ++i)
    ASSERT_NEAR(a[i], b[i], tolerance) << what << " [" << i << "]";
}

// Rank r's mini-batch gradient at step t: a function of the parameters, so a difference in what a
// rank computes on shows.
std::vector<float> Gradient(int r, int t, const std::vector<float>& params) {
  std::vector<float> g = RandomVector(static_cast<int64_t>(params.size()), 1000 * r + t);
  for (size_t i = 0; i < g.size(); ++i) g[i] += 0.3f * params[i];
  return g;
}

TEST(LocalSgdTest, OneLocalStepAtOuterRateOneIsASyncSgdStep) {
  // SGD inside at rate lr: a rank's change is lr g_r; their mean, stepped at rate 1 with no
  // momentum, is sync SGD's step with the ranks' mean gradient (sync SGD sums gradients that
  // the trainer normalizes over every rank's words: g_r / ranks here).
  const int ranks = 3, steps = 4;
  const int64_t n = 777;
  const float lr = 0.05f;
  const std::vector<float> init = RandomVector(n, 5);
  std::vector<std::vector<float>> sync(ranks), local(ranks);
  comm::RunInProcess(ranks, [&](comm::Communicator& comm) {
    auto strategy = MakeStrategy("sync", StrategyOptions{}, Sgd(), &comm, n);
    std::vector<float> params = init;
    strategy->Init(View(params));
    for (int t = 1; t <= steps; ++t) {
      std::vector<float> g = Gradient(comm.rank(), t, params);
      for (float& x : g) x /= ranks;
      strategy->Step(View(g), View(params), Info(t, lr, 0.f));
    }
    sync[comm.rank()] = params;
  });
  comm::RunInProcess(ranks, [&](comm::Communicator& comm) {
    auto strategy = MakeStrategy("sync", LocalSgd(1, 1.f, 0.f), Sgd(), &comm, n);
    std::vector<float> params = init;
    strategy->Init(View(params));
    for (int t = 1; t <= steps; ++t) {
      std::vector<float> g = Gradient(comm.rank(), t, params);
      const StepResult r = strategy->Step(View(g), View(params), Info(t, lr, 0.f));
      EXPECT_TRUE(r.pushed && r.params_changed);
    }
    local[comm.rank()] = params;
  });
  for (int r = 0; r < ranks; ++r) ExpectNear(local[r], sync[0], 1e-5f, "rank " + std::to_string(r));
  for (int r = 0; r < ranks; ++r) EXPECT_EQ(sync[r], sync[0]);
}

TEST(LocalSgdTest, OneRankTakesHLocalStepsThenTheOuterNesterovStep) {
  // Adam inside for H = 3 mini-batches on the worker's copy; the outer Nesterov SGD then steps
  // the round's start with start - end; the next round starts from there. Sync and async (inline
  // rounds) on one rank are the same computation.
  const int64_t n = 333;
  const int h = 3, rounds = 3;
  const float outer_lr = 0.7f, outer_momentum = 0.9f;
  const std::vector<float> init = RandomVector(n, 2);
  // By hand.
  std::vector<float> expected = init;
  {
    auto inner = optim::MakeAdam(n, {1e-8f, 0.f});
    std::vector<double> u(n, 0.0);
    int t = 0;
    for (int round = 0; round < rounds; ++round) {
      const std::vector<float> start = expected;
      for (int k = 0; k < h; ++k) {
        ++t;
        std::vector<float> g = Gradient(0, t, expected);
        inner->Step(View(expected), View(g), Info(t, 0.01f).options);
      }
      for (int64_t i = 0; i < n; ++i) {
        const double delta = static_cast<double>(start[i]) - expected[i];
        u[i] = outer_momentum * u[i] + delta;
        expected[i] = static_cast<float>(start[i] - outer_lr * (delta + outer_momentum * u[i]));
      }
    }
  }
  for (const std::string kind : {"sync", "async"}) {
    comm::RunInProcess(1, [&](comm::Communicator& comm) {
      auto strategy = MakeStrategy(kind, LocalSgd(h, outer_lr, outer_momentum), Adam(), &comm, n);
      std::vector<float> params = init;
      strategy->Init(View(params));
      for (int t = 1; t <= h * rounds; ++t) {
        std::vector<float> g = Gradient(0, t, params);
        const StepResult r = strategy->Step(View(g), View(params), Info(t, 0.01f));
        EXPECT_EQ(r.pushed, t % h == 0) << kind << " step " << t;
        EXPECT_TRUE(r.params_changed);
      }
      EXPECT_EQ(strategy->stats().pushes, rounds) << kind;
      strategy->Finish();
      ExpectNear(params, expected, 1e-5f, kind);
    });
  }
}

TEST(LocalSgdTest, TheWorkerStateCarriesTheInnerOptimizer) {
  // Stopped after a round and resumed from the saved states, a run goes on bit for bit as the
  // unbroken one: sync on two ranks, async on one (several async ranks' pushes meet the outer
  // momentum in whatever order they come).
  const int64_t n = 300;
  const std::vector<float> init = RandomVector(n, 7);
  for (const std::string kind : {"sync", "async"}) {
    const int ranks = kind == "sync" ? 2 : 1;
    auto run = [&](bool stop_at_4) {
      std::vector<std::vector<float>> out(ranks);
      comm::RunInProcess(ranks, [&](comm::Communicator& comm) {
        const int r = comm.rank();
        std::vector<float> params = init;
        auto strategy = MakeStrategy(kind, LocalSgd(2, 0.7f, 0.9f), Adam(), &comm, n);
        strategy->Init(View(params));
        for (int t = 1; t <= 4; ++t) {
          std::vector<float> g = Gradient(r, t, params);
          strategy->Step(View(g), View(params), Info(t, 0.01f));
        }
        strategy->Flush(View(params), Info(4, 0.01f));
        if (stop_at_4) {
          const std::string shard = strategy->SaveShardState();
          const std::string worker = strategy->SaveWorkerState();
          EXPECT_TRUE(IsInnerState(worker));
          strategy->Finish();
          strategy = MakeStrategy(kind, LocalSgd(2, 0.7f, 0.9f), Adam(), &comm, n);
          strategy->Init(View(params));
          strategy->LoadShardState(shard);
          strategy->LoadWorkerState(worker);
        }
        for (int t = 5; t <= 9; ++t) {  // two rounds and a partial one, which Flush ends
          std::vector<float> g = Gradient(r, t, params);
          strategy->Step(View(g), View(params), Info(t, 0.01f));
        }
        strategy->Flush(View(params), Info(9, 0.01f));
        strategy->Finish();
        out[r] = params;
      });
      return out;
    };
    const auto unbroken = run(false);
    EXPECT_EQ(unbroken, run(true)) << kind;
    EXPECT_NE(unbroken[0], init);
  }
}

TEST(LocalSgdTest, AnotherWorkerStateIsRefusedNamingTheSetting) {
  comm::RunInProcess(1, [&](comm::Communicator& comm) {
    auto strategy = MakeStrategy("sync", LocalSgd(2, 0.7f, 0.9f), Adam(), &comm, 10);
    std::vector<float> params(10, 0.f);
    strategy->Init(View(params));
    try {
      strategy->LoadWorkerState(std::string(12, 'x'));
      FAIL() << "no error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("distributed.local_steps"), std::string::npos)
          << e.what();
    }
  });
}

// Runs virtual workers until worker 0 has done `updates` mini-batches.
void Drive(VirtualCluster& cluster, int updates, const std::function<double(int)>& cost) {
  const int64_t n = cluster.shard_map().num_params();
  std::vector<int> started(cluster.workers(), 0);
  for (int finished = 0; finished < updates;) {
    const VirtualCluster::Event e = cluster.Next();
    if (e.kind == VirtualCluster::Event::Kind::kStepDone) {
      if (e.worker == 0) ++finished;
      continue;
    }
    const int w = e.worker;
    ++started[w];
    std::vector<float> params(cluster.params(w), cluster.params(w) + n);
    std::vector<float> g = Gradient(w, started[w], params);
    cluster.Submit(w, g.data(), cost(w), Info(started[w], 0.01f));
  }
}

TEST(LocalSgdTest, VirtualSyncWorkersStepAsTheRealRanks) {
  // Three whole rounds, and three rounds and one step more: a virtual run stopped there ends
  // the round as the real ranks' Flush does (regression: Finish in the middle of a round failed
  // a CHECK when the budget ended a run there).
  const int ranks = 3, h = 2, rounds = 3;
  const int64_t n = 400;
  const std::vector<float> init = RandomVector(n, 11);
  for (const int steps : {h * rounds, h * rounds + 1}) {
    std::vector<float> real;
    comm::RunInProcess(ranks, [&](comm::Communicator& comm) {
      auto strategy = MakeStrategy("sync", LocalSgd(h, 0.7f, 0.9f), Adam(), &comm, n);
      std::vector<float> params = init;
      strategy->Init(View(params));
      for (int t = 1; t <= steps; ++t) {
        std::vector<float> g = Gradient(comm.rank(), t, params);
        strategy->Step(View(g), View(params), Info(t, 0.01f));
      }
      strategy->Flush(View(params), Info(steps, 0.01f));
      if (comm.rank() == 0) real = params;
    });
    VirtualOptions v;
    v.workers = ranks;
    VirtualCluster cluster("sync", LocalSgd(h, 0.7f, 0.9f), v, Adam(), n);
    cluster.Init(init.data());
    Drive(cluster, steps, [](int) { return 1.0; });
    cluster.Finish();
    std::vector<float> global(n);
    cluster.ReadGlobal(global.data());
    ExpectNear(global, real, 1e-6f, "virtual sync, " + std::to_string(steps) + " steps");
    EXPECT_EQ(cluster.stats(0).pushes, (steps + h - 1) / h);
    EXPECT_TRUE(IsInnerState(cluster.SaveWorkerState(1)));
  }
}

TEST(LocalSgdTest, VirtualAsyncWorkersAreDeterministicAndPushEveryHSteps) {
  const int64_t n = 256;
  StrategyOptions options = LocalSgd(4, 0.7f, 0.9f);
  options.outer_momentum_delay = 3;
  options.overlap = true;
  options.overlap_wait = kAutoOverlapWait;
  VirtualOptions v;
  v.workers = 3;
  v.link_bytes_per_second = 2e4;
  v.link_delay_seconds = 0.002;
  v.slowdown = 2;
  auto run = [&] {
    VirtualCluster cluster("async", options, v, Adam(), n);
    const std::vector<float> init = RandomVector(n, 3);
    cluster.Init(init.data());
    Drive(cluster, 16, [](int w) { return 0.1 + 0.01 * w; });
    cluster.Finish();
    std::vector<float> global(n);
    cluster.ReadGlobal(global.data());
    EXPECT_EQ(cluster.stats(0).pushes, 4);  // 16 mini-batches, a push every 4
    // The straggler (2x slower) pushes about half as often.
    EXPECT_LE(cluster.stats(2).pushes, 3);
    return std::make_pair(global, cluster.staleness(1).ToString());
  };
  const auto a = run();
  EXPECT_EQ(a, run());
  for (float x : a.first) ASSERT_TRUE(std::isfinite(x));
}

}  // namespace
}  // namespace tern::ps
