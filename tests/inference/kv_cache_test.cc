// KvCache (inference/kv_cache.h) against a plain reference: every row's history kept as its own
// list of keys and values, reordered by copying whole lists.
#include "inference/kv_cache.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

namespace tern::inference {
namespace {

constexpr int kLayers = 2, kHeads = 2;
constexpr int64_t kDk = 3, kD = kHeads * kDk;

using History = std::vector<std::vector<float>>;  // per position, (kD) keys or values

std::vector<float> Reference(const History& keys, const History& values, const float* q) {
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

// Random beams over several batches: rows continue random parents (shared ones too), some rows
// start afresh (top-up), and the batch size changes between batches.
void RunRandomSteps(KvCache* cache, std::mt19937* rng, int batches) {
  std::normal_distribution<float> normal;
  for (int batch = 0; batch < batches; ++batch) {
    int64_t rows = 2 + (*rng)() % 6;
    cache->Clear(rows);
    // Per row and layer, the reference histories.
    std::vector<std::vector<History>> keys(rows, std::vector<History>(kLayers)), values = keys;
    for (int step = 0; step < 12; ++step) {
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
          const std::vector<float> want = Reference(keys[r][l], values[r][l], &q[r * kD]);
          for (int64_t j = 0; j < kD; ++j) {
            ASSERT_NEAR(out[r * kD + j], want[j], 1e-5)
                << "batch " << batch << " step " << step << " row " << r << " layer " << l;
          }
        }
      }
      cache->Advance();
    }
  }
}

TEST(KvCacheTest, AttendsOverEachRowsOwnHistory) {
  KvCache cache(kLayers, kHeads, kDk);
  std::mt19937 rng(7);
  RunRandomSteps(&cache, &rng, 6);
}

TEST(KvCacheTest, ShrinksOversizedBuffersBetweenBatches) {
  KvCache cache(kLayers, kHeads, kDk, /*shrink_bytes=*/1024);
  std::mt19937 rng(11);
  RunRandomSteps(&cache, &rng, 6);  // correct across shrinks
  cache.Clear(1);
  EXPECT_EQ(cache.slots(), 2);
}

// A batch no bigger than the last keeps the buffers: no shrink-and-regrow between batches.
TEST(KvCacheTest, ASimilarBatchKeepsItsBuffers) {
  KvCache cache(1, 1, 4, /*shrink_bytes=*/64);
  std::vector<float> x(6 * 4, 0.5f), out(6 * 4);
  for (int batch = 0; batch < 3; ++batch) {
    cache.Clear(6);
    cache.Reorder({0, 0, 0, 0, 0, 0}, {1, 1, 1, 1, 1, 1});
    for (int step = 0; step < 20; ++step) {
      if (step > 0) cache.Reorder({0, 1, 2, 3, 4, 5}, {0, 0, 0, 0, 0, 0});
      cache.AppendAndAttend(0, x.data(), x.data(), x.data(), out.data());
      cache.Advance();
    }
  }
  EXPECT_EQ(cache.slots(), 8);  // the first batch's: never cut to 6 and regrown
}

TEST(KvCacheTest, AnUnsharedBeamCopiesNothing) {
  KvCache cache(1, 1, 4);
  std::vector<float> x(3 * 4, 0.5f), out(3 * 4);
  cache.Clear(3);
  cache.Reorder({0, 0, 0}, {1, 1, 1});
  for (int step = 0; step < 5; ++step) {
    if (step > 0) cache.Reorder({2, 0, 1}, {0, 0, 0});  // a permutation: slots move, no copy
    cache.AppendAndAttend(0, x.data(), x.data(), x.data(), out.data());
    cache.Advance();
  }
  EXPECT_EQ(cache.copied_floats(), 0);
  cache.Reorder({1, 1, 0}, {0, 0, 0});  // row 1's history is now needed twice: one copy
  EXPECT_EQ(cache.copied_floats(), 2 * 5 * 4);
}

}  // namespace
}  // namespace tern::inference
