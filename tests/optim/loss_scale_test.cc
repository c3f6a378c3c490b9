// Dynamic loss scaling: overflow halves and skips, a window of good steps doubles, bounds hold,
// and a restored scaler continues like the one it was saved from.
#include "optim/loss_scale.h"

#include <gtest/gtest.h>

namespace tern::optim {
namespace {

TEST(LossScalerTest, OverflowSkipsAndHalvesAWindowOfGoodStepsDoubles) {
  LossScaler s(1024.f, 3);
  EXPECT_TRUE(s.Update(true));
  EXPECT_TRUE(s.Update(true));
  EXPECT_EQ(s.scale(), 1024.f);
  EXPECT_TRUE(s.Update(true));  // the third good step in a row
  EXPECT_EQ(s.scale(), 2048.f);
  EXPECT_EQ(s.good_steps(), 0);
  EXPECT_TRUE(s.Update(true));
  EXPECT_TRUE(s.Update(true));
  EXPECT_FALSE(s.Update(false));  // overflow: skipped, halved, and the count starts again
  EXPECT_EQ(s.scale(), 1024.f);
  EXPECT_EQ(s.good_steps(), 0);
  EXPECT_EQ(s.skipped(), 1);
  EXPECT_TRUE(s.Update(true));
  EXPECT_TRUE(s.Update(true));
  EXPECT_EQ(s.scale(), 1024.f);
}

TEST(LossScalerTest, StaysWithinBounds) {
  LossScaler low(2.f, 1);
  for (int i = 0; i < 5; ++i) EXPECT_FALSE(low.Update(false));
  EXPECT_EQ(low.scale(), 1.f);
  LossScaler high(1.f, 1);
  for (int i = 0; i < 200; ++i) EXPECT_TRUE(high.Update(true));
  EXPECT_EQ(high.scale(), 1.f * (1 << 30) * (1 << 30));
}

TEST(LossScalerTest, RestoredContinuesLikeTheOriginal) {
  LossScaler a(65536.f, 4);
  const bool pattern[] = {true, true, false, true, true, true};
  for (bool ok : pattern) a.Update(ok);
  LossScaler b(65536.f, 4);
  b.Restore(a.scale(), a.good_steps());
  for (int i = 0; i < 9; ++i) {
    const bool ok = i % 5 != 4;
    EXPECT_EQ(a.Update(ok), b.Update(ok));
    EXPECT_EQ(a.scale(), b.scale()) << "step " << i;
    EXPECT_EQ(a.good_steps(), b.good_steps());
  }
}

}  // namespace
}  // namespace tern::optim
