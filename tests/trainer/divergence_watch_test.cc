// DivergenceWatch alone: the costs' sum, the run of non-finite costs across log points, and the
// messages that name the update, the checkpoint and the parameter.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "common/error.h"
#include "trainer/divergence.h"

namespace tern::trainer {
namespace {

config::TrainConfig Config(int disp_freq, int max_nonfinite) {
  config::TrainConfig c;
  c.mutable_training()->set_disp_freq(disp_freq);
  c.mutable_training()->set_max_nonfinite_updates(max_nonfinite);
  c.mutable_optim()->set_learning_rate(0.5f);
  return c;
}

Tensor Cost(float v) { return Tensor::FromVector(Shape{1}, {v}); }

TEST(DivergenceWatchTest, SumsTheCostsSinceTheLastRead) {
  DivergenceWatch w(Config(4, 3), Device::kCpu);
  EXPECT_EQ(w.TakeCost(0), 0);
  w.AddCost(Cost(1.5f));
  w.AddCost(Cost(2.f));
  EXPECT_FLOAT_EQ(w.TakeCost(2), 3.5f);
  w.AddCost(Cost(4.f));
  EXPECT_FLOAT_EQ(w.TakeCost(3), 4.f);
  EXPECT_FALSE(w.Diverged());
}

TEST(DivergenceWatchTest, NonFiniteCostsInARowAcrossLogPointsDiverge) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  DivergenceWatch w(Config(2, 3), Device::kCpu);
  w.AddCost(Cost(1.f));
  w.AddCost(Cost(nan));
  w.TakeCost(2);
  EXPECT_FALSE(w.Diverged());
  w.AddCost(Cost(INFINITY));
  w.AddCost(Cost(nan));
  EXPECT_TRUE(std::isnan(w.TakeCost(4)));
  ASSERT_TRUE(w.Diverged());
  w.Saved(1);
  try {
    w.Fail(0);
    FAIL() << "Fail returned";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("for 3 updates in a row, from update 2"),
              std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("checkpoint-1 holds the last parameters"),
              std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("optim.learning_rate (0.5)"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(w.Fail(1), Error);
}

TEST(DivergenceWatchTest, AFiniteCostEndsTheRun) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  DivergenceWatch w(Config(4, 2), Device::kCpu);
  w.AddCost(Cost(nan));
  w.AddCost(Cost(2.f));
  w.AddCost(Cost(nan));
  w.TakeCost(3);
  EXPECT_FALSE(w.Diverged());
}

TEST(DivergenceWatchTest, NamesTheFirstParameterThatIsNotFinite) {
  graph::ParamStore params;
  params.Add("ok", Shape{2}, graph::Init::kZeros);
  params.Add("bad", Shape{3}, graph::Init::kZeros);
  params.Finalize(Device::kCpu, 1);
  DivergenceWatch w(Config(1, 1), Device::kCpu);
  EXPECT_NO_THROW(w.CheckParametersFinite(params, 7));
  params.value(1).f32()[2] = std::numeric_limits<float>::infinity();
  try {
    w.CheckParametersFinite(params, 7);
    FAIL() << "accepted an infinite parameter";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("parameter 'bad' holds inf at update 7"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace tern::trainer
