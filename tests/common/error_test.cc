// RunMain's error line: a tern::Error is one line on stderr and exit code 1; a process that is
// one of several (an MPI rank) names itself in that line.
#include "common/error.h"

#include <gtest/gtest.h>

#include <string>

namespace tern {
namespace {

std::string ErrorLine(int* rc) {
  ::testing::internal::CaptureStderr();
  *rc = RunMain("tern-x", []() -> int { Fail("data.train_src: no such file; fix the path"); });
  return ::testing::internal::GetCapturedStderr();
}

TEST(RunMainTest, AnErrorIsOneLineNamingTheProgramAndItsRole) {
  int rc = 0;
  EXPECT_EQ(ErrorLine(&rc), "tern-x: error: data.train_src: no such file; fix the path\n");
  EXPECT_EQ(rc, 1);
  SetProcessRole("rank 1 of 2");
  EXPECT_EQ(ErrorLine(&rc),
            "tern-x (rank 1 of 2): error: data.train_src: no such file; fix the path\n");
  EXPECT_EQ(rc, 1);
  SetProcessRole("");
}

TEST(RunMainTest, AnythingElseIsABugWithExitCodeTwo) {
  ::testing::internal::CaptureStderr();
  const int rc = RunMain("tern-x", []() -> int { throw std::logic_error("index 3 of 2"); });
  EXPECT_EQ(::testing::internal::GetCapturedStderr(),
            "tern-x: internal error (please report): index 3 of 2\n");
  EXPECT_EQ(rc, 2);
}

}  // namespace
}  // namespace tern
