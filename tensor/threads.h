// Thread counts for compute: Tern's own kernels (common/thread_pool) and the BLAS together, so a
// rank uses exactly n threads. With several ranks on a host, give each cores / ranks.
#pragma once

namespace tern {

void SetComputeThreads(int n);
// The default: TERN_THREADS from the environment, else min(cores, 8).
int DefaultComputeThreads();

}  // namespace tern
