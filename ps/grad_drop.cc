// Gradient dropping (see grad_drop.h).
#include "ps/grad_drop.h"

#include <glog/logging.h>

namespace tern::ps {

GradientDropper::GradientDropper(int64_t size, float drop_rate, uint64_t seed)
    : drop_rate_(drop_rate), residual_(size, 0.f), seed_(seed) {
  CHECK(drop_rate >= 0 && drop_rate < 1) << drop_rate;
  CHECK_LT(size, int64_t{1} << 31) << "sparse indices are int32";
}

void GradientDropper::Restore(const std::vector<float>& residual, uint64_t drops) {
  CHECK_EQ(residual.size(), residual_.size());
  residual_ = residual;
  drops_ = drops;
}

float GradientDropper::Threshold(const float* g, int64_t n) {
  // g here already includes the residual (the caller summed into residual_).
  return MagnitudeQuantile(
      n, drop_rate_, seed_ + drops_ * 0x9E3779B97F4A7C15ull, kSample,
      [g](int64_t i) { return g[i]; }, &sample_);
}

float GradientDropper::Drop(const Tensor& grad, const ShardMap& map,
                            std::vector<SparseGradient>* out) {
  const int64_t n = static_cast<int64_t>(residual_.size());
  CHECK_EQ(grad.numel(), n);
  CHECK_EQ(map.num_params(), n);
  const float* g = grad.f32();
  float* r = residual_.data();
  for (int64_t i = 0; i < n; ++i) r[i] += g[i];  // r now holds the full candidate gradient
  const float threshold = Threshold(r, n);
  ++drops_;
  out->assign(map.num_shards(), SparseGradient());
  int64_t sent = 0;
  for (int s = 0; s < map.num_shards(); ++s) {
    const ShardRange& range = map.range(s);
    SparseGradient& sg = (*out)[s];
    for (int64_t i = range.begin; i < range.end; ++i) {
      // Zeros are never worth sending, even when the quantile is 0.
      if (r[i] != 0.f && std::abs(r[i]) >= threshold) {
        sg.indices.push_back(static_cast<int32_t>(i - range.begin));
        sg.values.push_back(r[i]);
        r[i] = 0.f;
      }
    }
    sent += static_cast<int64_t>(sg.indices.size());
  }
  return n == 0 ? 0.f : static_cast<float>(sent) / static_cast<float>(n);
}

}  // namespace tern::ps
