// Thread counts for compute: Tern's own kernels (common/thread_pool) and the BLAS together, so a
// rank uses exactly n threads. With several ranks on a host, give each cores / ranks.
// Also the BLAS's kernels for this CPU (UseTheCpusBlasKernels).
#pragma once

#include <cstdint>
#include <string>

namespace tern {

// More compute threads than this is a typo: starting them would take the machine's memory before
// any work began. (configs/config_io.h's kMaxComputeThreads, for training.threads, is the same.)
inline constexpr int kMaxComputeThreads = 1024;

// tern::Error naming `what` (a flag or config field) unless 0 <= n <= kMaxComputeThreads.
void CheckComputeThreads(const std::string& what, int64_t n);
// REQUIRES: n <= kMaxComputeThreads.
void SetComputeThreads(int n);
// The default: TERN_THREADS from the environment, else min(the cores this process may run on,
// 8).
int DefaultComputeThreads();

// OpenBLAS picks its kernels from the CPU model once, when it loads; a model its version does not
// know gets a generic SSE3 core ("Prescott": Debian 12's 0.3.21 on an Emerald Rapids Xeon, where
// sgemm then runs at a fifth of its AVX-512 kernel's speed). Call first thing in main: when the
// core OpenBLAS chose lacks vector units this CPU has, this sets OPENBLAS_CORETYPE to the core
// that has them (SkylakeX for AVX-512, Haswell for AVX2 + FMA) and executes the program again,
// arguments and environment unchanged otherwise. Does nothing when OPENBLAS_CORETYPE is set (the
// user's choice, or the second run), with another BLAS, or when the exec fails (then the BLAS
// stays as it is, with a warning on stderr).
void UseTheCpusBlasKernels(char** argv);
// The OpenBLAS core to ask for instead of `chosen` on a CPU with the given vector units, or ""
// to keep it (chosen already uses them, or is a name this does not rank).
std::string BetterBlasCore(const std::string& chosen, bool avx2_fma, bool avx512);
// OpenBLAS's core name ("Haswell", "SkylakeX", ...), or "" with another BLAS.
std::string BlasCoreName();

}  // namespace tern
