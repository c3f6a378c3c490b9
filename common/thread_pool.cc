#include "common/thread_pool.h"

#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

namespace tern {
namespace {

thread_local bool in_parallel_region = false;

// Kernels call ParallelFor many times a step (dozens in a decoder step, each a few microseconds
// of work at small batches), so waking sleeping threads through a condition variable each time
// cost more than the work: two threads decoded one sentence at a time 3.5-4.6x slower than one
// thread (docs/benchmarks.md#thread-pool). Threads
// that finished a job spin for a while on the job counter before they sleep, and the caller spins
// (then yields) for the others to finish; a sleeping thread is woken through the condition
// variable, as before. The spin is bounded in time, so idle threads do not hold a core.
class Pool {
 public:
  explicit Pool(int threads) {
    for (int i = 1; i < threads; ++i) workers_.emplace_back([this, i] { Loop(i); });
  }
  ~Pool() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_.store(true);
    }
    start_cv_.notify_all();
    for (auto& t : workers_) t.join();
  }
  int size() const { return static_cast<int>(workers_.size()) + 1; }

  // Runs job(i) for i in [0, size()); i == 0 on the caller.
  void Run(const std::function<void(int)>& job) {
    job_ = &job;
    pending_.store(static_cast<int>(workers_.size()), std::memory_order_relaxed);
    generation_.fetch_add(1, std::memory_order_seq_cst);  // publishes job_ and pending_
    if (sleeping_.load(std::memory_order_seq_cst) > 0) {
      std::lock_guard<std::mutex> lock(mu_);  // a sleeper is in wait() or sees the generation
      start_cv_.notify_all();
    }
    in_parallel_region = true;
    job(0);
    in_parallel_region = false;
    for (int spins = 0; pending_.load(std::memory_order_acquire) != 0; ++spins) {
      if (spins < kCallerSpins) {
        CpuRelax();
      } else {
        std::this_thread::yield();
      }
    }
  }

 private:
  static constexpr int kCallerSpins = 256;
  static constexpr int kPauses = 256;
  static constexpr std::chrono::microseconds kWorkerSpin{50};

  static void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
  }

  void Loop(int index) {
    in_parallel_region = true;
    uint64_t seen = 0;
    for (;;) {
      // Spin a while for the next job, then sleep until one comes.
      uint64_t now = generation_.load(std::memory_order_acquire);
      if (now == seen) {
        const auto until = std::chrono::steady_clock::now() + kWorkerSpin;
        // Pauses first, then yields: a thread sharing its core with the caller (more threads
        // than cores) lets it run instead of burning the slice.
        for (int i = 0; (now = generation_.load(std::memory_order_acquire)) == seen; ++i) {
          if (i < kPauses) {
            CpuRelax();
          } else {
            std::this_thread::yield();
            if (std::chrono::steady_clock::now() > until) break;
          }
        }
      }
      if (now == seen) {
        std::unique_lock<std::mutex> lock(mu_);
        sleeping_.fetch_add(1, std::memory_order_seq_cst);
        start_cv_.wait(lock, [&] {
          return stop_.load() || generation_.load(std::memory_order_seq_cst) != seen;
        });
        sleeping_.fetch_sub(1, std::memory_order_relaxed);
        if (stop_.load()) return;
        now = generation_.load(std::memory_order_acquire);
      }
      seen = now;  // a new job: the pool is not being destroyed while one runs
      (*job_)(index);
      pending_.fetch_sub(1, std::memory_order_acq_rel);
    }
  }

  std::vector<std::thread> workers_;
  std::mutex mu_;  // for sleeping and waking only
  std::condition_variable start_cv_;
  const std::function<void(int)>* job_ = nullptr;  // written before generation_ moves
  std::atomic<int> pending_{0};                    // workers still in the current job
  std::atomic<uint64_t> generation_{0};            // jobs started
  std::atomic<int> sleeping_{0};                   // workers in start_cv_.wait
  std::atomic<bool> stop_{false};
};

int DefaultThreads() { return std::min(UsableCores(), 8); }

std::mutex pool_mu;
int num_threads = 0;  // GUARDED_BY(pool_mu); 0 = not yet chosen
// GUARDED_BY(pool_mu). Never destroyed at exit: joining its threads then could hang a process
// forked from a threaded one (a death test's child has no pool threads to join).
Pool* pool = nullptr;
std::mutex run_mu;  // one parallel region at a time

Pool* GetPool() {
  std::lock_guard<std::mutex> lock(pool_mu);
  if (num_threads == 0) num_threads = DefaultThreads();
  if (pool == nullptr || pool->size() != num_threads) {
    delete pool;
    pool = new Pool(num_threads);
  }
  return pool;
}

}  // namespace

int UsableCores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(1, CPU_COUNT(&set));
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

SerialRegion::SerialRegion() : was_(in_parallel_region) { in_parallel_region = true; }
SerialRegion::~SerialRegion() { in_parallel_region = was_; }

void SetNumThreads(int n) {
  std::lock_guard<std::mutex> lock(pool_mu);
  num_threads = std::max(1, n);
}

int NumThreads() {
  std::lock_guard<std::mutex> lock(pool_mu);
  return num_threads == 0 ? DefaultThreads() : num_threads;
}

void ParallelFor(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  int threads = NumThreads();
  if (in_parallel_region || threads == 1 || n < 2 * grain) {
    fn(0, n);
    return;
  }
  std::unique_lock<std::mutex> region(run_mu, std::try_to_lock);
  if (!region.owns_lock()) {  // another thread is in a region: do not wait, run serially
    fn(0, n);
    return;
  }
  Pool* p = GetPool();
  int chunks = static_cast<int>(std::min<int64_t>(p->size(), n / grain));
  int64_t step = (n + chunks - 1) / chunks;
  p->Run([&](int i) {
    if (i >= chunks) return;
    int64_t b = i * step, e = std::min(n, b + step);
    if (b < e) fn(b, e);
  });
}

}  // namespace tern
