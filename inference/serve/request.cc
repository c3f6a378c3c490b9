#include "inference/serve/request.h"

#include <utility>

namespace tern::inference::serve {

Request::Request(std::shared_ptr<const LoadedModel> model,
                 std::vector<std::vector<int32_t>> sources, int beam, int n_best,
                 std::shared_ptr<std::atomic<uint64_t>> cancels)
    : model_(std::move(model)),
      sources_(std::move(sources)),
      beam_(beam),
      n_best_(n_best),
      cancels_(std::move(cancels)),
      left_(0),
      hypotheses_(sources_.size()) {
  for (const auto& s : sources_) left_ += s.empty() ? 0 : 1;
}

bool Request::WaitUntil(Clock::time_point until) {
  std::unique_lock<std::mutex> lock(mutex_);
  return answered_.wait_until(lock, until,
                              [&] { return left_ == 0 || cancelled() != Cancelled::kNo; });
}

void Request::Cancel(Cancelled why) {
  std::lock_guard<std::mutex> lock(mutex_);
  Cancelled none = Cancelled::kNo;
  if (cancelled_.compare_exchange_strong(none, why, std::memory_order_acq_rel) && cancels_) {
    cancels_->fetch_add(1, std::memory_order_release);
  }
  answered_.notify_all();
}

void Request::Answer(size_t index, std::vector<Hypothesis> hypotheses) {
  std::lock_guard<std::mutex> lock(mutex_);
  CHECK(index < hypotheses_.size() && left_ > 0);
  if (static_cast<int>(hypotheses.size()) > n_best_) hypotheses.resize(n_best_);
  hypotheses_[index] = std::move(hypotheses);
  if (--left_ == 0) answered_.notify_all();
}

bool Request::answered() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return left_ == 0;
}

}  // namespace tern::inference::serve
