// ps/plan.h: the one place that checks the distributed settings and picks the strategy.
#include "ps/plan.h"

#include <gtest/gtest.h>

#include <limits>
#include <string>

#include "common/error.h"

namespace tern::ps {
namespace {

config::TrainConfig Config(const std::string& strategy) {
  config::TrainConfig c;
  c.mutable_distributed()->set_strategy(strategy);
  c.mutable_distributed()->set_tau(1);
  c.mutable_distributed()->set_stall_seconds(45);
  c.mutable_distributed()->set_overlap("auto");
  return c;
}

// The message of the tern::Error `f` throws, or "" when it throws none.
template <typename F>
std::string ErrorOf(F f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(PlanTest, EachBadSettingIsRefusedNamingItsField) {
  struct Case {
    const char* field;
    void (*set)(config::TrainConfig*);
  };
  const Case cases[] = {
      {"distributed.strategy",
       [](config::TrainConfig* c) { c->mutable_distributed()->set_strategy("hogwild"); }},
      {"distributed.tau", [](config::TrainConfig* c) { c->mutable_distributed()->set_tau(0); }},
      {"distributed.tau", [](config::TrainConfig* c) { c->mutable_distributed()->set_tau(-3); }},
      {"distributed.drop_rate",
       [](config::TrainConfig* c) { c->mutable_distributed()->set_drop_rate(1.f); }},
      {"distributed.drop_rate",
       [](config::TrainConfig* c) { c->mutable_distributed()->set_drop_rate(-0.5f); }},
      {"distributed.drop_warmup",
       [](config::TrainConfig* c) { c->mutable_distributed()->set_drop_warmup(-1); }},
      {"distributed.local_optimizer_updates",
       [](config::TrainConfig* c) { c->mutable_distributed()->set_local_optimizer_updates(-1); }},
      {"distributed.stall_seconds",
       [](config::TrainConfig* c) { c->mutable_distributed()->set_stall_seconds(0); }},
      // Issue 38: an infinite or huge one overflowed the watchdog's clock.
      {"distributed.stall_seconds",
       [](config::TrainConfig* c) {
         c->mutable_distributed()->set_stall_seconds(std::numeric_limits<float>::infinity());
       }},
      {"distributed.stall_seconds",
       [](config::TrainConfig* c) { c->mutable_distributed()->set_stall_seconds(1e30f); }},
      {"distributed.tau",
       [](config::TrainConfig* c) { c->mutable_distributed()->set_tau(2000000000); }},
      {"distributed.overlap",
       [](config::TrainConfig* c) { c->mutable_distributed()->set_overlap("sometimes"); }},
      {"optim.clip_norm", [](config::TrainConfig* c) { c->mutable_optim()->set_clip_norm(-1); }},
      // Dropped pulls follow the pushes' dropping: without it they would silently do nothing.
      {"distributed.drop_pulls",
       [](config::TrainConfig* c) { c->mutable_distributed()->set_drop_pulls(true); }},
  };
  for (const Case& k : cases) {
    config::TrainConfig c = Config("async");
    k.set(&c);
    const std::string error = ErrorOf([&] { ReadDistributedSettings(c); });
    EXPECT_NE(error.find(k.field), std::string::npos) << k.field << ": '" << error << "'";
  }
  EXPECT_EQ(ErrorOf([] { ReadDistributedSettings(Config("async")); }), "");
}

TEST(PlanTest, BadLocalSgdSettingsAreRefusedNamingTheField) {
  struct Case {
    const char* strategy;
    const char* field;
    void (*set)(config::DistributedConfig*);
  };
  const Case cases[] = {
      {"sync", "distributed.local_steps",
       [](config::DistributedConfig* x) { x->set_local_steps(-1); }},
      // Outer settings without local SGD would silently do nothing.
      {"async", "distributed.outer_learning_rate",
       [](config::DistributedConfig* x) { x->set_outer_learning_rate(0.5f); }},
      {"sync", "distributed.outer_momentum",
       [](config::DistributedConfig* x) { x->set_outer_momentum(0.5f); }},
      {"sync", "distributed.outer_nesterov",
       [](config::DistributedConfig* x) { x->set_outer_nesterov(false); }},
      {"sync", "distributed.outer_learning_rate",
       [](config::DistributedConfig* x) {
         x->set_local_steps(50);
         x->set_outer_learning_rate(-0.1f);
       }},
      {"async", "distributed.outer_learning_rate",
       [](config::DistributedConfig* x) {
         x->set_local_steps(50);
         x->set_outer_learning_rate(std::numeric_limits<float>::infinity());
       }},
      {"sync", "distributed.outer_momentum",
       [](config::DistributedConfig* x) {
         x->set_local_steps(50);
         x->set_outer_momentum(1.f);
       }},
      {"async", "distributed.outer_momentum_delay",
       [](config::DistributedConfig* x) {
         x->set_local_steps(50);
         x->set_outer_momentum_delay(0);
       }},
      {"sync", "distributed.outer_momentum_delay",
       [](config::DistributedConfig* x) {
         x->set_local_steps(50);
         x->set_outer_momentum_delay(4);
       }},
      {"async", "distributed.tau",
       [](config::DistributedConfig* x) {
         x->set_local_steps(50);
         x->set_tau(2);
       }},
      {"async", "distributed.local_optimizer_updates",
       [](config::DistributedConfig* x) {
         x->set_local_steps(50);
         x->set_local_optimizer_updates(100);
       }},
      {"async", "distributed.drop_rate",
       [](config::DistributedConfig* x) {
         x->set_local_steps(50);
         x->set_drop_rate(0.9f);
       }},
  };
  for (const Case& k : cases) {
    config::TrainConfig c = Config(k.strategy);
    k.set(c.mutable_distributed());
    const std::string error = ErrorOf([&] { ReadDistributedSettings(c); });
    EXPECT_NE(error.find(k.field), std::string::npos) << k.field << ": '" << error << "'";
  }
}

TEST(PlanTest, LocalSgdSettingsAndDefaults) {
  config::TrainConfig c = Config("async");
  c.mutable_distributed()->set_local_steps(200);
  DistributedSettings s = ReadDistributedSettings(c);
  EXPECT_TRUE(s.options.local_sgd);
  EXPECT_EQ(s.options.tau, 200);  // a push every 200 mini-batches
  EXPECT_FLOAT_EQ(s.options.outer_learning_rate, 0.7f);
  EXPECT_FLOAT_EQ(s.options.outer_momentum, 0.9f);
  EXPECT_TRUE(s.options.outer_nesterov);
  EXPECT_EQ(s.options.outer_momentum_delay, 1);
  c.mutable_distributed()->set_outer_learning_rate(0.5f);
  c.mutable_distributed()->set_outer_momentum(0.8f);
  c.mutable_distributed()->set_outer_nesterov(false);
  c.mutable_distributed()->set_outer_momentum_delay(8);
  s = ReadDistributedSettings(c);
  EXPECT_FLOAT_EQ(s.options.outer_learning_rate, 0.5f);
  EXPECT_FLOAT_EQ(s.options.outer_momentum, 0.8f);
  EXPECT_FALSE(s.options.outer_nesterov);
  EXPECT_EQ(s.options.outer_momentum_delay, 8);
  // One rank on a device still runs the strategy (its outer step is the point), and the delayed
  // momentum keeps the shard on the host.
  Placement gpu;
  gpu.host_copy = gpu.cuda = true;
  const StrategyPlan plan = PlanStrategy(s, 1, gpu);
  EXPECT_FALSE(plan.local);
  EXPECT_EQ(plan.options().shard_device, Device::kCpu);
  EXPECT_NE(plan.Describe().find("local SGD: 200 local steps"), std::string::npos)
      << plan.Describe();
}

TEST(PlanTest, SyncLocalSgdStepsOnTheDeviceEvenOnOneRank) {
  config::TrainConfig c = Config("sync");
  c.mutable_distributed()->set_local_steps(50);
  Placement gpu;
  gpu.host_copy = gpu.cuda = gpu.nccl = true;
  for (const int ranks : {1, 4}) {
    const StrategyPlan plan = PlanStrategy(ReadDistributedSettings(c), ranks, gpu);
    EXPECT_FALSE(plan.local) << ranks;
    EXPECT_TRUE(plan.steps_on_device && plan.device_collectives) << ranks;
  }
}

TEST(PlanTest, SyncRefusesTheAsyncOnlyMethodsRatherThanIgnoringThem) {
  config::TrainConfig c = Config("sync");
  c.mutable_distributed()->set_drop_rate(0.99f);
  EXPECT_NE(ErrorOf([&] { ReadDistributedSettings(c); }).find("distributed.drop_rate"),
            std::string::npos);
  c = Config("sync");
  c.mutable_distributed()->set_local_optimizer_updates(100);
  EXPECT_NE(ErrorOf([&] { ReadDistributedSettings(c); }).find("local_optimizer_updates"),
            std::string::npos);
}

TEST(PlanTest, TheSettingsCarryTheConfigsValues) {
  config::TrainConfig c = Config("async");
  c.mutable_distributed()->set_tau(3);
  c.mutable_distributed()->set_drop_rate(0.99f);
  c.mutable_distributed()->set_drop_warmup(50);
  c.mutable_distributed()->set_drop_pulls(true);
  c.mutable_distributed()->set_local_optimizer_updates(200);
  c.mutable_distributed()->set_overlap("never");
  c.mutable_optim()->set_clip_norm(5);
  c.mutable_training()->set_seed(77);
  const DistributedSettings s = ReadDistributedSettings(c);
  EXPECT_EQ(s.algorithm, "async");
  EXPECT_EQ(s.options.tau, 3);
  EXPECT_FLOAT_EQ(s.options.drop_rate, 0.99f);
  EXPECT_EQ(s.options.drop_warmup, 50);
  EXPECT_TRUE(s.options.drop_pulls);
  EXPECT_EQ(s.options.local_optimizer_updates, 200);
  EXPECT_FALSE(s.options.overlap);
  EXPECT_EQ(s.options.overlap_wait, 0);
  EXPECT_FLOAT_EQ(s.options.clip_norm, 5);
  EXPECT_EQ(s.options.seed, 77u);
  c.mutable_distributed()->set_overlap("auto");
  EXPECT_TRUE(ReadDistributedSettings(c).options.overlap);
  EXPECT_EQ(ReadDistributedSettings(c).options.overlap_wait, kAutoOverlapWait);
}

TEST(PlanTest, TheLocalStrategyTakesOneDeviceRankWithNothingToShare) {
  Placement gpu;
  gpu.host_copy = gpu.cuda = true;
  config::TrainConfig c = Config("async");
  StrategyPlan p = PlanStrategy(ReadDistributedSettings(c), 1, gpu);
  EXPECT_TRUE(p.local);
  EXPECT_TRUE(p.steps_on_device);
  EXPECT_FALSE(PlanStrategy(ReadDistributedSettings(c), 2, gpu).local);
  EXPECT_FALSE(PlanStrategy(ReadDistributedSettings(c), 1, Placement{}).local);  // CPU graph
  c.mutable_distributed()->set_tau(2);
  EXPECT_FALSE(PlanStrategy(ReadDistributedSettings(c), 1, gpu).local);
  c.mutable_distributed()->set_tau(1);
  c.mutable_distributed()->set_drop_rate(0.99f);
  EXPECT_FALSE(PlanStrategy(ReadDistributedSettings(c), 1, gpu).local);
  c.mutable_distributed()->set_drop_rate(0.f);
  c.mutable_distributed()->set_local_optimizer_updates(100);
  EXPECT_FALSE(PlanStrategy(ReadDistributedSettings(c), 1, gpu).local);
}

TEST(PlanTest, SyncOnSeveralGpusUsesNcclUnlessItCannot) {
  Placement gpu;
  gpu.host_copy = gpu.cuda = gpu.nccl = true;
  const DistributedSettings sync = ReadDistributedSettings(Config("sync"));
  StrategyPlan p = PlanStrategy(sync, 2, gpu);
  EXPECT_TRUE(p.device_collectives && p.steps_on_device && !p.local);
  EXPECT_TRUE(p.ranks_meet_every_update());
  EXPECT_FALSE(p.led_by_rank0());
  gpu.gpus_shared = true;
  p = PlanStrategy(sync, 2, gpu);
  EXPECT_FALSE(p.device_collectives || p.steps_on_device);
  EXPECT_NE(p.fallback_warning.find("share a GPU"), std::string::npos);
  gpu.gpus_shared = false;
  gpu.nccl = false;
  EXPECT_FALSE(PlanStrategy(sync, 2, gpu).device_collectives);
}

TEST(PlanTest, AsyncOnSeveralRanksIsLedByRankZeroWithItsShardOnTheGpu) {
  Placement gpu;
  gpu.host_copy = gpu.cuda = gpu.nccl = true;
  const StrategyPlan p = PlanStrategy(ReadDistributedSettings(Config("async")), 4, gpu);
  EXPECT_TRUE(p.led_by_rank0());
  EXPECT_FALSE(p.ranks_meet_every_update());
  EXPECT_TRUE(p.has_staleness());
  EXPECT_FALSE(p.steps_on_device);
  EXPECT_EQ(p.options().shard_device, Device::kCuda);
  EXPECT_EQ(
      PlanStrategy(ReadDistributedSettings(Config("async")), 4, Placement{}).options().shard_device,
      Device::kCpu);
  EXPECT_EQ(PlanStrategy(ReadDistributedSettings(Config("sync")), 1, Placement{}).Describe(),
            "1 rank(s), strategy sync, tau 1");
}

}  // namespace
}  // namespace tern::ps
