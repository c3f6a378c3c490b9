// Top-up batching: finished sentences replaced by waiting ones must not change any hypothesis,
// with or without the other speed-ups, and the batch stays fuller than plain batching keeps it.
#include <gtest/gtest.h>

#include <numeric>

#include "hypotheses.h"
#include "inference/search/beam_search.h"
#include "inference/tables/shortlist.h"
#include "inference/transformer/transformer.h"
#include "inference/translator.h"
#include "tiny_model.h"

namespace tern::inference {
namespace {

const std::vector<std::vector<int32_t>> kSources = {{4, 4, 6, 10, 11, 13, 20, 3},
                                                    {5, 9, 12, 7, 3},
                                                    {6, 7, 8, 9, 3},
                                                    {17, 18, 3},
                                                    {8, 3},
                                                    {25, 3},
                                                    {11, 3},
                                                    {9, 9, 3},
                                                    {14, 15, 16, 3},
                                                    {21, 3}};

void ExpectSame(const std::vector<std::vector<Hypothesis>>& a,
                const std::vector<std::vector<Hypothesis>>& b, const std::string& what) {
  testing::ExpectSameHypotheses(a, b, what);
}

class TopUpVariants : public ::testing::TestWithParam<testing::TinyModelSpec> {};

TEST_P(TopUpVariants, SameHypothesesAsPlainBatching) {
  testing::TinyModel m = testing::MakeTinyModel(GetParam());
  Transformer model(m.config.model(), m.weights);
  std::vector<int32_t> all(model.vocab_size());
  std::iota(all.begin(), all.end(), 0);
  Shortlist list(model.vocab_size(), all, std::vector<std::vector<int32_t>>(model.vocab_size()));
  for (int beam : {1, 3}) {
    for (bool fused : {false, true}) {
      BeamSearchOptions options{.beam_size = beam, .n_best = beam, .fused_output = fused};
      BeamSearch plain(model, options);
      const auto expected = plain.Search(kSources);
      for (int capacity : {1, 2, 3, 4, 10, 20}) {
        BeamSearch top_up(model, options);
        ExpectSame(expected, top_up.SearchTopUp(kSources, capacity),
                   "beam " + std::to_string(beam) + " fused " + std::to_string(fused) +
                       " capacity " + std::to_string(capacity));
        EXPECT_GT(top_up.mean_occupancy(), 0.f);
        EXPECT_LE(top_up.mean_occupancy(), 1.f);
      }
      options.shortlist = &list;
      BeamSearch listed(model, options);
      ExpectSame(expected, listed.SearchTopUp(kSources, 4), "shortlist");
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Runtime, TopUpVariants,
    ::testing::Values(testing::TinyModelSpec{.eos_bias = 2.f},
                      testing::TinyModelSpec{.eos_bias = 2.5f, .emb_scale = 1.f},
                      testing::TinyModelSpec{
                          .tied = false, .pre_norm = true, .activation = "gelu", .eos_bias = 1.5f},
                      testing::TinyModelSpec{.pre_norm = true, .eos_bias = 2.f, .aan = true}),
    [](const ::testing::TestParamInfo<testing::TinyModelSpec>& info) {
      return std::string(info.param.pre_norm ? "PreNorm" : "PostNorm") + std::to_string(info.index);
    });

TEST(TopUpTest, KeepsTheBatchFullerThanPlainBatching) {
  testing::TinyModel m = testing::MakeTinyModel({.eos_bias = 2.f});
  Transformer model(m.config.model(), m.weights);
  BeamSearch plain(model, {.beam_size = 2}), top_up(model, {.beam_size = 2});
  // Plain batching of 4 at a time against top-up with room for 4.
  for (size_t b = 0; b < kSources.size(); b += 4) {
    plain.Search({kSources.begin() + b, kSources.begin() + std::min(b + 4, kSources.size())});
  }
  top_up.SearchTopUp(kSources, 4);
  EXPECT_GT(top_up.mean_occupancy(), plain.mean_occupancy());
}

class NumberCodec : public TextCodec {
 public:
  std::vector<int32_t> Encode(std::string_view text) const override {
    std::vector<int32_t> ids;
    for (char c : text) ids.push_back(4 + static_cast<unsigned char>(c) % 25);
    return ids;
  }
  std::string Decode(const std::vector<int32_t>& ids) const override {
    std::string text;
    for (int32_t id : ids) text += std::to_string(id) + " ";
    return text;
  }
};

TEST(TopUpTest, TranslatorGivesTheSameTranslations) {
  testing::TinyModel m = testing::MakeTinyModel({.eos_bias = 2.5f, .emb_scale = 1.f});
  const std::vector<std::string> lines = {
      "hello", "", "a much longer line", "abc", "xy", "another one", "q", "zzzz", "mnop", "rs"};
  TranslatorOptions plain_options;
  plain_options.search = {.beam_size = 3};
  plain_options.max_batch_tokens = 12;
  TranslatorOptions top_up_options = plain_options;
  top_up_options.top_up = true;
  Translator plain(m.config.model(), m.weights, std::make_unique<NumberCodec>(), plain_options);
  Translator top_up(m.config.model(), m.weights, std::make_unique<NumberCodec>(), top_up_options);
  const auto a = plain.Translate(lines), b = top_up.Translate(lines);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(a[i].size(), b[i].size());
    EXPECT_EQ(a[i][0].text, b[i][0].text) << "line " << i;
    EXPECT_NEAR(a[i][0].score, b[i][0].score, 1e-4);
  }
  EXPECT_GT(top_up.search().mean_occupancy(), 0.f);
}

}  // namespace
}  // namespace tern::inference
