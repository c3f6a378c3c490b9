// Dropped pulls: gradient dropping's other direction. With distributed.drop_pulls, a shard's
// owner answers a sparse push with a sparse reply: of the shard's fresh values it sends only
// those furthest from what that worker already holds, and the worker keeps its older values
// for the rest. The owner keeps, per worker, a copy of what it has sent that worker (the
// worker's view of the shard), so the difference a reply leaves out is not lost: it stays in
// (fresh - view) and goes out once it has grown above the threshold, as a dropped gradient
// entry stays in the residual. The threshold is the drop rate's quantile of |fresh - view|,
// estimated from a sample as GradientDropper's. A dense reply (a dense push before the
// dropping's warm-up, or a pull-only round such as Flush's) brings the view up to date.
#pragma once

#include <cstdint>
#include <vector>

#include "ps/shard.h"

namespace tern::ps {

// The seed of rank `rank`'s pull dropper: a stream of its own, apart from every rank's gradient
// dropper (seed + rank). The real strategy and the virtual workers both take it from here.
inline uint64_t PullDropSeed(uint64_t seed, int rank) {
  return (seed + static_cast<uint64_t>(rank)) ^ 0x5DEECE66Dull;
}

class PullDropper {
 public:
  static constexpr int kSample = 4096;

  // shard_size: the shard's length; workers: how many views to keep; drop_rate in (0, 1).
  PullDropper(int64_t shard_size, int workers, float drop_rate, uint64_t seed);

  // values (shard_size): what every worker holds at the start.
  void Init(const float* values);

  // fresh (shard_size): the shard's values after the worker's push. Fills out with the entries
  // to send (positions ascending, the fresh values themselves, not differences) and records
  // them in the worker's view.
  void Select(int worker, const float* fresh, SparseGradient* out);

  // A dense reply of fresh (shard_size) to the worker: its view is the shard again.
  void Resync(int worker, const float* fresh);

  const std::vector<float>& view(int worker) const { return views_[worker]; }

 private:
  const int64_t size_;
  const float drop_rate_;
  const uint64_t seed_;
  uint64_t selects_ = 0;
  std::vector<std::vector<float>> views_;  // (workers, shard_size)
  std::vector<float> sample_;
};

}  // namespace tern::ps
