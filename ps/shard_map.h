// The shard map: which rank owns which contiguous range of the flat parameter buffer. A pure
// function of (parameter count, shard count), so every rank computes the same map without
// talking, and a checkpoint can record it as two numbers.
#pragma once

#include <cstdint>
#include <vector>

namespace tern::ps {

struct ShardRange {
  int64_t begin = 0;
  int64_t end = 0;
  int64_t size() const { return end - begin; }
};

class ShardMap {
 public:
  // Boundaries fall on multiples of kAlignFloats (64 bytes) and shard sizes differ by at most
  // kAlignFloats; the last shard also takes the remainder of a count that is not a multiple.
  static constexpr int64_t kAlignFloats = 16;

  ShardMap(int64_t num_params, int num_shards);

  int64_t num_params() const { return num_params_; }
  int num_shards() const { return static_cast<int>(ranges_.size()); }
  const ShardRange& range(int shard) const;
  int shard_owner_of(int64_t param_index) const;
  // Shard sizes in rank order (for ReduceScatter/AllGather).
  std::vector<int64_t> counts() const;

 private:
  int64_t num_params_;
  std::vector<ShardRange> ranges_;
};

}  // namespace tern::ps
