// The shard map (see shard_map.h).
#include "ps/shard_map.h"

#include <glog/logging.h>

#include <algorithm>

namespace tern::ps {

ShardMap::ShardMap(int64_t num_params, int num_shards) : num_params_(num_params) {
  CHECK_GE(num_params, 0);
  CHECK_GE(num_shards, 1);
  // Split whole 64-byte blocks as evenly as possible; the partial last block goes to the end.
  const int64_t blocks = (num_params + kAlignFloats - 1) / kAlignFloats;
  ranges_.resize(num_shards);
  for (int s = 0; s < num_shards; ++s) {
    ranges_[s].begin = std::min(num_params, blocks * s / num_shards * kAlignFloats);
    ranges_[s].end = std::min(num_params, blocks * (s + 1) / num_shards * kAlignFloats);
  }
}

const ShardRange& ShardMap::range(int shard) const {
  CHECK(shard >= 0 && shard < num_shards()) << "shard " << shard;
  return ranges_[shard];
}

int ShardMap::shard_owner_of(int64_t param_index) const {
  CHECK(param_index >= 0 && param_index < num_params_) << "parameter " << param_index;
  auto it = std::upper_bound(ranges_.begin(), ranges_.end(), param_index,
                             [](int64_t i, const ShardRange& r) { return i < r.end; });
  return static_cast<int>(it - ranges_.begin());
}

std::vector<int64_t> ShardMap::counts() const {
  std::vector<int64_t> out;
  for (const ShardRange& r : ranges_) out.push_back(r.size());
  return out;
}

}  // namespace tern::ps
