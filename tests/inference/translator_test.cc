// The Translator: batching by length under a token budget and restoring input order.
#include "inference/translator.h"

#include <gtest/gtest.h>

#include <thread>

#include "common/error.h"
#include "inference/search/beam_search.h"
#include "inference/tables/clustering.h"
#include "inference/tables/shortlist.h"
#include "inference/transformer/transformer.h"
#include "inference/vocab_tables.h"
#include "letter_codec.h"
#include "tiny_model.h"

namespace tern::inference {
namespace {

using testing::LetterCodec;

TEST(TranslatorTest, BatchesByLengthAndReturnsResultsInInputOrder) {
  testing::TinyModel m = testing::MakeTinyModel({.eos_bias = 2.5f, .emb_scale = 1.f});
  TranslatorOptions options;
  options.search = {.beam_size = 3, .n_best = 2};
  options.max_batch_tokens = 12;  // several batches
  Translator translator(m.config.model(), m.weights, std::make_unique<LetterCodec>(), options);
  const std::vector<std::string> lines = {
      "hello", "", "a much longer line here", "abc", "xy", "  ", "another one", "q"};
  std::vector<std::pair<size_t, size_t>> progress;
  std::vector<std::vector<Translation>> results =
      translator.Translate(lines, [&](size_t done, size_t total) {
        progress.push_back({done, total});
      });
  ASSERT_EQ(results.size(), lines.size());
  ASSERT_GE(progress.size(), 3u) << "the token budget should make several batches";
  EXPECT_EQ(progress.back(), std::make_pair(lines.size(), lines.size()));

  // Each line alone, straight through beam search, must give the same n-best list.
  BeamSearch search(translator.model(), options.search);
  LetterCodec codec;
  for (size_t i = 0; i < lines.size(); ++i) {
    std::vector<int32_t> src = codec.Encode(lines[i]);
    if (src.empty()) {
      ASSERT_EQ(results[i].size(), 1u);
      EXPECT_EQ(results[i][0].text, "");
      continue;
    }
    src.push_back(kEosId);
    std::vector<Hypothesis> alone = search.Search({src})[0];
    ASSERT_EQ(results[i].size(), alone.size()) << "line " << i;
    for (size_t j = 0; j < alone.size(); ++j) {
      EXPECT_EQ(results[i][j].text, codec.Decode(alone[j].tokens)) << "line " << i;
      EXPECT_NEAR(results[i][j].score, alone[j].score, 1e-4);
      EXPECT_NEAR(results[i][j].normalized_score, alone[j].normalized_score, 1e-4);
    }
  }
}

TEST(TranslatorTest, MaxBatchSentencesCapsEveryBatchAndKeepsTheTranslations) {
  testing::TinyModel m = testing::MakeTinyModel({.eos_bias = 2.5f, .emb_scale = 1.f});
  const std::vector<std::string> lines = {
      "hello", "a much longer line", "abc", "xy", "another one", "q", "zzzz", "mnop"};
  TranslatorOptions options;
  options.search = {.beam_size = 3};
  options.max_batch_tokens = 100000;  // the tokens alone: one batch
  auto translate = [&](int cap, bool top_up, std::vector<size_t>* batches) {
    TranslatorOptions o = options;
    o.max_batch_sentences = cap;
    o.top_up = top_up;
    Translator t(m.config.model(), m.weights, std::make_unique<LetterCodec>(), o);
    size_t last = 0;
    auto results = t.Translate(lines, [&](size_t done, size_t) {
      if (batches != nullptr) batches->push_back(done - last);
      last = done;
    });
    return std::make_pair(results, t.search().decoder_steps());
  };
  std::vector<size_t> uncapped_batches, capped_batches;
  const auto [uncapped, uncapped_steps] = translate(0, false, &uncapped_batches);
  EXPECT_EQ(uncapped_batches, std::vector<size_t>{lines.size()});
  const auto [capped, capped_steps] = translate(3, false, &capped_batches);
  EXPECT_EQ(capped_batches, (std::vector<size_t>{3, 3, 2}));
  // One sentence at a time, plain or topped up (a batch of one refills as its sentence ends):
  // the same decoder steps, more than one batch of all takes.
  const auto [alone, alone_steps] = translate(1, false, nullptr);
  const auto [topped_up, topped_up_steps] = translate(1, true, nullptr);
  EXPECT_EQ(topped_up_steps, alone_steps);
  EXPECT_GT(alone_steps, uncapped_steps);
  for (size_t i = 0; i < lines.size(); ++i) {
    for (const auto* r : {&capped, &alone, &topped_up}) {
      ASSERT_EQ((*r)[i].size(), 1u);
      EXPECT_EQ((*r)[i][0].text, uncapped[i][0].text) << "line " << i;
      EXPECT_NEAR((*r)[i][0].score, uncapped[i][0].score, 1e-4) << "line " << i;
    }
  }
  options.max_batch_sentences = -1;
  EXPECT_THROW(Translator(m.config.model(), m.weights, std::make_unique<LetterCodec>(), options),
               Error);
}

TEST(TranslatorTest, WorkersDecodeTheSameBatchesToTheSameBits) {
  // Batches of a few sentences taken by 3 searches on 3 threads: each batch is the one a single
  // search decodes, so every translation and score is the same, in input order; the progress
  // callback still counts every line once.
  testing::TinyModel m = testing::MakeTinyModel({.eos_bias = 2.5f, .emb_scale = 1.f});
  std::vector<std::string> lines;
  for (int i = 0; i < 40; ++i)
    lines.push_back(std::string(1 + i % 7, static_cast<char>('a' + i % 26)) + " x");
  lines.push_back("");
  TranslatorOptions options;
  options.search = {.beam_size = 3, .n_best = 2};
  options.max_batch_tokens = 16;
  Translator one(m.config.model(), m.weights, std::make_unique<LetterCodec>(), options);
  const auto expected = one.Translate(lines);
  options.workers = 3;
  Translator three(m.config.model(), m.weights, std::make_unique<LetterCodec>(), options);
  size_t last = 0, calls = 0;
  for (int round = 0; round < 2; ++round) {  // the worker searches are made once, then reused
    const auto got = three.Translate(lines, [&](size_t done, size_t total) {
      EXPECT_GT(done, last);
      EXPECT_EQ(total, lines.size());
      last = done;
      ++calls;
    });
    EXPECT_EQ(last, lines.size());
    last = 0;
    ASSERT_EQ(got.size(), expected.size());
    for (size_t i = 0; i < lines.size(); ++i) {
      ASSERT_EQ(got[i].size(), expected[i].size()) << i;
      for (size_t j = 0; j < got[i].size(); ++j) {
        EXPECT_EQ(got[i][j].text, expected[i][j].text) << i;
        EXPECT_EQ(got[i][j].score, expected[i][j].score) << i;
      }
    }
  }
  EXPECT_GT(calls, 6u) << "several batches";
  options.workers = 0;
  EXPECT_THROW(Translator(m.config.model(), m.weights, std::make_unique<LetterCodec>(), options),
               Error);
  options.workers = 2;
  options.top_up = true;
  EXPECT_THROW(Translator(m.config.model(), m.weights, std::make_unique<LetterCodec>(), options),
               Error);
}

// Regression: the shortlist's and the clustering's selection scratch was one buffer per table,
// shared by every search reading that table, so CPU workers (tern-translate --workers, tern-serve
// --workers) with --shortlist-per-sentence --fused-output now and then decoded a sentence with
// another batch's vocabulary. Two searches on two threads share each table here and must give
// one search's hypotheses (ThreadSanitizer sees the race even when the outputs come out right).
TEST(TranslatorTest, SearchesOnSeveralThreadsShareOneShortlistAndClustering) {
  testing::TinyModel m = testing::MakeTinyModel({.eos_bias = 2.f});
  Transformer model(m.config.model(), m.weights);
  std::vector<std::vector<int32_t>> translations(model.vocab_size());
  for (int32_t s = 3; s < static_cast<int32_t>(model.vocab_size()); ++s) {
    translations[s] = {static_cast<int32_t>(5 + s % 11), static_cast<int32_t>(7 + s % 13)};
  }
  const Shortlist shortlist(model.vocab_size(), {kEosId, 10, 11}, translations);
  std::vector<std::vector<std::vector<int32_t>>> batches;
  for (int b = 0; b < 8; ++b) {
    std::vector<std::vector<int32_t>> batch;
    for (int i = 0; i < 3; ++i) {
      std::vector<int32_t> src;
      for (int t = 0; t < 2 + (b + i) % 5; ++t) src.push_back(4 + (b * 7 + i * 3 + t * 5) % 24);
      src.push_back(kEosId);
      batch.push_back(src);
    }
    batches.push_back(batch);
  }
  std::vector<std::vector<int32_t>> all;
  for (const auto& batch : batches) all.insert(all.end(), batch.begin(), batch.end());
  const VocabClusters clusters = BuildVocabClusters(model, all, {.clusters = 3, .top = 4});
  const std::vector<BeamSearchOptions> tables = {
      {.beam_size = 3,
       .n_best = 2,
       .fused_output = true,
       .shortlist = &shortlist,
       .shortlist_per_sentence = true},
      {.beam_size = 3, .n_best = 2, .fused_output = true, .clusters = &clusters}};
  for (const BeamSearchOptions& options : tables) {
    BeamSearch one(model, options);
    std::vector<std::vector<std::vector<Hypothesis>>> expected;
    for (const auto& batch : batches) expected.push_back(one.Search(batch));
    std::atomic<int> wrong{0};
    auto work = [&](int first) {
      BeamSearch search(model, options);
      for (int round = 0; round < 10; ++round) {
        for (size_t k = 0; k < batches.size(); ++k) {
          const size_t b = (k + static_cast<size_t>(first)) % batches.size();
          const auto got = search.Search(batches[b]);
          for (size_t i = 0; i < got.size(); ++i) {
            if (got[i].size() != expected[b][i].size()) {
              ++wrong;
              continue;
            }
            for (size_t j = 0; j < got[i].size(); ++j)
              wrong += got[i][j].tokens != expected[b][i][j].tokens;
          }
        }
      }
    };
    std::thread other(work, 3);
    work(0);
    other.join();
    EXPECT_EQ(wrong.load(), 0) << (options.shortlist ? "shortlist" : "clusters");
  }
}

TEST(TranslatorTest, AShortlistPerSentenceNeedsTheShortlist) {
  testing::TinyModel m = testing::MakeTinyModel({.eos_bias = 2.5f});
  TranslatorOptions options;
  options.search.shortlist_per_sentence = true;
  try {
    Translator translator(m.config.model(), m.weights, std::make_unique<LetterCodec>(), options);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("use_shortlist"), std::string::npos) << e.what();
  }
}

// Issue 38, 5: one very long line held up every line behind it (time growing with the square of
// its length). Past max_input_length it is not translated, its place kept; with crop_input it is
// cut and translated.
TEST(TranslatorTest, LinesPastTheInputLimitAreRefusedOrCropped) {
  testing::TinyModel m = testing::MakeTinyModel({.eos_bias = 2.5f, .emb_scale = 1.f});
  const std::vector<std::string> lines = {"hello", std::string(40, 'a'), "abc"};
  TranslatorOptions options;
  options.search = {.beam_size = 2};
  options.max_input_length = 10;
  Translator refusing(m.config.model(), m.weights, std::make_unique<LetterCodec>(), options);
  EXPECT_EQ(refusing.max_input_length(), 10);
  const auto refused = refusing.Translate(lines);
  ASSERT_EQ(refused.size(), 3u);
  EXPECT_EQ(refused[0][0].pieces_over_limit, 0);
  EXPECT_EQ(refused[1][0].pieces_over_limit, 40);
  EXPECT_EQ(refused[1][0].text, "");
  EXPECT_EQ(refused[2][0].pieces_over_limit, 0);

  options.crop_input = true;
  Translator cropping(m.config.model(), m.weights, std::make_unique<LetterCodec>(), options);
  const auto cropped = cropping.Translate(lines);
  EXPECT_EQ(cropped[1][0].pieces_over_limit, 0);
  // The same as the first ten pieces alone.
  EXPECT_EQ(cropped[1][0].text, cropping.Translate({std::string(10, 'a')})[0][0].text);
  EXPECT_EQ(cropped[0][0].text, refused[0][0].text);

  // By default, the model's positions: model.max_length - 1.
  Translator by_default(m.config.model(), m.weights, std::make_unique<LetterCodec>(), {});
  EXPECT_EQ(by_default.max_input_length(), m.config.model().max_length() - 1);
}

}  // namespace
}  // namespace tern::inference
