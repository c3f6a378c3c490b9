// Re-sharding checkpoints onto another rank count: shards written by N ranks, re-sharded for M,
// then stepped again, hold exactly what one optimizer over the whole buffer holds after the
// same two steps (Adam and SGD are elementwise, so the values are equal bit for bit); residuals
// are conserved.
#include "ps/reshard.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "common/error.h"
#include "optim/optimizer.h"
#include "ps/shard.h"
#include "ps/shard_map.h"
#include "tests/ps/test_vectors.h"

namespace tern::ps {
namespace {

using testing::RandomVector;
using testing::View;

constexpr int64_t kParams = 1000;  // not a multiple of ShardMap::kAlignFloats

optim::StepOptions Options(float lr) {
  optim::StepOptions o;
  o.learning_rate = lr;
  o.beta1 = 0.9f;
  o.beta2 = 0.98f;
  return o;
}

std::unique_ptr<optim::Optimizer> MakeOptimizer(bool adam, int64_t size) {
  return adam ? optim::MakeAdam(size, {1e-8f, 0.f}) : optim::MakeSgd(size);
}

// Async shards of `map`, each stepped with its slice of `grad`; returns their saved states.
std::vector<std::string> SteppedShards(bool adam, const ShardMap& map, const float* init,
                                       const float* grad, uint64_t pushes) {
  std::vector<std::string> states;
  for (int s = 0; s < map.num_shards(); ++s) {
    const ShardRange& r = map.range(s);
    Shard shard(r, MakeOptimizer(adam, r.size()));
    shard.Init(init + r.begin);
    for (uint64_t k = 0; k < pushes; ++k) shard.ApplyDense(grad + r.begin, Options(0.01f), k);
    states.push_back(shard.SaveState());
  }
  return states;
}

struct Case {
  int from, to;
  bool adam;
};

class ReshardTest : public ::testing::TestWithParam<Case> {};

TEST_P(ReshardTest, AsyncShardsContinueExactlyLikeOneOptimizer) {
  const Case c = GetParam();
  std::vector<float> init = RandomVector(kParams, 1);
  std::vector<float> g1 = RandomVector(kParams, 2), g2 = RandomVector(kParams, 3);
  // The reference: one optimizer over everything, two pushes of g1 then one of g2.
  std::vector<float> reference = init;
  auto whole = MakeOptimizer(c.adam, kParams);
  whole->Step(View(reference), View(g1), Options(0.01f));
  whole->Step(View(reference), View(g1), Options(0.01f));
  whole->Step(View(reference), View(g2), Options(0.01f));

  const std::vector<std::string> old_states =
      SteppedShards(c.adam, ShardMap(kParams, c.from), init.data(), g1.data(), 2);
  const std::vector<std::string> states = ReshardShardStates("async", old_states, kParams, c.to);
  ASSERT_EQ(states.size(), static_cast<size_t>(c.to));
  const ShardMap map(kParams, c.to);
  std::vector<float> got(kParams);
  for (int s = 0; s < c.to; ++s) {
    const ShardRange& r = map.range(s);
    Shard shard(r, MakeOptimizer(c.adam, r.size()));
    shard.LoadState(states[s]);
    EXPECT_EQ(shard.version(), 0u) << "versions restart under a new shard map";
    EXPECT_EQ(shard.ApplyDense(g2.data() + r.begin, Options(0.01f), 0), 1u);
    shard.Read(got.data() + r.begin);
  }
  EXPECT_EQ(got, reference);  // bit for bit
}

TEST_P(ReshardTest, SyncOptimizerStatesContinueExactly) {
  const Case c = GetParam();
  std::vector<float> params = RandomVector(kParams, 4);
  std::vector<float> g1 = RandomVector(kParams, 5), g2 = RandomVector(kParams, 6);
  std::vector<float> reference = params;
  auto whole = MakeOptimizer(c.adam, kParams);
  whole->Step(View(reference), View(g1), Options(0.02f));
  whole->Step(View(reference), View(g2), Options(0.02f));

  const ShardMap old_map(kParams, c.from);
  std::vector<std::string> old_states;
  for (int s = 0; s < c.from; ++s) {
    const ShardRange& r = old_map.range(s);
    auto o = MakeOptimizer(c.adam, r.size());
    o->Step(Tensor(params.data() + r.begin, Shape{r.size()}),
            Tensor(g1.data() + r.begin, Shape{r.size()}), Options(0.02f));
    old_states.push_back(o->SaveState());
  }
  const std::vector<std::string> states = ReshardShardStates("sync", old_states, kParams, c.to);
  const ShardMap map(kParams, c.to);
  for (int s = 0; s < c.to; ++s) {
    const ShardRange& r = map.range(s);
    auto o = MakeOptimizer(c.adam, r.size());
    o->LoadState(states[s]);
    EXPECT_EQ(o->steps(), 1);
    o->Step(Tensor(params.data() + r.begin, Shape{r.size()}),
            Tensor(g2.data() + r.begin, Shape{r.size()}), Options(0.02f));
  }
  EXPECT_EQ(params, reference);
}

TEST_P(ReshardTest, ResidualsAreConservedAndGoToTheNewOwners) {
  const Case c = GetParam();
  const size_t bytes = sizeof(uint64_t) + kParams * sizeof(float);
  std::vector<std::string> old_states;
  std::vector<float> total(kParams, 0.f);
  for (int w = 0; w < c.from; ++w) {
    std::string s(bytes, '\0');
    const uint64_t drops = 10 + w;
    std::memcpy(s.data(), &drops, sizeof(drops));
    // Small integers: their sums are exact in any order.
    std::vector<float> r(kParams);
    for (int64_t i = 0; i < kParams; ++i) {
      r[i] = static_cast<float>((i * 3 + w * 5) % 7 - 3);
      total[i] += r[i];
    }
    std::memcpy(s.data() + sizeof(uint64_t), r.data(), kParams * sizeof(float));
    old_states.push_back(s);
  }
  const std::vector<std::string> states = ReshardWorkerStates(old_states, kParams, c.to);
  ASSERT_EQ(states.size(), static_cast<size_t>(c.to));
  const ShardMap map(kParams, c.to);
  std::vector<float> sum(kParams, 0.f);
  for (int w = 0; w < c.to; ++w) {
    ASSERT_EQ(states[w].size(), bytes);
    uint64_t drops = 0;
    std::memcpy(&drops, states[w].data(), sizeof(drops));
    EXPECT_EQ(drops, static_cast<uint64_t>(10 + c.from - 1));
    std::vector<float> r(kParams);
    std::memcpy(r.data(), states[w].data() + sizeof(uint64_t), kParams * sizeof(float));
    for (int64_t i = 0; i < kParams; ++i) {
      sum[i] += r[i];
      if (i < map.range(w).begin || i >= map.range(w).end) {
        ASSERT_EQ(r[i], 0.f) << "worker " << w << " holds residual outside its shard at " << i;
      }
    }
  }
  EXPECT_EQ(sum, total);
}

INSTANTIATE_TEST_SUITE_P(RankCounts, ReshardTest,
                         ::testing::Values(Case{2, 3, true}, Case{3, 1, true}, Case{1, 2, true},
                                           Case{2, 2, true}, Case{3, 2, false}));

TEST(ReshardTest, NoResidualsStayEmpty) {
  const std::vector<std::string> states = ReshardWorkerStates({"", ""}, kParams, 3);
  EXPECT_EQ(states, std::vector<std::string>(3));
}

TEST(ReshardTest, LocalSgdsInnerOptimizersGoToWorkerWModTheOldCount) {
  const std::string a = EncodeInnerState("inner of 0"), b = EncodeInnerState("inner of 1");
  EXPECT_EQ(ReshardWorkerStates({a, b}, kParams, 3), (std::vector<std::string>{a, b, a}));
  EXPECT_EQ(ReshardWorkerStates({a, b}, kParams, 1), (std::vector<std::string>{a}));
}

TEST(ReshardTest, MalformedStatesAreErrors) {
  EXPECT_THROW(ReshardShardStates("async", {"short"}, kParams, 2), Error);
  EXPECT_THROW(ReshardShardStates("sync", {"short"}, kParams, 2), Error);
  EXPECT_THROW(ReshardWorkerStates({"short"}, kParams, 2), Error);
}

}  // namespace
}  // namespace tern::ps
