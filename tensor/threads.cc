#include "tensor/threads.h"

#include <cblas.h>

#include <algorithm>
#include <cstdlib>
#include <thread>

#include "common/thread_pool.h"

namespace tern {

void SetComputeThreads(int n) {
  n = std::max(1, n);
  SetNumThreads(n);
  // The BLAS runs serially inside the pool's threads (see tensor/cpu/gemm.cc).
  openblas_set_num_threads(1);
}

int DefaultComputeThreads() {
  if (const char* env = std::getenv("TERN_THREADS")) {
    int n = std::atoi(env);
    if (n > 0) return n;
  }
  return static_cast<int>(std::clamp(std::thread::hardware_concurrency(), 1u, 8u));
}

}  // namespace tern
