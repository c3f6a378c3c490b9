// Staleness statistics: how many versions of a shard a pushed gradient is behind (0 = it was
// computed on the version it updates). Bucket b counts pushes b behind; the last bucket
// collects everything at or beyond it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tern::ps {

class StalenessHistogram {
 public:
  static constexpr int kBuckets = 16;

  void Record(uint64_t versions_behind);
  void Merge(const StalenessHistogram& other);
  int64_t count(int bucket) const { return counts_[bucket]; }
  int64_t total() const;
  double mean() const;
  uint64_t max() const { return max_; }
  // The smallest b with at least q of the pushes at most b versions behind (q in [0, 1]); the last
  // bucket stands for kBuckets - 1 or more. 0 when empty.
  int Percentile(double q) const;
  // "n=120 mean=1.4 max=5 [0:40 1:50 2:20 ...]" for the training log.
  std::string ToString() const;

 private:
  std::vector<int64_t> counts_ = std::vector<int64_t>(kBuckets, 0);
  double sum_ = 0;
  uint64_t max_ = 0;
};

}  // namespace tern::ps
