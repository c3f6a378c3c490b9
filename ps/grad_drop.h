// Gradient dropping (Aji & Heafield 2017): before a push, add the residual left from earlier
// pushes, send only the entries whose magnitude is above the drop-rate quantile of |g|, and
// keep the rest as the new residual. The quantile is estimated from a fixed-size sample.
// Every entry goes wholly to the message or to the residual, so sent + residual equals the
// input plus the old residual exactly.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "ps/shard.h"
#include "ps/shard_map.h"
#include "tensor/tensor.h"

namespace tern::ps {

// The `rate` quantile of |value(i)| over i in [0, n): exact when n <= sample_size, else
// estimated from sample_size draws of i from a generator seeded with `seed`. sample: scratch.
template <typename ValueAt>
float MagnitudeQuantile(int64_t n, float rate, uint64_t seed, int sample_size, ValueAt value,
                        std::vector<float>* sample) {
  sample->clear();
  if (n <= sample_size) {
    for (int64_t i = 0; i < n; ++i) sample->push_back(std::abs(value(i)));
  } else {
    std::mt19937_64 rng(seed);
    std::uniform_int_distribution<int64_t> pick(0, n - 1);
    for (int k = 0; k < sample_size; ++k) sample->push_back(std::abs(value(pick(rng))));
  }
  if (sample->empty()) return 0.f;
  const size_t q =
      std::min(sample->size() - 1, static_cast<size_t>(std::floor(rate * sample->size())));
  std::nth_element(sample->begin(), sample->begin() + q, sample->end());
  return (*sample)[q];
}

class GradientDropper {
 public:
  static constexpr int kSample = 4096;

  // drop_rate in [0, 1): the fraction of entries to keep back. size: the flat gradient's length.
  GradientDropper(int64_t size, float drop_rate, uint64_t seed);

  // grad (n) is the accumulated gradient (left unchanged). Fills out[s] with shard s's kept
  // entries (indices relative to the shard's begin) and returns the fraction of entries sent.
  float Drop(const Tensor& grad, const ShardMap& map, std::vector<SparseGradient>* out);

  // (n): what was held back so far, and how many Drop calls made it (the sample of call k is
  // drawn from seed and k, so a checkpoint that saves both resumes the same sequence).
  const std::vector<float>& residual() const { return residual_; }
  uint64_t drops() const { return drops_; }
  void Restore(const std::vector<float>& residual, uint64_t drops);

 private:
  float Threshold(const float* g, int64_t n);

  float drop_rate_;
  std::vector<float> residual_;  // (n)
  std::vector<float> sample_;
  uint64_t seed_;
  uint64_t drops_ = 0;
};

}  // namespace tern::ps
