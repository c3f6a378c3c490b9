// The lexical shortlist: IBM Model 1 finds a planted word-for-word translation, the selection is
// the union of frequent tokens and translations, it survives the model file, bad tables are
// refused, and a shortlist holding every token gives the unrestricted search's hypotheses.
#include "inference/tables/shortlist.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <functional>
#include <numeric>
#include <random>

#include "common/error.h"
#include "inference/search/beam_search.h"
#include "inference/transformer/transformer.h"
#include "inference/vocab_tables.h"
#include "tiny_model.h"

namespace tern::inference {
namespace {

// Source token s translates to target token s + 20 (s in 4..13); target token 4 ("the") is
// sprinkled everywhere. Sentences shuffle their words so position tells nothing.
void PlantedCorpus(std::vector<std::vector<int32_t>>* src, std::vector<std::vector<int32_t>>* tgt) {
  std::mt19937 rng(5);
  std::uniform_int_distribution<int32_t> word(5, 13), len(2, 6);
  for (int i = 0; i < 400; ++i) {
    std::vector<int32_t> s, t = {4};
    for (int j = len(rng); j > 0; --j) {
      s.push_back(word(rng));
      t.push_back(s.back() + 20);
    }
    std::shuffle(t.begin(), t.end(), rng);
    src->push_back(s);
    tgt->push_back(t);
  }
}

TEST(ShortlistTest, ModelOneFindsThePlantedTranslations) {
  std::vector<std::vector<int32_t>> src, tgt;
  PlantedCorpus(&src, &tgt);
  Shortlist list = BuildShortlist(src, tgt, 40, {.frequent = 1, .best = 1, .iterations = 5});
  EXPECT_EQ(list.frequent(), (std::vector<int32_t>{kUnkId, kEosId, 4}));
  std::vector<int32_t> ids;
  for (int32_t s = 5; s <= 13; ++s) {
    list.Select({{s, kEosId}}, &ids);
    EXPECT_EQ(ids, (std::vector<int32_t>{kUnkId, kEosId, 4, s + 20})) << "source " << s;
  }
  list.Select({{5, 6}, {7}}, &ids);
  EXPECT_EQ(ids, (std::vector<int32_t>{kUnkId, kEosId, 4, 25, 26, 27}));
}

class ShortlistFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("tern_shortlist_test_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_;
};

TEST_F(ShortlistFileTest, SurvivesTheModelFileAndBadTablesAreRefused) {
  testing::TinyModel m = testing::MakeTinyModel({.eos_bias = 2.f});
  std::vector<std::vector<int32_t>> translations(29);
  translations[5] = {9, 10};
  translations[6] = {11};
  Shortlist list(29, {kEosId, 4}, translations);
  std::vector<NamedTensor> tensors = m.tensors;
  for (NamedTensor& t : list.ToTensors()) tensors.push_back(t);
  const std::string path = (dir_ / "m.tern").string();
  WriteModelFile(path, m.config, "vocab", tensors);
  std::unique_ptr<ModelFile> file = ModelFile::Open(path);
  EXPECT_EQ(file->table().back().dtype, FileDType::kInt32);
  std::unique_ptr<Shortlist> read = Shortlist::FromWeights(file->weights(), 29);
  ASSERT_NE(read, nullptr);
  std::vector<int32_t> a, b;
  list.Select({{5, 6, 3}}, &a);
  read->Select({{5, 6, 3}}, &b);
  EXPECT_EQ(a, b);
  EXPECT_EQ(a, (std::vector<int32_t>{kEosId, 4, 9, 10, 11}));
  EXPECT_EQ(Shortlist::FromWeights(m.weights, 29), nullptr);  // no shortlist: none

  // Offsets of the wrong length, and a token outside the vocabulary.
  Weights bad("bad");
  std::vector<NamedTensor> t = list.ToTensors();
  bad.Add(kShortlistFrequent, t[0].tensor);
  bad.Add(kShortlistOffsets, t[1].tensor.Slice(0, 10));
  bad.Add(kShortlistIds, t[2].tensor);
  EXPECT_THROW(Shortlist::FromWeights(bad, 29), Error);
  t[2].tensor.i32()[0] = 99;
  Weights bad_id("bad");
  bad_id.Add(kShortlistFrequent, t[0].tensor);
  bad_id.Add(kShortlistOffsets, t[1].tensor);
  bad_id.Add(kShortlistIds, t[2].tensor);
  EXPECT_THROW(Shortlist::FromWeights(bad_id, 29), Error);
  Weights float_ids("bad");
  float_ids.Add(kShortlistFrequent, Tensor::FromVector({1}, {3.f}));
  float_ids.Add(kShortlistOffsets, t[1].tensor);
  float_ids.Add(kShortlistIds, t[2].tensor);
  EXPECT_THROW(Shortlist::FromWeights(float_ids, 29), Error);
}

TEST(ShortlistSearchTest, FullShortlistGivesTheUnrestrictedHypotheses) {
  testing::TinyModel m = testing::MakeTinyModel({.eos_bias = 2.f});
  Transformer model(m.config.model(), m.weights);
  std::vector<int32_t> all(model.vocab_size());
  std::iota(all.begin(), all.end(), 0);
  Shortlist list(model.vocab_size(), all, std::vector<std::vector<int32_t>>(model.vocab_size()));
  const std::vector<std::vector<int32_t>> sources = {{5, 9, 12, 7, 3}, {8, 3}, {17, 18, 3}};
  for (bool fused : {false, true}) {
    BeamSearch plain(model, {.beam_size = 3, .n_best = 3});
    BeamSearch listed(model,
                      {.beam_size = 3, .n_best = 3, .fused_output = fused, .shortlist = &list});
    auto a = plain.Search(sources), b = listed.Search(sources);
    for (size_t i = 0; i < sources.size(); ++i) {
      ASSERT_EQ(a[i].size(), b[i].size());
      for (size_t j = 0; j < a[i].size(); ++j) {
        EXPECT_EQ(a[i][j].tokens, b[i][j].tokens);
        EXPECT_NEAR(a[i][j].score, b[i][j].score, 1e-4);
      }
    }
  }
}

// A real restriction: every output token comes from the shortlist.
TEST(ShortlistSearchTest, OutputsStayInsideTheShortlist) {
  testing::TinyModel m = testing::MakeTinyModel({.eos_bias = 2.f});
  Transformer model(m.config.model(), m.weights);
  std::vector<std::vector<int32_t>> translations(model.vocab_size());
  translations[5] = {20, 21};
  translations[8] = {22};
  Shortlist list(model.vocab_size(), {kEosId, 10, 11}, translations);
  BeamSearch search(model, {.beam_size = 2, .n_best = 2, .fused_output = true, .shortlist = &list});
  const std::vector<std::vector<int32_t>> sources = {{5, 3}, {8, 3}};
  std::vector<int32_t> allowed;
  list.Select(sources, &allowed);
  for (const auto& hyps : search.Search(sources)) {
    for (const Hypothesis& h : hyps) {
      for (int32_t token : h.tokens) {
        EXPECT_TRUE(std::binary_search(allowed.begin(), allowed.end(), token)) << token;
      }
    }
  }
}

// A shortlist per sentence: each sentence's hypotheses are the ones it gets decoded alone with its
// own shortlist, whatever else is in the batch: plain or fused, in one batch or topped up, float
// or with an int16 output layer (gathered per sentence), alone or in an ensemble.
TEST(ShortlistSearchTest, PerSentenceShortlistsDecodeEachSentenceAsIfAlone) {
  testing::TinyModel m = testing::MakeTinyModel({.eos_bias = 2.f});
  LinearOptions integer;
  integer.quantize = cpu::IntType::kInt16;
  integer.integer_output_layer = true;
  Transformer float_model(m.config.model(), m.weights),
      int_model(m.config.model(), m.weights, integer);
  std::vector<std::vector<int32_t>> translations(float_model.vocab_size());
  translations[5] = {20, 21, 14};
  translations[8] = {22, 15};
  translations[9] = {23, 24, 25, 16};
  translations[12] = {26};
  translations[17] = {27, 12, 13};
  Shortlist list(float_model.vocab_size(), {kEosId, 10, 11}, translations);
  const std::vector<std::vector<int32_t>> sources = {{5, 9, 12, 3}, {8, 3},         {17, 5, 3},
                                                     {9, 3},        {12, 8, 17, 3}, {5, 3}};
  for (const Transformer* model : {&float_model, &int_model}) {
    for (bool fused : {false, true}) {
      for (bool ensemble : {false, true}) {
        BeamSearchOptions options{
            .beam_size = 3, .n_best = 3, .fused_output = fused, .shortlist = &list};
        const std::vector<const DecoderModel*> members =
            ensemble ? std::vector<const DecoderModel*>{model} : std::vector<const DecoderModel*>{};
        std::vector<std::vector<Hypothesis>> alone;
        for (const auto& source : sources) {
          BeamSearch one(*model, options, members);
          alone.push_back(one.Search({source})[0]);
        }
        options.shortlist_per_sentence = true;
        for (int capacity : {0, 2}) {  // 0: one batch; 2: top-up batching
          BeamSearch search(*model, options, members);
          const auto got =
              capacity == 0 ? search.Search(sources) : search.SearchTopUp(sources, capacity);
          ASSERT_EQ(got.size(), sources.size());
          for (size_t i = 0; i < sources.size(); ++i) {
            ASSERT_EQ(got[i].size(), alone[i].size()) << "sentence " << i;
            for (size_t j = 0; j < got[i].size(); ++j) {
              EXPECT_EQ(got[i][j].tokens, alone[i][j].tokens)
                  << "sentence " << i << " fused " << fused << " ensemble " << ensemble
                  << " capacity " << capacity << " integer " << (model == &int_model);
              EXPECT_NEAR(got[i][j].score, alone[i][j].score, 1e-4);
            }
          }
          EXPECT_LT(search.mean_output_columns(), 12.0);  // each sentence's few columns
        }
      }
    }
  }
}

// Issue 38, 14: --shortlist-best 0 --shortlist-frequent 0 built a shortlist of eos and unk alone,
// and every translation with it came out empty.
TEST(VocabTableOptionsTest, OutOfRangeOptionsAreRefusedNamingTheFlag) {
  auto error_of = [](const std::function<void(VocabTableOptions*)>& change) -> std::string {
    VocabTableOptions o;
    o.shortlist_src = "src";
    o.shortlist_tgt = "tgt";
    change(&o);
    try {
      CheckVocabTableOptions(o);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_EQ(error_of([](VocabTableOptions*) {}), "");
  EXPECT_NE(error_of([](VocabTableOptions* o) { o->shortlist.best = 0; }).find("--shortlist-best"),
            std::string::npos);
  EXPECT_NE(error_of([](VocabTableOptions* o) {
              o->shortlist.frequent = -1;
            }).find("--shortlist-frequent"),
            std::string::npos);
  EXPECT_NE(error_of([](VocabTableOptions* o) {
              o->shortlist.min_prob = std::nanf("");
            }).find("--shortlist-min-prob"),
            std::string::npos);
  EXPECT_NE(
      error_of([](VocabTableOptions* o) { o->clusters.clusters = 2000000000; }).find("--clusters"),
      std::string::npos);
  EXPECT_NE(error_of([](VocabTableOptions* o) {
              o->clusters.iterations = 0;
            }).find("--cluster-iterations"),
            std::string::npos);
}

}  // namespace
}  // namespace tern::inference
