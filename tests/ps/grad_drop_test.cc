// Gradient dropping: exact conservation (sent + residual == input), the kept fraction, and
// that held-back mass is sent later.
#include "ps/grad_drop.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "tests/ps/test_vectors.h"

namespace tern::ps {
namespace {

std::vector<float> Gradient(int64_t n, uint32_t seed) { return testing::RandomVector(n, seed); }

TEST(GradDropTest, SentPlusResidualEqualsInputExactly) {
  const int64_t n = 50000;
  ShardMap map(n, 3);
  GradientDropper dropper(n, 0.99f, 7);
  std::vector<float> g = Gradient(n, 1);
  std::vector<SparseGradient> sent;
  const float fraction = dropper.Drop(Tensor(g.data(), Shape{n}), map, &sent);
  std::vector<float> rebuilt = dropper.residual();
  int64_t count = 0;
  for (int s = 0; s < 3; ++s) {
    for (size_t k = 0; k < sent[s].indices.size(); ++k) {
      const int64_t i = map.range(s).begin + sent[s].indices[k];
      EXPECT_EQ(rebuilt[i], 0.f) << "an entry both sent and kept";
      rebuilt[i] = sent[s].values[k];
      if (k > 0) {
        EXPECT_LT(sent[s].indices[k - 1], sent[s].indices[k]);
      }
    }
    count += sent[s].indices.size();
  }
  EXPECT_EQ(rebuilt, g);
  EXPECT_FLOAT_EQ(fraction, static_cast<float>(count) / n);
  // The quantile comes from a sample: about 1% kept.
  EXPECT_GT(fraction, 0.005f);
  EXPECT_LT(fraction, 0.02f);
}

TEST(GradDropTest, ResidualIsAddedToTheNextGradient) {
  const int64_t n = 1000;
  ShardMap map(n, 1);
  GradientDropper dropper(n, 0.9f, 3);
  std::vector<float> g1 = Gradient(n, 2), g2 = Gradient(n, 3);
  std::vector<SparseGradient> sent1, sent2;
  dropper.Drop(Tensor(g1.data(), Shape{n}), map, &sent1);
  const std::vector<float> r1 = dropper.residual();
  dropper.Drop(Tensor(g2.data(), Shape{n}), map, &sent2);
  // Per entry: sent2 + residual2 == g2 + r1 (computed the same way, so exact).
  std::vector<float> rebuilt = dropper.residual();
  for (size_t k = 0; k < sent2[0].indices.size(); ++k) {
    rebuilt[sent2[0].indices[k]] = sent2[0].values[k];
  }
  for (int64_t i = 0; i < n; ++i) EXPECT_EQ(rebuilt[i], g2[i] + r1[i]) << i;
}

TEST(GradDropTest, ZerosAreNeverSent) {
  ShardMap map(100, 2);
  GradientDropper dropper(100, 0.5f, 1);
  std::vector<float> g(100, 0.f);
  g[3] = 1.f;
  std::vector<SparseGradient> sent;
  EXPECT_FLOAT_EQ(dropper.Drop(Tensor(g.data(), Shape{100}), map, &sent), 0.01f);
  EXPECT_EQ(sent[0].indices, std::vector<int32_t>{3});
}

}  // namespace
}  // namespace tern::ps
