// The fused output layer (bias + online softmax + top-k in one pass) against the unfused path:
// the same hypotheses, tokens and scores, on tiny random models; and restricted vocabularies.
#include "inference/search/output_layer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "inference/search/beam_search.h"
#include "inference/transformer/transformer.h"
#include "tiny_model.h"

namespace tern::inference {
namespace {

using testing::MakeTinyModel;
using testing::TinyModel;
using testing::TinyModelSpec;

const std::vector<std::vector<int32_t>> kSources = {
    {5, 9, 12, 7, 3}, {8, 3}, {4, 4, 6, 10, 11, 13, 20, 3}, {17, 18, 3}, {25, 3}, {6, 7, 8, 9, 3}};

TEST(FusedRowTopKTest, MatchesSortAndLogSumExp) {
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.f, 4.f);
  for (int n : {1, 2, 7, 100, 1000}) {
    for (int k : {1, 3, 8}) {
      std::vector<float> logits(n), bias(n);
      for (float& x : logits) x = normal(rng);
      for (float& x : bias) x = normal(rng);
      const int32_t excluded[2] = {0, n > 2 ? 2 : -1};
      std::vector<ColumnScore> top;
      const float lse = FusedRowTopK(logits.data(), bias.data(), n, excluded, k, true, &top);
      double max = -1e30, sum = 0;
      std::vector<int32_t> order;
      for (int c = 0; c < n; ++c) max = std::max<double>(max, logits[c] + bias[c]);
      for (int c = 0; c < n; ++c) {
        sum += std::exp(logits[c] + bias[c] - max);
        if (c != excluded[0] && c != excluded[1]) order.push_back(c);
      }
      EXPECT_NEAR(lse, max + std::log(sum), 1e-4) << "n " << n;
      std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
        return logits[a] + bias[a] > logits[b] + bias[b];
      });
      order.resize(std::min<size_t>(order.size(), k));
      ASSERT_EQ(top.size(), order.size());
      for (size_t i = 0; i < order.size(); ++i) {
        EXPECT_EQ(top[i].column, order[i]) << "n " << n << " k " << k << " rank " << i;
        EXPECT_EQ(top[i].logit, logits[order[i]] + bias[order[i]]);
      }
      std::vector<ColumnScore> argmax;
      EXPECT_EQ(FusedRowTopK(logits.data(), bias.data(), n, excluded, k, false, &argmax), 0.f);
      ASSERT_EQ(argmax.size(), top.size());
      for (size_t i = 0; i < top.size(); ++i) EXPECT_EQ(argmax[i].column, top[i].column);
    }
  }
}

// Whole-number logits (many ties) over a vocabulary-sized row without a bias: ties keep the
// lower column first, and a column equal to the k-th is not kept in its place.
TEST(FusedRowTopKTest, TiesAndNoBiasKeepTheColumnOrder) {
  std::mt19937 rng(11);
  std::uniform_int_distribution<int> small(-20, 6);
  for (int n : {8003, 64, 33}) {
    std::vector<float> logits(n);
    for (float& x : logits) x = static_cast<float>(small(rng));
    for (int k : {1, 4, 12}) {
      const int32_t excluded[2] = {1, 5};
      std::vector<ColumnScore> top;
      FusedRowTopK(logits.data(), nullptr, n, excluded, k, false, &top);
      std::vector<int32_t> order;
      for (int c = 0; c < n; ++c) {
        if (c != excluded[0] && c != excluded[1]) order.push_back(c);
      }
      std::stable_sort(order.begin(), order.end(),
                       [&](int32_t a, int32_t b) { return logits[a] > logits[b]; });
      order.resize(std::min<size_t>(order.size(), k));
      ASSERT_EQ(top.size(), order.size());
      for (size_t i = 0; i < order.size(); ++i) {
        EXPECT_EQ(top[i].column, order[i]) << "n " << n << " k " << k << " rank " << i;
      }
    }
  }
}

void ExpectSameHypotheses(const std::vector<std::vector<Hypothesis>>& a,
                          const std::vector<std::vector<Hypothesis>>& b, bool scores) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(a[i].size(), b[i].size()) << "sentence " << i;
    for (size_t j = 0; j < a[i].size(); ++j) {
      EXPECT_EQ(a[i][j].tokens, b[i][j].tokens) << "sentence " << i << " hyp " << j;
      EXPECT_EQ(a[i][j].ended_with_eos, b[i][j].ended_with_eos);
      if (scores) {
        EXPECT_NEAR(a[i][j].score, b[i][j].score, 1e-4) << "sentence " << i << " hyp " << j;
        EXPECT_NEAR(a[i][j].normalized_score, b[i][j].normalized_score, 1e-4);
      }
    }
  }
}

class FusedOutputVariants : public ::testing::TestWithParam<TinyModelSpec> {};

