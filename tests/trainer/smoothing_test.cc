#include "trainer/smoothing.h"

#include <gtest/gtest.h>

#include "tensor/ops.h"

namespace tern::trainer {
namespace {

Tensor Values(std::initializer_list<float> v) {
  Tensor t = Tensor::Empty({static_cast<int64_t>(v.size())});
  std::copy(v.begin(), v.end(), t.f32());
  return t;
}

TEST(SmoothingDecay, FollowsTheParametersEarlyAndSpansOneOverSLater) {
  EXPECT_FLOAT_EQ(SmoothingDecay(1e-4f, 1), 2.f / 11.f);
  EXPECT_FLOAT_EQ(SmoothingDecay(1e-4f, 90), 91.f / 100.f);
  EXPECT_FLOAT_EQ(SmoothingDecay(1e-4f, 1000000), 1.f - 1e-4f);
  EXPECT_FLOAT_EQ(SmoothingDecay(0.5f, 100), 0.5f);
}

TEST(ParamSmoother, StartsAtTheParametersThenAveragesThem) {
  ParamSmoother s(0.25f);
  ASSERT_TRUE(s.active());
  EXPECT_FALSE(s.average().defined());
  s.Update(Values({1.f, -2.f}), 1);
  ASSERT_TRUE(s.average().defined());
  EXPECT_FLOAT_EQ(s.average().f32()[0], 1.f);
  EXPECT_FLOAT_EQ(s.average().f32()[1], -2.f);
  // Update 2: d = min(0.75, 3 / 12) = 0.25.
  s.Update(Values({5.f, 2.f}), 2);
  EXPECT_FLOAT_EQ(s.average().f32()[0], 0.25f * 1.f + 0.75f * 5.f);
  EXPECT_FLOAT_EQ(s.average().f32()[1], 0.25f * -2.f + 0.75f * 2.f);
  // Update 100: d = 0.75 (1 - s).
  s.Update(Values({0.f, 0.f}), 100);
  EXPECT_FLOAT_EQ(s.average().f32()[0], 0.75f * 4.f);
}

TEST(ParamSmoother, ResumesFromARestoredAverage) {
  ParamSmoother s(0.5f);
  s.Restore(Values({2.f}), Device::kCpu);
  s.Update(Values({4.f}), 50);  // d = 0.5
  EXPECT_FLOAT_EQ(s.average().f32()[0], 3.f);
  EXPECT_FALSE(ParamSmoother(0.f).active());
}

}  // namespace
}  // namespace tern::trainer
