// The parameter server between processes (`mpirun -np 2`, registered in CMake): concurrent
// async pushes end in exactly the expected parameters, and sync equals the summed gradient.
#include <gtest/gtest.h>

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
