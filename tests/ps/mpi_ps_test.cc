// The parameter server between processes (`mpirun -np 2`, registered in CMake): concurrent
// async pushes end in exactly the expected parameters, sync equals the summed gradient, and a
// local SGD round of one step equals the sync step.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "comm/mpi_communicator.h"
#include "ps/strategy.h"

namespace tern::ps {
namespace {

comm::Communicator* g_comm = nullptr;

std::vector<float> IntegerGradient(int64_t n, int rank, int step) {
  std::vector<float> g(n);
  for (int64_t i = 0; i < n; ++i) g[i] = static_cast<float>((i * 7 + rank * 3 + step) % 5 - 2);
  return g;
}

StepInfo Info(int64_t update) {
  StepInfo info;
  info.update = update;
  info.options.learning_rate = 1.f;
  info.options.beta1 = 0.f;  // SGD without momentum: params -= Σ pushed gradients
  return info;
}

TEST(MpiPsTest, AsyncPushesAreNeitherLostNorDoubled) {
  comm::Communicator& comm = *g_comm;
  const int64_t n = 300000, steps = 20;  // shards past MPI's eager limit
  config::OptimConfig sgd;
  sgd.set_optimizer("sgd");
  auto strategy = MakeStrategy("async", StrategyOptions{}, sgd, &comm, n);
  std::vector<float> params(n, 3.f);
  strategy->Init(Tensor(params.data(), Shape{n}));
  for (int t = 1; t <= steps; ++t) {
    std::vector<float> g = IntegerGradient(n, comm.rank(), t);
    strategy->Step(Tensor(g.data(), Shape{n}), Tensor(params.data(), Shape{n}), Info(t));
  }
  strategy->Flush(Tensor(params.data(), Shape{n}), Info(steps + 1));
  comm.Barrier();
  strategy->Flush(Tensor(params.data(), Shape{n}), Info(steps + 1));
  std::vector<float> expected(n, 3.f);
  for (int r = 0; r < comm.size(); ++r) {
    for (int t = 1; t <= steps; ++t) {
      std::vector<float> g = IntegerGradient(n, r, t);
      for (int64_t i = 0; i < n; ++i) expected[i] -= g[i];
    }
  }
  EXPECT_EQ(params, expected);
  EXPECT_EQ(strategy->stats().staleness.total(), comm.size() * steps);
  strategy->Finish();
}

TEST(MpiPsTest, DroppedPushesAndPullsLoseNothing) {
  // 99% dropping both ways between processes: sparse pushes, sparse replies (a header message
  // and a payload message, or none), then Flush's dense pull: every rank ends with init minus
  // everything sent, which is every gradient less the residuals the ranks kept.
  comm::Communicator& comm = *g_comm;
  const int64_t n = 300000, steps = 12;
  config::OptimConfig sgd;
  sgd.set_optimizer("sgd");
  StrategyOptions options;
  options.drop_rate = 0.99f;
  options.drop_warmup = 2;
  options.drop_pulls = true;
  auto strategy = MakeStrategy("async", options, sgd, &comm, n);
  std::vector<float> params(n, 3.f);
  strategy->Init(Tensor(params.data(), Shape{n}));
  // Multiples of 2^-9 of many magnitudes: sums stay exact and the quantile has few ties.
  auto gradient = [n](int rank, int t) {
    std::vector<float> g(n);
    for (int64_t i = 0; i < n; ++i)
      g[i] = static_cast<float>((i * 7919 + rank * 104729 + t * 31) % 1021 - 510) / 512.f;
    return g;
  };
  for (int t = 1; t <= steps; ++t) {
    std::vector<float> g = gradient(comm.rank(), t);
    strategy->Step(Tensor(g.data(), Shape{n}), Tensor(params.data(), Shape{n}), Info(t));
  }
  strategy->Flush(Tensor(params.data(), Shape{n}), Info(steps + 1));
  comm.Barrier();
  strategy->Flush(Tensor(params.data(), Shape{n}), Info(steps + 1));
  const std::string state = strategy->SaveWorkerState();
  ASSERT_EQ(state.size(), sizeof(uint64_t) + n * sizeof(float));
  std::vector<float> residuals(n);
  std::memcpy(residuals.data(), state.data() + sizeof(uint64_t), n * sizeof(float));
  comm.AllReduceSum(Tensor(residuals.data(), Shape{n}));
  std::vector<float> expected(n, 3.f);
  for (int r = 0; r < comm.size(); ++r) {
    for (int t = 1; t <= steps; ++t) {
      std::vector<float> g = gradient(r, t);
      for (int64_t i = 0; i < n; ++i) expected[i] -= g[i];
    }
  }
  for (int64_t i = 0; i < n; ++i) expected[i] += residuals[i];
  EXPECT_EQ(params, expected);
  const StrategyStats stats = strategy->stats();
  // Dense: steps + 2 shards back; here 2 warm-up pushes and 2 Flushes dense, the rest ~1%.
  const int64_t shard_bytes = n / comm.size() * static_cast<int64_t>(sizeof(float));
  EXPECT_LT(stats.bytes_pulled, 5 * shard_bytes) << stats.bytes_pulled;
  strategy->Finish();
}

TEST(MpiPsTest, SyncEqualsSummedGradient) {
  comm::Communicator& comm = *g_comm;
  const int64_t n = 1000;
  config::OptimConfig sgd;
  sgd.set_optimizer("sgd");
  auto strategy = MakeStrategy("sync", StrategyOptions{}, sgd, &comm, n);
  std::vector<float> params(n, 3.f);
  strategy->Init(Tensor(params.data(), Shape{n}));
  std::vector<float> expected(n, 3.f);
  for (int t = 1; t <= 5; ++t) {
    std::vector<float> g = IntegerGradient(n, comm.rank(), t);
    strategy->Step(Tensor(g.data(), Shape{n}), Tensor(params.data(), Shape{n}), Info(t));
    for (int r = 0; r < comm.size(); ++r) {
      std::vector<float> gr = IntegerGradient(n, r, t);
      for (int64_t i = 0; i < n; ++i) expected[i] -= gr[i];
    }
    ASSERT_EQ(params, expected) << "update " << t;
  }
}

TEST(MpiPsTest, LocalSgdRoundOfOneStepEqualsTheSyncStep) {
  // Local SGD, H = 1, SGD inside at rate 1, outer SGD at rate 1 without momentum: each round
  // moves the parameters by the ranks' mean gradient, as sync SGD does with gradients the
  // trainer normalizes over every rank's words (the mean of the integers: halves, exact).
  comm::Communicator& comm = *g_comm;
  const int64_t n = 1000;
  config::OptimConfig sgd;
  sgd.set_optimizer("sgd");
  StrategyOptions local;
  local.local_sgd = true;
  local.outer_learning_rate = 1.f;
  local.outer_momentum = 0.f;
  auto strategy = MakeStrategy("sync", local, sgd, &comm, n);
  std::vector<float> params(n, 3.f);
  strategy->Init(Tensor(params.data(), Shape{n}));
  std::vector<float> expected(n, 3.f);
  for (int t = 1; t <= 5; ++t) {
    std::vector<float> g = IntegerGradient(n, comm.rank(), t);
    const StepResult r =
        strategy->Step(Tensor(g.data(), Shape{n}), Tensor(params.data(), Shape{n}), Info(t));
    EXPECT_TRUE(r.pushed);
    for (int k = 0; k < comm.size(); ++k) {
      std::vector<float> gk = IntegerGradient(n, k, t);
      for (int64_t i = 0; i < n; ++i) expected[i] -= gk[i] / static_cast<float>(comm.size());
    }
    ASSERT_EQ(params, expected) << "round " << t;
  }
}

}  // namespace
}  // namespace tern::ps

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  auto comm = tern::comm::MakeMpiCommunicator(&argc, &argv);
  tern::ps::g_comm = comm.get();
  if (comm->rank() != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
  }
  const int rc = RUN_ALL_TESTS();
  float failed = rc != 0 ? 1.f : 0.f;
  comm->AllReduceSum(tern::Tensor(&failed, tern::Shape{1}));
  comm.reset();
  return failed > 0 ? 1 : 0;
}
