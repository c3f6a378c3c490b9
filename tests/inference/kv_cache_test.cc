// KvCache (inference/transformer/kv_cache.h) against a plain reference: every row's history kept as
// its own list of keys and values, reordered by copying whole lists.
#include "inference/transformer/kv_cache.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "tensor/cpu/attend_row.h"

namespace tern::inference {
namespace {

constexpr int kLayers = 2, kHeads = 2;

using History = std::vector<std::vector<float>>;  // per position, (kD) keys or values

template <int64_t kDk>
std::vector<float> Reference(const History& keys, const History& values, const float* q) {
  constexpr int64_t kD = kHeads * kDk;
  std::vector<float> out(kD, 0.f);
  const float scale = 1.f / std::sqrt(static_cast<float>(kDk));
  for (int h = 0; h < kHeads; ++h) {
    std::vector<double> w(keys.size());
    double best = -1e30, sum = 0;
    for (size_t t = 0; t < keys.size(); ++t) {
      double s = 0;
      for (int j = 0; j < kDk; ++j) s += q[h * kDk + j] * keys[t][h * kDk + j];
      w[t] = s * scale;
      best = std::max(best, w[t]);
    }
    for (double& x : w) sum += (x = std::exp(x - best));
    for (size_t t = 0; t < keys.size(); ++t)
      for (int j = 0; j < kDk; ++j) out[h * kDk + j] += w[t] / sum * values[t][h * kDk + j];
  }
  return out;
}

// AttendRow over a contiguous copy of each head's history: the cache must give these bits.
template <int64_t kDk>
std::vector<float> Contiguous(const History& keys, const History& values, const float* q) {
  constexpr int64_t kD = kHeads * kDk;
  std::vector<float> out(kD), k(keys.size() * kDk), v(keys.size() * kDk), scores(keys.size());
  const float scale = 1.f / std::sqrt(static_cast<float>(kDk));
  for (int h = 0; h < kHeads; ++h) {
    for (size_t t = 0; t < keys.size(); ++t) {
      std::copy_n(&keys[t][h * kDk], kDk, &k[t * kDk]);
      std::copy_n(&values[t][h * kDk], kDk, &v[t * kDk]);
    }
    cpu::AttendRow(q + h * kDk, k.data(), v.data(), nullptr, static_cast<int64_t>(keys.size()), kDk,
                   scale, scores.data(), &out[h * kDk]);
  }
  return out;
}

// Random beams over several batches: rows continue random parents (shared ones too), some rows
// start afresh (top-up), and the batch size changes between batches. Enough steps that the
// buffers fill and unreachable nodes are dropped.
// With dk a multiple of 8 (the vector loops only), each output must have AttendRow's bits; with
// other dk the scalar tails' products may be fused differently in the two callers' code, so
// there only the reference's tolerance applies.
template <int64_t kDk>
void RunRandomSteps(KvCache* cache, std::mt19937* rng, int batches, int steps = 12) {
  constexpr int64_t kD = kHeads * kDk;
  std::normal_distribution<float> normal;
  for (int batch = 0; batch < batches; ++batch) {
    int64_t rows = 2 + (*rng)() % 6;
    cache->Clear(rows);
    // Per row and layer, the reference histories.
    std::vector<std::vector<History>> keys(rows, std::vector<History>(kLayers)), values = keys;
    for (int step = 0; step < steps; ++step) {
      const int64_t prev_rows = step == 0 ? 0 : rows;
      if (step > 0 && (*rng)() % 3 == 0) rows = 1 + (*rng)() % 7;
      std::vector<int32_t> parents(rows);
      std::vector<uint8_t> fresh(rows);
      std::vector<std::vector<History>> next_keys(rows), next_values(rows);
      for (int64_t r = 0; r < rows; ++r) {
        fresh[r] = step == 0 || (*rng)() % 5 == 0;
        parents[r] = fresh[r] ? 0 : static_cast<int32_t>((*rng)() % prev_rows);
        next_keys[r] = fresh[r] ? std::vector<History>(kLayers) : keys[parents[r]];
        next_values[r] = fresh[r] ? std::vector<History>(kLayers) : values[parents[r]];
      }
      keys.swap(next_keys);
      values.swap(next_values);
      cache->Reorder(parents, fresh);
      for (int64_t r = 0; r < rows; ++r) {
        ASSERT_EQ(cache->length(r), static_cast<int64_t>(keys[r][0].size()));
      }
      for (int l = 0; l < kLayers; ++l) {
        std::vector<float> k(rows * kD), v(rows * kD), q(rows * kD), out(rows * kD);
        for (auto* x : {&k, &v, &q})
          for (float& f : *x) f = normal(*rng);
        cache->AppendAndAttend(l, k.data(), v.data(), q.data(), out.data());
        for (int64_t r = 0; r < rows; ++r) {
          keys[r][l].emplace_back(k.begin() + r * kD, k.begin() + (r + 1) * kD);
          values[r][l].emplace_back(v.begin() + r * kD, v.begin() + (r + 1) * kD);
          const std::vector<float> want = Reference<kDk>(keys[r][l], values[r][l], &q[r * kD]);
          const std::vector<float> bits = Contiguous<kDk>(keys[r][l], values[r][l], &q[r * kD]);
          for (int64_t j = 0; j < kD; ++j) {
            ASSERT_NEAR(out[r * kD + j], want[j], 1e-5)
                << "batch " << batch << " step " << step << " row " << r << " layer " << l;
            if (kDk % 8 == 0) {
              ASSERT_EQ(out[r * kD + j], bits[j]) << "step " << step << " row " << r;
            }
          }
        }
      }
      cache->Advance();
    }
  }
}

TEST(KvCacheTest, AttendsOverEachRowsOwnHistory) {
  KvCache cache(kLayers, kHeads, 3);
  std::mt19937 rng(7);
  RunRandomSteps<3>(&cache, &rng, 6);
}

TEST(KvCacheTest, GivesAttendRowsBitsForEachHistory) {
  KvCache cache(kLayers, kHeads, 16);
  std::mt19937 rng(5);
  RunRandomSteps<16>(&cache, &rng, 4, /*steps=*/40);
}

// 80 steps of up to 7 rows fill the first buffers (64 nodes, or 16 per row) many times over, so
// nodes are dropped and moved while histories are shared.
TEST(KvCacheTest, DropsUnreachableNodesWithoutChangingAHistory) {
  KvCache cache(kLayers, kHeads, 8);
  std::mt19937 rng(13);
  RunRandomSteps<8>(&cache, &rng, 3, /*steps=*/80);
  EXPECT_GT(cache.copied_floats(), 0);  // compaction ran
}

// Steps rows, each step every row continuing row 0: a beam whose hypotheses all fork from one.
// Returns the cache's capacity after `steps` steps.
int64_t RunForkingBeam(KvCache* cache, int rows, int steps) {
  std::vector<float> x(rows * 4, 0.5f), out(rows * 4);
  cache->Clear(rows);
  cache->Reorder(std::vector<int32_t>(rows, 0), std::vector<uint8_t>(rows, 1));
  for (int step = 0; step < steps; ++step) {
    if (step > 0) cache->Reorder(std::vector<int32_t>(rows, 0), std::vector<uint8_t>(rows, 0));
    cache->AppendAndAttend(0, x.data(), x.data(), x.data(), out.data());
    cache->Advance();
  }
  return cache->capacity();
}

// Forks share their prefix: nothing is copied until the buffers fill, and memory follows the
// live histories (one prefix plus a node per row), not the nodes ever appended (rows * steps).
TEST(KvCacheTest, ForksShareTheirPrefix) {
  KvCache cache(1, 1, 4);
  RunForkingBeam(&cache, 4, 12);  // 48 nodes: the first buffers hold 64
  EXPECT_EQ(cache.copied_floats(), 0);
  const int rows = 8, steps = 1000;
  const int64_t capacity = RunForkingBeam(&cache, rows, steps);
  EXPECT_LE(capacity, 4 * (steps + rows));
  EXPECT_LT(capacity, rows * steps / 2);
}

TEST(KvCacheTest, ShrinksOversizedBuffersBetweenBatches) {
  KvCache cache(kLayers, kHeads, 3, /*shrink_bytes=*/1024);
  std::mt19937 rng(11);
  RunRandomSteps<3>(&cache, &rng, 6);  // correct across shrinks
  KvCache big(1, 1, 4, /*shrink_bytes=*/1024);
  RunForkingBeam(&big, 8, 400);  // the buffers grow to hold its live nodes
  const int64_t grown = big.capacity();
  RunForkingBeam(&big, 1, 3);  // a small batch: the big one's buffers kept while it runs
  EXPECT_EQ(big.capacity(), grown);
  big.Clear(1);  // then cut to twice its peak, or the first allocation's 64 nodes
  EXPECT_EQ(big.capacity(), 64);
}

// A batch no bigger than the last keeps the buffers: no shrink-and-regrow between batches.
TEST(KvCacheTest, ASimilarBatchKeepsItsBuffers) {
  KvCache cache(1, 1, 4, /*shrink_bytes=*/64);
  std::vector<int64_t> capacities;
  for (int batch = 0; batch < 3; ++batch) capacities.push_back(RunForkingBeam(&cache, 6, 60));
  EXPECT_EQ(capacities[1], capacities[0]);
  EXPECT_EQ(capacities[2], capacities[0]);
}

}  // namespace
}  // namespace tern::inference
