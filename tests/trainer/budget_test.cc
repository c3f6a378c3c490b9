// Budget::Parse takes Marian's --after syntax and refuses, naming the text, every budget that
// would not end (issue 38, 4: "nanu" and "nans" trained until killed, "0.5u" meant no limit).
#include "trainer/budget.h"

#include <gtest/gtest.h>

#include "common/error.h"

namespace tern::trainer {
namespace {

TEST(Budget, ParsesEachUnit) {
  EXPECT_EQ(Budget::Parse("90s").seconds, 90);
  EXPECT_EQ(Budget::Parse("1.5m").seconds, 90);
  EXPECT_EQ(Budget::Parse("2h").seconds, 7200);
  EXPECT_EQ(Budget::Parse("2e3u").updates, 2000);
  EXPECT_EQ(Budget::Parse("5e").epochs, 5);
  EXPECT_TRUE(Budget::Parse("").unlimited());
}

TEST(Budget, SeveralStopAtWhicheverComesFirst) {
  const Budget b = Budget::Parse("30m, 2000u,5e");
  EXPECT_EQ(b.seconds, 1800);
  EXPECT_EQ(b.updates, 2000);
  EXPECT_EQ(b.epochs, 5);
  EXPECT_EQ(Budget::Parse("20u,10u").updates, 10);
  EXPECT_EQ(Budget::Parse("1h,30m").seconds, 1800);
  EXPECT_TRUE(Budget::Parse("10u").Reached(0, 10, 0));
  EXPECT_FALSE(Budget::Parse("10u").Reached(1e9, 9, 1000));
}

TEST(Budget, BudgetsThatWouldNeverEndAreRefused) {
  for (const char* bad : {"nanu", "nans", "infs", "infh", "-5u", "0u", "0s", "0.5u", "1.5e",
                          "1e308h", "1e16u", "0x10u", "+5u", "u", "5", "10q", "5 u", ".u"}) {
    try {
      const Budget b = Budget::Parse(bad);
      ADD_FAILURE() << "'" << bad << "' was taken: " << b.seconds << " s, " << b.updates
                    << " updates, " << b.epochs << " epochs";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(bad), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace tern::trainer
