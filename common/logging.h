// Logging set-up for programs: glog to stderr, with the MPI rank in each line when there is one.
#pragma once

namespace tern {

// Call once at the top of main. `rank` < 0 means not a distributed job.
void InitLogging(const char* argv0, int rank = -1);

}  // namespace tern
