// Stop signals: the handler records the first caught signal and the process goes on; the same
// signal a second time has its default effect. Each case runs in a child process (a death
// test), since handlers and the recorded signal belong to the whole process.
#include "common/stop_signal.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <cstdlib>

namespace tern {
namespace {

TEST(StopSignalTest, RecordsTheFirstCaughtSignalAndGoesOn) {
  EXPECT_EXIT(
      {
        if (StopSignal() != 0) std::exit(1);
        CatchStopSignals({SIGTERM, SIGUSR1});
        raise(SIGUSR1);
        raise(SIGTERM);
        std::exit(StopSignal() == SIGUSR1 ? 0 : 2);
      },
      testing::ExitedWithCode(0), "");
}

TEST(StopSignalTest, TheSameSignalAgainTerminates) {
  EXPECT_EXIT(
      {
        CatchStopSignals({SIGTERM});
        raise(SIGTERM);
        if (StopSignal() != SIGTERM) std::exit(2);
        raise(SIGTERM);
        std::exit(3);
      },
      testing::KilledBySignal(SIGTERM), "");
}

TEST(StopSignalTest, NamesSignals) {
  EXPECT_EQ(SignalName(SIGTERM), "SIGTERM");
  EXPECT_EQ(SignalName(SIGUSR1), "SIGUSR1");
  EXPECT_EQ(SignalName(42), "signal 42");
}

}  // namespace
}  // namespace tern
