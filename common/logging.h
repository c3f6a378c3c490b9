// Logging set-up for programs: glog to stderr (rank-specific lines say their rank themselves).
#pragma once

namespace tern {

// Call once at the top of main.
void InitLogging(const char* argv0);

}  // namespace tern
