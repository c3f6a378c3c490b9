// Stopping a long job cleanly on a signal. A cluster's scheduler warns a job before its time runs
// out by sending it a signal (Slurm's `--signal`); the job should then save its state and exit,
// so the next job resumes where this one stopped. The handlers only record which signal came
// (all a signal handler may safely do); the work loop asks StopSignal() at a point where
// stopping is safe. The handlers take effect once: the same signal a second time has its
// default effect (it terminates the process), for when a user wants the job gone at once.
#pragma once

#include <initializer_list>
#include <string>

namespace tern {

// Installs the recording handler for each of `signals` (once each; SA_RESTART, so no system call
// in another thread fails with EINTR because of it).
void CatchStopSignals(std::initializer_list<int> signals);

// The first of the caught signals that has arrived, or 0.
int StopSignal();

// "SIGTERM", "SIGUSR1", ... ("signal 42" for a number without a name here).
std::string SignalName(int signal);

// Exit status of a program that stopped early on a stop signal, its state saved: EX_TEMPFAIL
// (sysexits.h), "try again later": running the same command again resumes the job.
inline constexpr int kExitStoppedBySignal = 75;

}  // namespace tern
