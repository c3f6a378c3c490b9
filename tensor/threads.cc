#include "tensor/threads.h"

#include <cblas.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "common/error.h"
#include "common/thread_pool.h"

// OpenBLAS's own; weak, so another BLAS links too (and leaves the kernels alone).
extern "C" char* openblas_get_corename(void) __attribute__((weak));

namespace tern {

void CheckComputeThreads(const std::string& what, int64_t n) {
  if (n < 0 || n > kMaxComputeThreads) {
    Fail(what, " must be between 0 (the default) and ", kMaxComputeThreads, ", not ", n,
         "; this process may use ", UsableCores(), " cores");
  }
}

void SetComputeThreads(int n) {
  CHECK_LE(n, kMaxComputeThreads) << "compute threads";
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
  return std::clamp(UsableCores(), 1, 8);  // a rank bound to one core gets one thread
}

std::string BlasCoreName() {
  if (openblas_get_corename == nullptr) return "";
  const char* name = openblas_get_corename();
  return name ? name : "";
}

std::string BetterBlasCore(const std::string& chosen, bool avx2_fma, bool avx512) {
  // The vector level of OpenBLAS's x86-64 cores: 3 AVX-512, 2 AVX2 + FMA, 1 older.
  static constexpr std::pair<const char*, int> kLevels[] = {
      {"SkylakeX", 3},  {"Cooperlake", 3}, {"SapphireRapids", 3}, {"Haswell", 2},
      {"Zen", 2},       {"Excavator", 2},  {"Prescott", 1},       {"Core2", 1},
      {"Penryn", 1},    {"Dunnington", 1}, {"Nehalem", 1},        {"Sandybridge", 1},
      {"Atom", 1},      {"Nano", 1},       {"Barcelona", 1},      {"Bobcat", 1},
      {"Bulldozer", 1}, {"Piledriver", 1}, {"Steamroller", 1},    {"Opteron", 1},
  };
  int level = 0;
  for (const auto& [name, l] : kLevels) {
    if (chosen == name) level = l;
  }
  const int cpu = avx512 ? 3 : avx2_fma ? 2 : 1;
  if (level == 0 || level >= cpu) return "";
  return cpu == 3 ? "SkylakeX" : "Haswell";
}

void UseTheCpusBlasKernels(char** argv) {
#if defined(__x86_64__)
  if (std::getenv("OPENBLAS_CORETYPE") != nullptr) return;
  __builtin_cpu_init();
  const bool avx2_fma = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                      __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
  const std::string chosen = BlasCoreName();
  const std::string better = BetterBlasCore(chosen, avx2_fma, avx512);
  if (better.empty()) return;
  setenv("OPENBLAS_CORETYPE", better.c_str(), 1);
  // The executable's own path, not /proc/self/exe: the process keeps its name (ps, pgrep).
  char path[4096];
  const ssize_t length = readlink("/proc/self/exe", path, sizeof(path) - 1);
  if (length > 0) {
    path[length] = '\0';
    execv(path, argv);
  }
  std::fprintf(
      stderr,
      "warning: OpenBLAS runs its %s kernels on this CPU, and restarting with "
      "OPENBLAS_CORETYPE=%s failed (%s); set OPENBLAS_CORETYPE=%s for its faster kernels\n",
      chosen.c_str(), better.c_str(), std::strerror(errno), better.c_str());
  unsetenv("OPENBLAS_CORETYPE");
#else
  (void)argv;
#endif
}

}  // namespace tern
