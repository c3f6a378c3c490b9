// Dropped pulls (see pull_drop.h).
#include "ps/pull_drop.h"

#include <glog/logging.h>

#include <cstring>

#include "ps/grad_drop.h"

namespace tern::ps {

PullDropper::PullDropper(int64_t shard_size, int workers, float drop_rate, uint64_t seed)
    : size_(shard_size), drop_rate_(drop_rate), seed_(seed) {
  CHECK(drop_rate > 0 && drop_rate < 1) << drop_rate;
  CHECK_GE(workers, 1);
  CHECK_LT(shard_size, int64_t{1} << 31) << "sparse indices are int32";
  views_.assign(workers, std::vector<float>(shard_size, 0.f));
}

void PullDropper::Init(const float* values) {
  for (std::vector<float>& v : views_) std::memcpy(v.data(), values, size_ * sizeof(float));
}

void PullDropper::Select(int worker, const float* fresh, SparseGradient* out) {
  CHECK(worker >= 0 && worker < static_cast<int>(views_.size())) << worker;
  float* view = views_[worker].data();
  const float threshold = MagnitudeQuantile(
      size_, drop_rate_, seed_ + selects_ * 0x9E3779B97F4A7C15ull, kSample,
      [=](int64_t i) { return fresh[i] - view[i]; }, &sample_);
  ++selects_;
  out->indices.clear();
  out->values.clear();
  for (int64_t i = 0; i < size_; ++i) {
    const float d = fresh[i] - view[i];
    // An entry the worker holds exactly is never worth sending, even when the quantile is 0.
    if (d != 0.f && std::abs(d) >= threshold) {
      out->indices.push_back(static_cast<int32_t>(i));
      out->values.push_back(fresh[i]);
      view[i] = fresh[i];
    }
  }
}

void PullDropper::Resync(int worker, const float* fresh) {
  CHECK(worker >= 0 && worker < static_cast<int>(views_.size())) << worker;
  std::memcpy(views_[worker].data(), fresh, size_ * sizeof(float));
}

}  // namespace tern::ps
