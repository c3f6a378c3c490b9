// Gradient dropping (Aji & Heafield 2017): before a push, add the residual left from earlier
// pushes, send only the entries whose magnitude is above the drop-rate quantile of |g|, and
// keep the rest as the new residual. The quantile is estimated from a fixed-size sample.
// Every entry goes wholly to the message or to the residual, so sent + residual equals the
// input plus the old residual exactly.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ps/shard.h"
#include "ps/shard_map.h"
#include "tensor/tensor.h"

namespace tern::ps {

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
