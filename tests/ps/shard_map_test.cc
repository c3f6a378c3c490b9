// The shard map: contiguous, 64-byte aligned, balanced, and a pure function of (n, N).
#include "ps/shard_map.h"

#include <gtest/gtest.h>

namespace tern::ps {
namespace {

TEST(ShardMapTest, ContiguousAlignedBalancedForManySizes) {
  for (int64_t n : {0L, 1L, 15L, 16L, 17L, 1000L, 65536L, 1234567L}) {
    for (int shards : {1, 2, 3, 4, 7, 16}) {
      ShardMap map(n, shards);
      ASSERT_EQ(map.num_shards(), shards);
      int64_t expected_begin = 0, min_size = n, max_size = 0;
      for (int s = 0; s < shards; ++s) {
        const ShardRange& r = map.range(s);
        EXPECT_EQ(r.begin, expected_begin) << n << "/" << shards;
        EXPECT_LE(r.begin, r.end);
        if (r.begin < n) {
          EXPECT_EQ(r.begin % ShardMap::kAlignFloats, 0);
        }
        expected_begin = r.end;
        min_size = std::min(min_size, r.size());
        max_size = std::max(max_size, r.size());
      }
      EXPECT_EQ(expected_begin, n);
      EXPECT_LE(max_size - min_size, ShardMap::kAlignFloats) << n << "/" << shards;
    }
  }
}

TEST(ShardMapTest, OwnerOfEveryIndex) {
  ShardMap map(1000, 3);
  for (int64_t i = 0; i < 1000; ++i) {
    const int owner = map.shard_owner_of(i);
    EXPECT_GE(i, map.range(owner).begin);
    EXPECT_LT(i, map.range(owner).end);
  }
}

TEST(ShardMapTest, PureFunctionOfCountAndShards) {
  ShardMap a(987654, 5), b(987654, 5);
  EXPECT_EQ(a.counts(), b.counts());
  EXPECT_EQ(ShardMap(100, 1).counts(), std::vector<int64_t>{100});
}

}  // namespace
}  // namespace tern::ps
