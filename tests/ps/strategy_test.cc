// Async and sync strategies over the in-process communicator: no lost or doubled updates under
// concurrent pushes, equality with a plain optimizer on one rank, tau accumulation, sync ==
// summed gradient, staleness recording, gradient-dropping conservation, local optimizers.
#include "ps/strategy.h"

#include <gtest/gtest.h>

#include <random>
#include <tuple>
#include <vector>

#include "comm/in_process.h"
#include "common/error.h"
#include "optim/optimizer.h"
#include "ps/async_sgd.h"
#include "ps/local_strategy.h"
#include "ps/protocol.h"
#include "tests/ps/test_vectors.h"

namespace tern::ps {
namespace {

using testing::Adam;
using testing::Info;
using testing::RandomVector;
using testing::Sgd;
using testing::View;

// Small integers: sums of them are exact in float32, so "no lost or doubled update" is exact.
std::vector<float> IntegerGradient(int64_t n, int rank, int step) {
  std::vector<float> g(n);
  for (int64_t i = 0; i < n; ++i) g[i] = static_cast<float>((i * 7 + rank * 3 + step) % 5 - 2);
  return g;
}

class AsyncOneRankTest : public ::testing::TestWithParam<bool> {};

TEST_P(AsyncOneRankTest, EqualsPlainOptimizerStepForStep) {
  const bool overlap = GetParam();
  const int64_t n = 333;
  comm::RunInProcess(1, [&](comm::Communicator& comm) {
    StrategyOptions options;
    options.overlap = overlap;
    auto strategy = MakeStrategy("async", options, Adam(), &comm, n);
    std::vector<float> params = RandomVector(n, 1), reference = params;
    strategy->Init(View(params));
    auto plain = optim::MakeAdam(n, {1e-8f, 0.f});
    for (int t = 1; t <= 8; ++t) {
      std::vector<float> g = RandomVector(n, 100 + t);
      const StepInfo info = Info(t, 0.01f);
      StepResult r = strategy->Step(View(g), View(params), info);
      EXPECT_TRUE(r.pushed);
      plain->Step(View(reference), View(g), info.options);
      if (!overlap) {
        ASSERT_EQ(params, reference) << "update " << t;
      }
    }
    strategy->Flush(View(params), Info(9, 0.01f));
    EXPECT_EQ(params, reference);
    // Overlapped, the worker computes each gradient after the first on parameters that lack its
    // previous push (that round runs meanwhile): one version behind, and the histogram says so.
    const StalenessHistogram s = strategy->stats().staleness;
    EXPECT_EQ(s.count(0), overlap ? 1 : 8);
    EXPECT_EQ(s.count(1), overlap ? 7 : 0);
    strategy->Finish();
  });
}

INSTANTIATE_TEST_SUITE_P(Overlap, AsyncOneRankTest, ::testing::Bool());

// distributed.overlap "auto": a round that comes back within the wait is taken before the next
// gradient, so the worker computes on fresh parameters, as without overlap.
TEST(AsyncOverlapWaitTest, ARoundBackWithinTheWaitAddsNoStaleness) {
  const int64_t n = 333;
  comm::RunInProcess(1, [&](comm::Communicator& comm) {
    StrategyOptions options;
    options.overlap = true;
    options.overlap_wait = 1e6;  // of the worker's compute time: any round here comes back
    auto strategy = MakeStrategy("async", options, Adam(), &comm, n);
    std::vector<float> params = RandomVector(n, 1), reference = params;
    strategy->Init(View(params));
    auto plain = optim::MakeAdam(n, {1e-8f, 0.f});
    for (int t = 1; t <= 8; ++t) {
      std::vector<float> g = RandomVector(n, 100 + t);
      const StepInfo info = Info(t, 0.01f);
      EXPECT_TRUE(strategy->Step(View(g), View(params), info).params_changed);
      plain->Step(View(reference), View(g), info.options);
      ASSERT_EQ(params, reference) << "update " << t;
    }
    strategy->Flush(View(params), Info(9, 0.01f));
    EXPECT_EQ(strategy->stats().staleness.count(0), 8);
    strategy->Finish();
  });
}

class LocalStrategyTest : public ::testing::TestWithParam<std::tuple<const char*, bool>> {};

TEST_P(LocalStrategyTest, EqualsTheStrategyOnOneRankWithTheSameCheckpointBytes) {
  // The local strategy stands in for async or sync on one rank (a single-GPU run): the same
  // parameters step for step, with clipping, and the same shard state, both ways through a
  // checkpoint.
  const auto [kind, clip] = GetParam();
  const int64_t n = 333;
  comm::RunInProcess(1, [&](comm::Communicator& comm) {
    StrategyOptions options;
    options.overlap = false;
    if (clip) options.clip_norm = 0.5f;
    auto strategy = MakeStrategy(kind, options, Adam(), &comm, n);
    LocalStrategy local(kind, options, Adam(), n);
    std::vector<float> params = RandomVector(n, 1), local_params = params;
    strategy->Init(View(params));
    local.Init(View(local_params));
    for (int t = 1; t <= 5; ++t) {
      std::vector<float> g = RandomVector(n, 100 + t);
      strategy->Step(View(g), View(params), Info(t, 0.01f));
      const StepResult r = local.Step(View(g), View(local_params), Info(t, 0.01f));
      EXPECT_TRUE(r.pushed && r.params_changed);
      ASSERT_EQ(local_params, params) << kind << " update " << t;
    }
    strategy->Flush(View(params), Info(6, 0.01f));
    local.Flush(View(local_params), Info(6, 0.01f));
    const std::string state = strategy->SaveShardState();
    EXPECT_EQ(local.SaveShardState(), state);
    EXPECT_EQ(local.stats().staleness.count(0), 5);
    // Resume the local strategy from the strategy's state, and the other way round.
    LocalStrategy resumed(kind, options, Adam(), n);
    std::vector<float> resumed_params = params;
    resumed.Init(View(resumed_params));
    resumed.LoadShardState(state);
    strategy->LoadShardState(local.SaveShardState());
    std::vector<float> g = RandomVector(n, 200);
    strategy->Step(View(g), View(params), Info(6, 0.01f));
    resumed.Step(View(g), View(resumed_params), Info(6, 0.01f));
    EXPECT_EQ(resumed_params, params);
    strategy->Finish();
  });
}

INSTANTIATE_TEST_SUITE_P(KindsAndClipping, LocalStrategyTest,
                         ::testing::Combine(::testing::Values("async", "sync"), ::testing::Bool()));

TEST(AsyncTest, TauAccumulatesAndScalesTheRate) {
  const int64_t n = 200, tau = 3;
  comm::RunInProcess(1, [&](comm::Communicator& comm) {
    StrategyOptions options;
    options.tau = tau;
    options.overlap = false;
    auto strategy = MakeStrategy("async", options, Adam(), &comm, n);
    std::vector<float> params = RandomVector(n, 2), reference = params;
    strategy->Init(View(params));
    auto plain = optim::MakeAdam(n, {1e-8f, 0.f});
    std::vector<float> sum(n, 0.f);
    for (int t = 1; t <= 9; ++t) {
      std::vector<float> g = RandomVector(n, 200 + t);
      for (int64_t i = 0; i < n; ++i) sum[i] += g[i];
      const std::vector<float> before = params;
      StepResult r = strategy->Step(View(g), View(params), Info(t, 0.01f));
      EXPECT_EQ(r.pushed, t % tau == 0);
      if (t % tau != 0) {
        EXPECT_EQ(params, before) << "parameters moved between pushes";
        continue;
      }
      optim::StepOptions o = Info(t, 0.01f).options;
      o.learning_rate *= tau;  // the group's mean at tau times the rate
      o.grad_scale = 1.f / tau;
      plain->Step(View(reference), View(sum), o);
      std::fill(sum.begin(), sum.end(), 0.f);
      ASSERT_EQ(params, reference) << "update " << t;
    }
    EXPECT_EQ(strategy->stats().pushes, 3);
  });
}

class PushPullTest : public ::testing::TestWithParam<std::tuple<int, bool>> {};

TEST_P(PushPullTest, ConcurrentPushesEndInExactlyTheExpectedParameters) {
  // SGD without momentum at rate 1: the final parameters are init minus every gradient pushed
  // by every rank, whatever the interleaving. A lost or doubled update changes them.
  // Inline rounds (no overlap) at tau 1 push straight from the gradient and pull straight into
  // the parameters; the other cases go through the accumulator and the staging buffer.
  const int ranks = 4, steps = 24, tau = std::get<0>(GetParam());  // steps: a multiple of taus
  const bool overlap = std::get<1>(GetParam());
  const int64_t n = 1000;
  std::vector<float> init(n);
  for (int64_t i = 0; i < n; ++i) init[i] = static_cast<float>(i % 11);
  std::vector<float> expected = init;
  for (int r = 0; r < ranks; ++r) {
    for (int t = 1; t <= steps; ++t) {
      std::vector<float> g = IntegerGradient(n, r, t);
      for (int64_t i = 0; i < n; ++i) expected[i] -= g[i];
    }
  }
  std::vector<std::vector<float>> finals(ranks);
  comm::RunInProcess(ranks, [&](comm::Communicator& comm) {
    StrategyOptions options;
    options.tau = tau;
    options.overlap = overlap;
    auto strategy = MakeStrategy("async", options, Sgd(), &comm, n);
    std::vector<float> params = init;
    strategy->Init(View(params));
    for (int t = 1; t <= steps; ++t) {
      std::vector<float> g = IntegerGradient(n, comm.rank(), t);
      // A push applies its group's mean at the rate x tau: rate 1 per mini-batch (exact for
      // taus that are powers of 2).
      strategy->Step(View(g), View(params), Info(t, 1.f, /*beta1=*/0.f));
    }
    strategy->Flush(View(params), Info(steps + 1, 1.f, 0.f));
    comm.Barrier();  // every rank's pushes have landed
    strategy->Flush(View(params), Info(steps + 1, 1.f, 0.f));
    finals[comm.rank()] = params;
    const StrategyStats stats = strategy->stats();
    // Every push (pushes + the partial flush) reached this rank's shard exactly once.
    EXPECT_EQ(stats.staleness.total(), ranks * ((steps + tau - 1) / tau));
    strategy->Finish();
  });
  for (int r = 0; r < ranks; ++r) EXPECT_EQ(finals[r], expected) << "rank " << r;
}

INSTANTIATE_TEST_SUITE_P(TauOverlap, PushPullTest,
                         ::testing::Combine(::testing::Values(1, 2, 4), ::testing::Bool()));

TEST(AsyncTest, StalenessCountsVersionsBehind) {
  // Rank 1 pushes three times; then rank 0 pushes a gradient computed on version 0 of both
  // shards, which are at version 3 by then.
  const int64_t n = 64;
  std::vector<StalenessHistogram> histograms(2);
  comm::RunInProcess(2, [&](comm::Communicator& comm) {
    StrategyOptions options;
    options.overlap = false;
    auto strategy = MakeStrategy("async", options, Sgd(), &comm, n);
    std::vector<float> params(n, 1.f), g(n, 0.5f);
    strategy->Init(View(params));
    if (comm.rank() == 1) {
      for (int t = 1; t <= 3; ++t) strategy->Step(View(g), View(params), Info(t, 0.1f, 0.f));
    }
    comm.Barrier();
    if (comm.rank() == 0) strategy->Step(View(g), View(params), Info(1, 0.1f, 0.f));
    comm.Barrier();
    histograms[comm.rank()] = strategy->stats().staleness;
    strategy->Finish();
  });
  for (const StalenessHistogram& h : histograms) {
    EXPECT_EQ(h.total(), 4);
    EXPECT_EQ(h.count(0), 3);
    EXPECT_EQ(h.count(3), 1);
    EXPECT_EQ(h.max(), 3u);
  }
}

TEST(StalenessTest, PercentilesReadTheHistogram) {
  StalenessHistogram h;
  EXPECT_EQ(h.Percentile(0.5), 0) << "empty";
  for (int i = 0; i < 50; ++i) h.Record(0);
  for (int i = 0; i < 40; ++i) h.Record(2);
  for (int i = 0; i < 9; ++i) h.Record(5);
  h.Record(40);  // beyond the last bucket
  EXPECT_EQ(h.Percentile(0.5), 0);
  EXPECT_EQ(h.Percentile(0.51), 2);
  EXPECT_EQ(h.Percentile(0.9), 2);
  EXPECT_EQ(h.Percentile(0.91), 5);
  EXPECT_EQ(h.Percentile(0.99), 5);
  EXPECT_EQ(h.Percentile(1.0), StalenessHistogram::kBuckets - 1);
  EXPECT_EQ(h.max(), 40u);
}

TEST(AsyncTest, BytesCountEachWorkersPushesAndPulls) {
  // Two ranks, one dense push each per step, inline: each push sends a header and the other
  // shard's floats, and pulls its version and floats back; the own shard moves no bytes.
  const int64_t n = 64;
  const int steps = 3;
  std::vector<StrategyStats> stats(2);
  comm::RunInProcess(2, [&](comm::Communicator& comm) {
    StrategyOptions options;
    options.overlap = false;
    auto strategy = MakeStrategy("async", options, Sgd(), &comm, n);
    std::vector<float> params(n, 1.f), g(n, 0.5f);
    strategy->Init(View(params));
    for (int t = 1; t <= steps; ++t) strategy->Step(View(g), View(params), Info(t, 0.1f, 0.f));
    comm.Barrier();
    stats[comm.rank()] = strategy->stats();
    strategy->Finish();
  });
  const ShardMap map(n, 2);
  for (int r = 0; r < 2; ++r) {
    const int64_t other = map.range(1 - r).size();
    std::string header;
    protocol::EncodeDense(optim::StepOptions(), 0, other, &header);
    EXPECT_EQ(stats[r].bytes_pushed,
              steps * static_cast<int64_t>(header.size() + other * sizeof(float)));
    EXPECT_EQ(stats[r].bytes_pulled,
              steps * static_cast<int64_t>(sizeof(uint64_t) + other * sizeof(float)));
  }
}

TEST(SyncTest, BytesCountWhatARingMoves) {
  const int64_t n = 60;
  std::vector<StrategyStats> stats(3);
  comm::RunInProcess(3, [&](comm::Communicator& comm) {
    auto strategy = MakeStrategy("sync", StrategyOptions(), Sgd(), &comm, n);
    std::vector<float> params(n, 1.f), g(n, 0.5f);
    strategy->Init(View(params));
    for (int t = 1; t <= 2; ++t) strategy->Step(View(g), View(params), Info(t, 0.1f, 0.f));
    stats[comm.rank()] = strategy->stats();
    strategy->Finish();
  });
  for (const StrategyStats& s : stats) {
    EXPECT_EQ(s.bytes_pushed, 2 * n * 4 * 2 / 3);
    EXPECT_EQ(s.bytes_pulled, s.bytes_pushed);
  }
}

class DroppedGradientsTest : public ::testing::TestWithParam<std::tuple<bool, bool>> {};

TEST_P(DroppedGradientsTest, ConserveMass) {
  // Rate 1 SGD: init - final == everything sent == Σ gradients - Σ residuals, exactly. With
  // dropped pulls the workers compute on partial views of the shards in between, but Flush's
  // dense pull brings every worker the whole global model.
  const auto [drop_pulls, overlap] = GetParam();
  const int ranks = 3, steps = 10;
  const int64_t n = 4096;
  std::vector<float> init(n, 0.f);
  std::vector<std::vector<float>> finals(ranks), residuals(ranks);
  std::vector<float> fractions(ranks);
  comm::RunInProcess(ranks, [&](comm::Communicator& comm) {
    StrategyOptions options;
    options.drop_rate = 0.9f;
    options.drop_warmup = 2;
    options.drop_pulls = drop_pulls;
    options.overlap = overlap;
    AsyncSgd strategy(options, Sgd(), &comm, n);
    std::vector<float> params = init;
    strategy.Init(View(params));
    for (int t = 1; t <= steps; ++t) {
      std::vector<float> g = IntegerGradient(n, comm.rank(), t * 13);
      StepResult r = strategy.Step(View(g), View(params), Info(t, 1.f, 0.f));
      if (t <= 2) {
        EXPECT_EQ(r.sent_fraction, 1.f) << "dense during the warm-up";
      }
      fractions[comm.rank()] = r.sent_fraction;
    }
    strategy.Flush(View(params), Info(steps + 1, 1.f, 0.f));
    comm.Barrier();
    strategy.Flush(View(params), Info(steps + 1, 1.f, 0.f));
    finals[comm.rank()] = params;
    residuals[comm.rank()] = strategy.dropper()->residual();
    strategy.Finish();
  });
  std::vector<float> expected = init;
  for (int r = 0; r < ranks; ++r) {
    EXPECT_LT(fractions[r], 0.5f);
    for (int t = 1; t <= steps; ++t) {
      std::vector<float> g = IntegerGradient(n, r, t * 13);
      for (int64_t i = 0; i < n; ++i) expected[i] -= g[i];
    }
    for (int64_t i = 0; i < n; ++i) expected[i] += residuals[r][i];
  }
  for (int r = 0; r < ranks; ++r) EXPECT_EQ(finals[r], expected);
}

INSTANTIATE_TEST_SUITE_P(PullsAndOverlap, DroppedGradientsTest,
                         ::testing::Combine(::testing::Bool(), ::testing::Bool()));

TEST(AsyncTest, DroppedPullsCutThePulledBytesAsThePushedOnes) {
  // 99% dropping both ways: after a dense first push, each push and each reply carries about 1%
  // of the shard's entries as (position, value) pairs: both directions shrink about 50x. SGD, so
  // the shard's changes spread continuously: Adam moves every entry by about the rate, and the
  // ties at the quantile then send a share that depends on how the two workers' pushes
  // interleave (a slower build interleaves them differently).
  const int ranks = 2, steps = 12;
  const int64_t n = 40000;
  auto run = [&](bool drop_pulls) {
    std::vector<StrategyStats> stats(ranks);
    comm::RunInProcess(ranks, [&](comm::Communicator& comm) {
      StrategyOptions options;
      options.drop_rate = 0.99f;
      options.drop_warmup = 1;
      options.drop_pulls = drop_pulls;
      AsyncSgd strategy(options, Sgd(), &comm, n);
      std::vector<float> params = RandomVector(n, 5);
      strategy.Init(View(params));
      for (int t = 1; t <= steps; ++t) {
        std::vector<float> g = RandomVector(n, 1000 * comm.rank() + t);
        strategy.Step(View(g), View(params), Info(t, 0.01f));
      }
      strategy.Flush(View(params), Info(steps + 1, 0.01f));
      stats[comm.rank()] = strategy.stats();
      comm.Barrier();
      strategy.Finish();
    });
    return stats;
  };
  const std::vector<StrategyStats> dense = run(false), dropped = run(true);
  const int64_t shard_bytes = n / ranks * static_cast<int64_t>(sizeof(float));
  for (int r = 0; r < ranks; ++r) {
    // Dense pulls: one shard per push and Flush's; dropped: the first push's and Flush's dense
    // replies, and 10 sparse ones of about 1% of 8-byte entries.
    EXPECT_GE(dense[r].bytes_pulled, (steps + 1) * shard_bytes);
    EXPECT_LT(dropped[r].bytes_pulled, 3 * shard_bytes) << r;
    const int64_t dense_replies = 2 * (shard_bytes + sizeof(uint64_t));
    EXPECT_LT((dropped[r].bytes_pulled - dense_replies) * 20, (steps - 1) * shard_bytes) << r;
    EXPECT_EQ(dropped[r].bytes_pushed, dense[r].bytes_pushed) << "the pushes did not change";
  }
}

TEST(AsyncTest, CheckpointStateRoundTrips) {
  // Run 6 updates straight; separately run 3, save, load into a fresh strategy, run 3 more.
  const int64_t n = 512;
  StrategyOptions options;
  options.drop_rate = 0.5f;
  auto run = [&](int from, int to, std::vector<float>* params, std::string* shard,
                 std::string* worker) {
    comm::RunInProcess(1, [&](comm::Communicator& comm) {
      AsyncSgd s(options, Adam(), &comm, n);
      s.Init(View(*params));
      if (!shard->empty()) {
        s.LoadShardState(*shard);
        s.LoadWorkerState(*worker);
        s.Flush(View(*params), Info(from, 0.01f));  // pulls the loaded shard
      }
      for (int t = from; t <= to; ++t) {
        std::vector<float> g = RandomVector(n, 900 + t);
        s.Step(View(g), View(*params), Info(t, 0.01f));
      }
      s.Flush(View(*params), Info(to + 1, 0.01f));
      *shard = s.SaveShardState();
      *worker = s.SaveWorkerState();
      EXPECT_THROW(s.LoadWorkerState("short"), Error);
    });
  };
  const std::vector<float> init = RandomVector(n, 9);
  std::vector<float> straight = init, resumed = init;
  std::string shard, worker, shard2, worker2;
  run(1, 6, &straight, &shard, &worker);
  run(1, 3, &resumed, &shard2, &worker2);
  std::vector<float> restarted = RandomVector(n, 10);  // overwritten by the loaded shard
  run(4, 6, &restarted, &shard2, &worker2);
  EXPECT_EQ(restarted, straight);
  EXPECT_EQ(worker2, worker);
}

TEST(AsyncTest, LocalOptimizerWarmupStepsOnlyTheWorkersCopy) {
  // One rank, SGD at rate 0.5, tau 2, warm-up of 2 mini-batches. The first mini-batch of a group
  // steps the worker's copy at once (its next gradient sees it) and the global model not at all;
  // the push applies the group's mean at rate 0.5 x 2 = 1 and replaces the copy: no gradient
  // counted twice. After the warm-up the copy waits for the push.
  const int64_t n = 32;
  comm::RunInProcess(1, [&](comm::Communicator& comm) {
    StrategyOptions options;
    options.tau = 2;
    options.local_optimizer_updates = 2;
    options.overlap = false;
    auto strategy = MakeStrategy("async", options, Sgd(), &comm, n);
    std::vector<float> params(n, 10.f), g(n, 1.f);
    strategy->Init(View(params));
    EXPECT_TRUE(strategy->Step(View(g), View(params), Info(1, 0.5f, 0.f)).params_changed);
    EXPECT_FLOAT_EQ(params[0], 9.5f);  // the local step
    strategy->Step(View(g), View(params), Info(2, 0.5f, 0.f));
    EXPECT_FLOAT_EQ(params[0], 9.f);  // 10 - 1 x mean(1, 1): the global step only
    EXPECT_FALSE(strategy->Step(View(g), View(params), Info(3, 0.5f, 0.f)).params_changed);
    EXPECT_FLOAT_EQ(params[0], 9.f);  // warm-up over
    strategy->Step(View(g), View(params), Info(4, 0.5f, 0.f));
    EXPECT_FLOAT_EQ(params[0], 8.f);
    strategy->Finish();
  });
}

TEST(AsyncTest, TauPushesTheMeanAtTheScaledRate) {
  // SGD, tau 4, gradients 1, 2, 3, 4 (mean 2.5) at rate 0.1: linear scaling steps 0.4 x 2.5,
  // sqrt 0.2 x 2.5, none 0.1 x 2.5; clipping at 2 applies to the mean.
  const int64_t n = 16;
  for (auto [scaling, clip, want] :
       {std::tuple{TauLrScaling::kLinear, 0.f, 1.f}, std::tuple{TauLrScaling::kSqrt, 0.f, 0.5f},
        std::tuple{TauLrScaling::kNone, 0.f, 0.25f},
        // The mean's norm is 2.5 x 4 = 10 (the sum's 40): clipped to 8 and to 5 of it.
        std::tuple{TauLrScaling::kLinear, 8.f, 0.8f},
        std::tuple{TauLrScaling::kLinear, 5.f, 0.5f}}) {
    comm::RunInProcess(1, [&](comm::Communicator& comm) {
      StrategyOptions options;
      options.tau = 4;
      options.tau_lr_scaling = scaling;
      options.clip_norm = clip;
      options.overlap = false;
      auto strategy = MakeStrategy("async", options, Sgd(), &comm, n);
      std::vector<float> params(n, 0.f);
      strategy->Init(View(params));
      for (int t = 1; t <= 4; ++t) {
        std::vector<float> g(n, static_cast<float>(t));
        strategy->Step(View(g), View(params), Info(t, 0.1f, 0.f));
      }
      EXPECT_NEAR(params[0], -want, 1e-6) << static_cast<int>(scaling) << " clip " << clip;
      strategy->Finish();
    });
  }
}

TEST(SyncTest, NRanksEqualOneRankWithTheSummedGradient) {
  const int ranks = 3, steps = 5;
  const int64_t n = 777;
  const std::vector<float> init = RandomVector(n, 5);
  auto gradient = [&](int r, int t) { return RandomVector(n, 1000 * r + t); };
  // One rank fed the rank-ordered sum (the order the reduction uses).
  std::vector<float> reference = init;
  comm::RunInProcess(1, [&](comm::Communicator& comm) {
    auto strategy = MakeStrategy("sync", StrategyOptions{}, Adam(), &comm, n);
    strategy->Init(View(reference));
    for (int t = 1; t <= steps; ++t) {
      std::vector<float> sum = gradient(0, t);
      for (int r = 1; r < ranks; ++r) {
        std::vector<float> g = gradient(r, t);
        for (int64_t i = 0; i < n; ++i) sum[i] += g[i];
      }
      strategy->Step(View(sum), View(reference), Info(t, 0.01f));
    }
  });
  std::vector<std::vector<float>> finals(ranks);
  comm::RunInProcess(ranks, [&](comm::Communicator& comm) {
    auto strategy = MakeStrategy("sync", StrategyOptions{}, Adam(), &comm, n);
    std::vector<float> params = init;
    strategy->Init(View(params));
    for (int t = 1; t <= steps; ++t) {
      std::vector<float> g = gradient(comm.rank(), t);
      StepResult r = strategy->Step(View(g), View(params), Info(t, 0.01f));
      EXPECT_TRUE(r.params_changed);
    }
    finals[comm.rank()] = params;
  });
  for (int r = 0; r < ranks; ++r) EXPECT_EQ(finals[r], reference) << "rank " << r;
}

class EmptyShardTest : public ::testing::TestWithParam<std::string> {};

TEST_P(EmptyShardTest, MoreRanksThanBlocksLeaveSomeShardsEmpty) {
  // 20 parameters over 4 ranks: two shards own nothing; updates must still be exact.
  const int ranks = 4, steps = 4;
  const int64_t n = 20;
  std::vector<float> expected(n, 0.f);
  for (int r = 0; r < ranks; ++r) {
    for (int t = 1; t <= steps; ++t) {
      std::vector<float> g = IntegerGradient(n, r, t);
      for (int64_t i = 0; i < n; ++i) expected[i] -= g[i];
    }
  }
  comm::RunInProcess(ranks, [&](comm::Communicator& comm) {
    auto strategy = MakeStrategy(GetParam(), StrategyOptions{}, Sgd(), &comm, n);
    EXPECT_EQ(strategy->shard_map().range(0).size(), 0);
    std::vector<float> params(n, 0.f);
    strategy->Init(View(params));
    for (int t = 1; t <= steps; ++t) {
      std::vector<float> g = IntegerGradient(n, comm.rank(), t);
      strategy->Step(View(g), View(params), Info(t, 1.f, 0.f));
    }
    strategy->Flush(View(params), Info(steps + 1, 1.f, 0.f));
    comm.Barrier();
    strategy->Flush(View(params), Info(steps + 1, 1.f, 0.f));
    EXPECT_EQ(params, expected);
    strategy->Finish();
  });
}

INSTANTIATE_TEST_SUITE_P(Kinds, EmptyShardTest, ::testing::Values("async", "sync"));

TEST(StrategyTest, UnknownKindIsAUserError) {
  comm::RunInProcess(1, [](comm::Communicator& comm) {
    EXPECT_THROW(MakeStrategy("hogwild", StrategyOptions{}, Adam(), &comm, 10), Error);
  });
}

}  // namespace
}  // namespace tern::ps
