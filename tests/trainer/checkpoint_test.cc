// Checkpoints (trainer/checkpoint.h): what a damaged, edited or incomplete checkpoint does on
// resume (issue 38, 2, 10 and 11), and the best-validation bookkeeping they carry.
#include "trainer/checkpoint.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace tern::trainer {
namespace {

// Issue 38, 3: a NaN validation cost was logged as "new best".
TEST(TrainingState, ANonFiniteCostIsNeverANewBest) {
  TrainingState s;
  EXPECT_FALSE(s.Improves(std::nan("")));
  EXPECT_FALSE(s.Improves(std::numeric_limits<double>::infinity()));
  EXPECT_TRUE(s.Improves(5.0));
  s.best_valid = 5.0;
  EXPECT_TRUE(s.Improves(4.0));
  EXPECT_FALSE(s.Improves(6.0));
  EXPECT_FALSE(s.Improves(-std::numeric_limits<double>::infinity()));
}

}  // namespace
}  // namespace tern::trainer
