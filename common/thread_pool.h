// A small persistent thread pool for data-parallel kernels. Work is split into at most
// NumThreads() contiguous chunks; the caller runs the first chunk itself. Nested ParallelFor
// calls from inside a worker run serially (no oversubscription).
#pragma once

#include <cstdint>
#include <functional>

namespace tern {

// Sets the number of threads kernels may use (including the caller). Call before first use or
// between parallel regions. Ranks × threads should not exceed the machine's cores.
void SetNumThreads(int n);
int NumThreads();

// The cores this process may run on (its CPU affinity: taskset, mpirun --bind-to, a cgroup's
// cpuset), at least 1; the machine's cores when the affinity cannot be read.
int UsableCores();

// Calls fn(begin, end) over [0, n) in chunks; runs serially when n < 2 * grain.
void ParallelFor(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

// While one lives, ParallelFor calls from this thread run serially on it: for threads that each
// do a whole piece of work of their own (the runtime's CPU workers, one batch each).
class SerialRegion {
 public:
  SerialRegion();
  ~SerialRegion();
  SerialRegion(const SerialRegion&) = delete;
  SerialRegion& operator=(const SerialRegion&) = delete;

 private:
  bool was_;
};

}  // namespace tern
