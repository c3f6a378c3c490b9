// The prefetch thread and its bounded queue.
#include "data/prefetcher.h"

#include <glog/logging.h>

namespace tern::data {

Prefetcher::Prefetcher(std::unique_ptr<Batcher> batcher, int capacity)
    : capacity_(static_cast<size_t>(capacity)),
      batcher_(std::move(batcher)),
      consumed_(batcher_->state()),
      worker_([this] { Run(); }) {
  CHECK_GE(capacity, 1);
}

Prefetcher::~Prefetcher() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  changed_.notify_all();
  worker_.join();
}

void Prefetcher::Run() {
  try {
    for (;;) {
      {
        std::unique_lock<std::mutex> lock(mu_);
        changed_.wait(lock, [this] { return stop_ || queue_.size() < capacity_; });
        if (stop_) break;
      }
      // Prepared outside the lock: this is the slow part.
      Item item;
      if (!batcher_->Next(&item.batch)) break;
      item.after = batcher_->state();
      {
        std::lock_guard<std::mutex> lock(mu_);
        queue_.push_back(std::move(item));
      }
      changed_.notify_all();
    }
  } catch (...) {
    std::lock_guard<std::mutex> lock(mu_);
    error_ = std::current_exception();
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    done_ = true;
  }
  changed_.notify_all();
}

bool Prefetcher::Next(Batch* batch) {
  std::unique_lock<std::mutex> lock(mu_);
  if (queue_.empty() && !done_) ++waits_;
  changed_.wait(lock, [this] { return !queue_.empty() || done_; });
  if (queue_.empty()) {
    if (error_) std::rethrow_exception(error_);
    return false;
  }
  *batch = std::move(queue_.front().batch);
  consumed_ = queue_.front().after;
  queue_.pop_front();
  lock.unlock();
  changed_.notify_all();
  return true;
}

BatcherState Prefetcher::state() const {
  std::lock_guard<std::mutex> lock(mu_);
  return consumed_;
}

int64_t Prefetcher::waits() const {
  std::lock_guard<std::mutex> lock(mu_);
  return waits_;
}

}  // namespace tern::data
