// Stop signals (see stop_signal.h).
#include "common/stop_signal.h"

#include <signal.h>

#include <atomic>
#include <cerrno>
#include <cstring>

#include "common/error.h"

namespace tern {
namespace {

// Written by the handler: a lock-free atomic is async-signal-safe.
std::atomic<int> g_stop_signal{0};
static_assert(std::atomic<int>::is_always_lock_free);

extern "C" void RecordStopSignal(int signal) {
  int none = 0;
  g_stop_signal.compare_exchange_strong(none, signal);
}

}  // namespace

void CatchStopSignals(std::initializer_list<int> signals) {
  for (int s : signals) {
    struct sigaction action;
    std::memset(&action, 0, sizeof(action));
    action.sa_handler = RecordStopSignal;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESTART | SA_RESETHAND;  // a second one acts as if never caught
    if (sigaction(s, &action, nullptr) != 0)
      Fail("cannot catch ", SignalName(s), ": ", std::strerror(errno));
  }
}

int StopSignal() { return g_stop_signal.load(); }

std::string SignalName(int signal) {
  switch (signal) {
    case SIGTERM:
      return "SIGTERM";
    case SIGINT:
      return "SIGINT";
    case SIGUSR1:
      return "SIGUSR1";
    case SIGUSR2:
      return "SIGUSR2";
    case SIGHUP:
      return "SIGHUP";
    default:
      return "signal " + std::to_string(signal);
  }
}

}  // namespace tern
