#include "common/thread_pool.h"

#include <algorithm>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace tern {
namespace {

thread_local bool in_parallel_region = false;

class Pool {
 public:
  explicit Pool(int threads) {
    for (int i = 1; i < threads; ++i) workers_.emplace_back([this, i] { Loop(i); });
  }
  ~Pool() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    start_cv_.notify_all();
    for (auto& t : workers_) t.join();
  }
  int size() const { return static_cast<int>(workers_.size()) + 1; }

  // Runs job(i) for i in [0, size()); i == 0 on the caller.
  void Run(const std::function<void(int)>& job) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      job_ = &job;
      pending_ = static_cast<int>(workers_.size());
      ++generation_;
    }
    start_cv_.notify_all();
    in_parallel_region = true;
    job(0);
    in_parallel_region = false;
    std::unique_lock<std::mutex> lock(mu_);
    done_cv_.wait(lock, [this] { return pending_ == 0; });
    job_ = nullptr;
  }

 private:
  void Loop(int index) {
    in_parallel_region = true;
    uint64_t seen = 0;
    for (;;) {
      const std::function<void(int)>* job;
      {
        std::unique_lock<std::mutex> lock(mu_);
        start_cv_.wait(lock, [&] { return stop_ || generation_ != seen; });
        if (stop_) return;
        seen = generation_;
        job = job_;
      }
      (*job)(index);
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (--pending_ == 0) done_cv_.notify_one();
      }
    }
  }

  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable start_cv_, done_cv_;
  const std::function<void(int)>* job_ = nullptr;  // GUARDED_BY(mu_)
  int pending_ = 0;                                // GUARDED_BY(mu_)
  uint64_t generation_ = 0;                        // GUARDED_BY(mu_)
  bool stop_ = false;                              // GUARDED_BY(mu_)
};

int DefaultThreads() {
  unsigned hw = std::thread::hardware_concurrency();
  return static_cast<int>(std::max(1u, std::min(hw, 8u)));
}

std::mutex pool_mu;
int num_threads = 0;         // GUARDED_BY(pool_mu); 0 = not yet chosen
std::unique_ptr<Pool> pool;  // GUARDED_BY(pool_mu)
std::mutex run_mu;           // one parallel region at a time

Pool* GetPool() {
  std::lock_guard<std::mutex> lock(pool_mu);
  if (num_threads == 0) num_threads = DefaultThreads();
  if (!pool || pool->size() != num_threads) {
    pool.reset();
    pool = std::make_unique<Pool>(num_threads);
  }
  return pool.get();
}

}  // namespace

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
