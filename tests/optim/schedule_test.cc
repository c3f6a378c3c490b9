// Learning-rate schedule values at chosen updates, cyclic restarts and momentum cooldown.
#include "optim/schedule.h"

#include <gtest/gtest.h>

#include <cmath>

#include "common/error.h"

namespace tern::optim {
namespace {

config::OptimConfig Config(const std::string& schedule) {
  config::OptimConfig c;
  c.set_schedule(schedule);
  c.set_learning_rate(0.001f);
  c.set_beta1(0.9f);
  c.set_beta2(0.98f);
  return c;
}

TEST(ScheduleTest, Constant) {
  Schedule s(Config("constant"));
  EXPECT_FLOAT_EQ(s.LearningRate(1), 0.001f);
  EXPECT_FLOAT_EQ(s.LearningRate(100000), 0.001f);
}

TEST(ScheduleTest, ConstantWithLinearWarmup) {
  auto c = Config("constant");
  c.set_warmup_updates(10);
  Schedule s(c);
  EXPECT_FLOAT_EQ(s.LearningRate(1), 0.0001f);
  EXPECT_FLOAT_EQ(s.LearningRate(5), 0.0005f);
  EXPECT_FLOAT_EQ(s.LearningRate(10), 0.001f);
  EXPECT_FLOAT_EQ(s.LearningRate(1000), 0.001f);
}

TEST(ScheduleTest, InvSqrtWarmupThenDecay) {
  auto c = Config("inv_sqrt");
  c.set_warmup_updates(100);
  Schedule s(c);
  EXPECT_FLOAT_EQ(s.LearningRate(1), 0.001f * 0.01f);
  EXPECT_FLOAT_EQ(s.LearningRate(50), 0.0005f);
  EXPECT_FLOAT_EQ(s.LearningRate(100), 0.001f);
  EXPECT_FLOAT_EQ(s.LearningRate(400), 0.0005f);    // sqrt(100/400) = 1/2
  EXPECT_FLOAT_EQ(s.LearningRate(10000), 0.0001f);  // sqrt(100/10000) = 1/10
}

TEST(ScheduleTest, InvSqrtWithoutWarmup) {
  Schedule s(Config("inv_sqrt"));
  EXPECT_FLOAT_EQ(s.LearningRate(1), 0.001f);
  EXPECT_FLOAT_EQ(s.LearningRate(4), 0.0005f);
}

TEST(ScheduleTest, FlexibleScalesByTargetWords) {
  auto c = Config("flexible");
  c.set_reference_words(1000);
  Schedule s(c);
  EXPECT_FLOAT_EQ(s.LearningRate(7, 1000), 0.001f);
  EXPECT_FLOAT_EQ(s.LearningRate(7, 500), 0.0005f);
  EXPECT_FLOAT_EQ(s.LearningRate(7, 3000), 0.003f);
  c.set_reference_words(0);
  EXPECT_THROW(Schedule bad(c), Error);
}

TEST(ScheduleTest, CyclicRampsAndRestartsOnStall) {
  auto c = Config("cyclic");
  c.set_lr_min(0.0001f);
  c.set_cycle_updates(10);
  Schedule s(c);
  EXPECT_FLOAT_EQ(s.LearningRate(1), 0.0001f);
  EXPECT_FLOAT_EQ(s.LearningRate(6), 0.0001f + 0.0009f * 0.5f);
  EXPECT_FLOAT_EQ(s.LearningRate(10), 0.0001f + 0.0009f * 0.9f);
  EXPECT_FLOAT_EQ(s.LearningRate(11), 0.0001f);  // next cycle starts at the minimum
  EXPECT_FLOAT_EQ(s.LearningRate(13), 0.0001f + 0.0009f * 0.2f);
  s.OnValidationStalled(13);
  EXPECT_EQ(s.cycle_start(), 14);
  EXPECT_FLOAT_EQ(s.LearningRate(14), 0.0001f);
  EXPECT_FLOAT_EQ(s.LearningRate(19), 0.0001f + 0.0009f * 0.5f);
  c.set_cycle_updates(0);
  EXPECT_THROW(Schedule bad(c), Error);
}

TEST(ScheduleTest, StallIsIgnoredByNonCyclic) {
  Schedule s(Config("constant"));
  s.OnValidationStalled(50);
  EXPECT_FLOAT_EQ(s.LearningRate(51), 0.001f);
}

TEST(ScheduleTest, MomentumCooldownSwitchesBetasAfterK) {
  auto c = Config("constant");
  c.set_cooldown_after(4000);
  c.set_cooldown_beta1(0.92f);
  c.set_cooldown_beta2(0.998f);
  Schedule s(c);
  StepOptions before = s.Options(4000);
  EXPECT_FLOAT_EQ(before.beta1, 0.9f);
  EXPECT_FLOAT_EQ(before.beta2, 0.98f);
  EXPECT_FLOAT_EQ(before.learning_rate, 0.001f);
  StepOptions after = s.Options(4001);
  EXPECT_FLOAT_EQ(after.beta1, 0.92f);
  EXPECT_FLOAT_EQ(after.beta2, 0.998f);
}

TEST(ScheduleTest, NoCooldownKeepsBetas) {
  Schedule s(Config("constant"));
  float b1, b2;
  s.Betas(1000000, &b1, &b2);
  EXPECT_FLOAT_EQ(b1, 0.9f);
  EXPECT_FLOAT_EQ(b2, 0.98f);
}

TEST(ScheduleTest, RejectsUnknownScheduleAndCooldownWithoutBetas) {
  EXPECT_THROW(Schedule bad(Config("exponential")), Error);
  auto c = Config("constant");
  c.set_cooldown_after(10);
  EXPECT_THROW(Schedule bad(c), Error);
}

}  // namespace
}  // namespace tern::optim