TEST_P(FusedOutputVariants, FusedGivesTheUnfusedHypotheses) {
  TinyModel m = MakeTinyModel(GetParam());
  Transformer model(m.config.model(), m.weights);
  for (int beam : {1, 2, 4}) {
    BeamSearch plain(model, {.beam_size = beam, .n_best = beam});
    BeamSearch fused(model, {.beam_size = beam, .n_best = beam, .fused_output = true});
    ExpectSameHypotheses(plain.Search(kSources), fused.Search(kSources), /*scores=*/true);
  }
  // Beam 1 without scores: the argmax alone, no softmax; the same tokens.
  BeamSearch plain(model, {.beam_size = 1});
  BeamSearch argmax(model, {.beam_size = 1, .fused_output = true, .need_scores = false});
  ExpectSameHypotheses(plain.Search(kSources), argmax.Search(kSources), /*scores=*/false);
}

INSTANTIATE_TEST_SUITE_P(
    Runtime, FusedOutputVariants,
    ::testing::Values(TinyModelSpec{.eos_bias = 2.f},
                      TinyModelSpec{.eos_bias = 2.5f, .emb_scale = 1.f},
                      TinyModelSpec{
                          .tied = false, .pre_norm = true, .activation = "gelu", .eos_bias = 1.5f}),
    [](const ::testing::TestParamInfo<TinyModelSpec>& info) {
      return std::string(info.param.pre_norm ? "PreNorm" : "PostNorm") + std::to_string(info.index);
    });

TEST(OutputLayerTest, RestrictingToTheWholeVocabularyChangesNothing) {
  TinyModel m = MakeTinyModel({.eos_bias = 2.f});
  Transformer model(m.config.model(), m.weights);
  OutputLayer full(model), restricted(model);
  std::vector<int32_t> all(model.vocab_size());
  std::iota(all.begin(), all.end(), 0);
  std::reverse(all.begin(), all.end());
  restricted.Restrict({7, 5, 5});
  EXPECT_EQ(restricted.columns(), 4);  // pad, bos, 5, 7
  EXPECT_EQ(restricted.token(restricted.excluded_columns()[0]), kPadId);
  EXPECT_EQ(restricted.token(restricted.excluded_columns()[1]), kBosId);
  restricted.Restrict(all);
  EXPECT_EQ(restricted.columns(), model.vocab_size());
  Tensor x = Tensor::FromVector({2, model.dim()}, std::vector<float>(2 * model.dim(), 0.3f));
  x.f32()[1] = -1.f;
  Arena arena;
  Tensor a = full.Logits(x, true, arena), b = restricted.Logits(x, true, arena);
  for (int64_t r = 0; r < 2; ++r) {
    for (int64_t c = 0; c < restricted.columns(); ++c) {
      const int32_t token = restricted.token(c);
      EXPECT_FLOAT_EQ(b.at(r * b.dim(1) + c), a.at(r * a.dim(1) + token));
    }
  }
}

// With an integer output layer the logits come from the integer product (so they differ from the
// float ones a little), and a restricted column has exactly the bits of the same token's
// unrestricted logit, restriction after restriction (the packed columns are regathered in place).
TEST(OutputLayerTest, IntegerOutputLayerRestrictsToTheSameBits) {
  TinyModel m = MakeTinyModel({.eos_bias = 2.f});
  Transformer float_model(m.config.model(), m.weights);
  LinearOptions options;
  options.quantize = cpu::IntType::kInt16;
  options.integer_output_layer = true;
  Transformer model(m.config.model(), m.weights, options);
  ASSERT_NE(model.integer_output(), nullptr);
  EXPECT_EQ(float_model.integer_output(), nullptr);
  std::mt19937 rng(3);
  std::normal_distribution<float> dist(0.f, 1.f);
  std::vector<float> values(3 * model.dim());
  for (float& v : values) v = dist(rng);
  Tensor x = Tensor::FromVector({3, model.dim()}, values);
  Arena arena;
  OutputLayer full(model), restricted(model), float_full(float_model);
  Tensor a = full.Logits(x, true, arena), f = float_full.Logits(x, true, arena);
  double diff = 0.0;
  for (int64_t i = 0; i < a.numel(); ++i)
    diff = std::max(diff, double(std::fabs(a.at(i) - f.at(i))));
  EXPECT_GT(diff, 0.0);
  EXPECT_LT(diff, 1e-2);
  std::vector<int32_t> wide(model.vocab_size() - 3);
  std::iota(wide.begin(), wide.end(), 3);
  for (const std::vector<int32_t>& ids : {wide, std::vector<int32_t>{7, 5, 5, 12}}) {
    restricted.Restrict(ids);
    for (bool with_bias : {true, false}) {
      Tensor b = restricted.Logits(x, with_bias, arena);
      for (int64_t r = 0; r < 3; ++r) {
        for (int64_t c = 0; c < restricted.columns(); ++c) {
          const int32_t token = restricted.token(c);
          const float want =
              a.at(r * a.dim(1) + token) - (with_bias ? 0.f : model.output_bias().at(token));
          if (with_bias) {
            ASSERT_EQ(b.at(r * b.dim(1) + c), want) << "row " << r << " token " << token;
          } else {
            ASSERT_NEAR(b.at(r * b.dim(1) + c), want, 1e-5) << "row " << r << " token " << token;
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace tern::inference
