// The stepping beam search (BeamSearch::Admit / Step / Remove), continuous batching's engine:
// sentences admitted at any step boundary, and sentences removed between steps, leave every other
// sentence's hypotheses as they are alone, on the CPU and (emulated or real) GPU, with the
// output-layer speed-ups; a longer sentence joining widens the token history.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <numeric>
#include <set>
#include <string>
#include <vector>

#include "hypotheses.h"
#include "inference/search/beam_search.h"
#include "inference/tables/shortlist.h"
#include "inference/transformer/transformer.h"
#include "tensor/allocator.h"
#include "tiny_model.h"

namespace tern::inference {
namespace {

using testing::ExpectSameHypotheses;
using testing::MakeTinyModel;
using testing::TinyModelSpec;

// Short sentences first, so that the long ones join a running batch and widen its history.
const std::vector<std::vector<int32_t>> kSources = {{8, 3},
                                                    {5, 9, 12, 7, 3},
                                                    {26, 3},
                                                    {8, 8, 8, 3},
                                                    {11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 3},
                                                    {22, 23, 3},
                                                    {10, 3},
                                                    {14, 4, 15, 4, 16, 3, 4, 5, 6, 7, 8, 9, 3},
                                                    {27, 28, 3},
                                                    {7, 6, 5, 3}};

// Each sentence searched alone.
std::vector<std::vector<Hypothesis>> Alone(const DecoderModel& model,
                                           const BeamSearchOptions& options) {
  BeamSearch search(model, options);
  std::vector<std::vector<Hypothesis>> alone;
  for (const auto& s : kSources) alone.push_back(search.Search({s})[0]);
  return alone;
}

// Admits `joining[t]` sentences (in kSources order) at the boundary before step t, then removes
// the ids in `leaving[t]`, and steps until nothing runs and nothing waits. `removed` gets the ids
// that were running when removed.
struct Schedule {
  std::map<int, int> joining;
  std::map<int, std::vector<int64_t>> leaving;
};

std::vector<std::vector<Hypothesis>> Stepped(BeamSearch& search, const Schedule& schedule,
                                             std::set<int64_t>* reported,
                                             std::set<int64_t>* removed = nullptr) {
  std::vector<std::vector<Hypothesis>> results(kSources.size());
  size_t next = 0;
  std::vector<int64_t> ids(kSources.size());
  std::iota(ids.begin(), ids.end(), 0);
  std::vector<BeamSearch::FinishedSentence> finished;
  for (int t = 0; next < kSources.size() || search.running() > 0; ++t) {
    size_t count = 0;
    if (auto it = schedule.joining.find(t); it != schedule.joining.end()) count = it->second;
    if (search.running() == 0 && count == 0) count = 1;  // never idle
    count = std::min(count, kSources.size() - next);
    search.Admit({kSources.data() + next, count}, {ids.data() + next, count});
    next += count;
    if (auto it = schedule.leaving.find(t); it != schedule.leaving.end()) {
      std::set<int64_t> gone;
      for (int64_t id : it->second) {
        if (id < static_cast<int64_t>(next) && !reported->count(id)) gone.insert(id);
      }
      EXPECT_EQ(search.Remove([&](int64_t id) { return gone.count(id) > 0; }),
                static_cast<int>(gone.size()));
      if (removed != nullptr) removed->insert(gone.begin(), gone.end());
    }
    if (search.running() == 0) continue;
    finished.clear();
    search.Step(&finished);
    for (auto& f : finished) {
      EXPECT_TRUE(reported->insert(f.id).second) << "sentence " << f.id << " finished twice";
      results[f.id] = std::move(f.hypotheses);
    }
    EXPECT_LT(t, 1000) << "the search does not end";
    if (t >= 1000) break;
  }
  return results;
}

const Schedule kJoinAnytime = {.joining = {{0, 2}, {1, 1}, {3, 2}, {4, 1}, {6, 3}, {9, 1}},
                               .leaving = {}};

void ExpectStepsLikeAlone(const DecoderModel& model, double tolerance) {
  std::vector<int32_t> all(model.vocab_size());
  std::iota(all.begin(), all.end(), 0);
  std::vector<std::vector<int32_t>> table(model.vocab_size());
  for (int32_t s = 0; s < model.vocab_size(); ++s) {
    table[s] = {s, (s * 7) % static_cast<int32_t>(model.vocab_size())};
  }
  Shortlist list(model.vocab_size(), {3, 1, 4, 5, 6}, table);
  for (int beam : {1, 3}) {
    for (bool fused : {false, true}) {
      for (int listed = 0; listed < 3; ++listed) {
        BeamSearchOptions options{.beam_size = beam, .n_best = beam, .fused_output = fused};
        if (listed > 0) options.shortlist = &list;
        options.shortlist_per_sentence = listed == 2;
        const std::string what = "beam " + std::to_string(beam) + (fused ? " fused" : "") +
                                 (listed == 1   ? " shortlist"
                                  : listed == 2 ? " per sentence"
                                                : "");
        // A union shortlist depends on the batch by design: compare it with the same batches.
        if (listed == 1) {
          BeamSearch a(model, options), b(model, options);
          std::set<int64_t> ra, rb;
          ExpectSameHypotheses(Stepped(a, kJoinAnytime, &ra), Stepped(b, kJoinAnytime, &rb), what,
                               tolerance);
          continue;
        }
        const auto alone = Alone(model, options);
        BeamSearch search(model, options);
        std::set<int64_t> reported;
        ExpectSameHypotheses(alone, Stepped(search, kJoinAnytime, &reported), what, tolerance);
        EXPECT_EQ(reported.size(), kSources.size()) << what;
        // The same search object again, from empty.
        reported.clear();
        ExpectSameHypotheses(alone,
                             Stepped(search, {.joining = {{0, 10}}, .leaving = {}}, &reported),
                             what + " again, all at once", tolerance);
      }
    }
  }
}

class SteppingVariants : public ::testing::TestWithParam<TinyModelSpec> {};

TEST_P(SteppingVariants, AdmittedAtAnyStepLikeAlone) {
  const testing::TinyModel m = MakeTinyModel(GetParam());
  Transformer model(m.config.model(), m.weights);
  ExpectStepsLikeAlone(model, 1e-4);
}

TEST_P(SteppingVariants, CudaAdmittedAtAnyStepLikeAlone) {
  if (!CudaAvailable()) GTEST_SKIP() << "no CUDA GPU visible";
  const testing::TinyModel m = MakeTinyModel(GetParam());
  std::vector<Tensor> storage;
  const Weights on_gpu = CopyWeightsTo(m.weights, Device::kCuda, &storage);
  Transformer gpu(m.config.model(), on_gpu);
  ASSERT_EQ(gpu.device(), Device::kCuda);
  ExpectStepsLikeAlone(gpu, 1e-3);
}

INSTANTIATE_TEST_SUITE_P(Runtime, SteppingVariants,
                         ::testing::Values(TinyModelSpec{.eos_bias = 2.f},
                                           TinyModelSpec{
                                               .pre_norm = true, .eos_bias = 2.f, .aan = true}),
                         [](const ::testing::TestParamInfo<TinyModelSpec>& info) {
                           return std::string(info.param.aan ? "Aan" : "Transformer");
                         });

TEST(SteppingSearchTest, RemovedSentencesLeaveTheOthersAsTheyWere) {
  const testing::TinyModel m = MakeTinyModel({.eos_bias = -1.f});  // long enough to remove
  Transformer model(m.config.model(), m.weights);
  for (bool per_sentence : {false, true}) {
    std::vector<int32_t> all(model.vocab_size());
    std::iota(all.begin(), all.end(), 0);
    Shortlist list(model.vocab_size(), all, std::vector<std::vector<int32_t>>(model.vocab_size()));
    BeamSearchOptions options{.beam_size = 3, .fused_output = true};
    if (per_sentence) {
      options.shortlist = &list;
      options.shortlist_per_sentence = true;
    }
    const auto alone = Alone(model, options);
    BeamSearch search(model, options);
    std::set<int64_t> reported, removed;
    // 1 and 4 leave while running, 7 right after it joined (before its first step), and at step
    // 5 everything running leaves: the next sentence starts a fresh batch.
    const Schedule schedule{.joining = {{0, 6}, {3, 2}},
                            .leaving = {{2, {1, 4}}, {3, {7}}, {5, {0, 2, 3, 5, 6}}}};
    const auto results = Stepped(search, schedule, &reported, &removed);
    EXPECT_TRUE(removed.count(7)) << "7 left before its first step";
    EXPECT_GE(removed.size(), 2u);
    for (size_t i = 0; i < kSources.size(); ++i) {
      if (removed.count(i)) {
        EXPECT_FALSE(reported.count(i)) << "removed sentence " << i << " was reported";
        continue;
      }
      ASSERT_TRUE(reported.count(i)) << "sentence " << i << " never finished";
      ExpectSameHypotheses({alone[i]}, {results[i]},
                           "sentence " + std::to_string(i) + (per_sentence ? " listed" : ""));
    }
    EXPECT_EQ(search.running(), 0);
  }
}

TEST(SteppingSearchTest, CountsTheRunningBatch) {
  const testing::TinyModel m = MakeTinyModel({.eos_bias = -5.f});  // nothing ends early
  Transformer model(m.config.model(), m.weights);
  BeamSearch search(model, {.beam_size = 2});
  EXPECT_EQ(search.running(), 0);
  EXPECT_EQ(search.running_padded_tokens(), 0);
  const std::vector<int64_t> ids = {10, 11, 12};
  search.Admit({kSources.data(), 2}, {ids.data(), 2});  // 2 and 5 tokens
  EXPECT_EQ(search.running(), 2);
  EXPECT_EQ(search.running_padded_tokens(), 2 * 5);
  std::vector<BeamSearch::FinishedSentence> finished;
  search.Step(&finished);
  EXPECT_TRUE(finished.empty());
  search.Admit({kSources.data() + 4, 1}, {ids.data() + 2, 1});  // 12 tokens
  EXPECT_EQ(search.running_padded_tokens(), 3 * 12);
  EXPECT_EQ(search.Remove([](int64_t id) { return id == 12; }), 1);
  EXPECT_EQ(search.running_padded_tokens(), 2 * 5);
  EXPECT_EQ(search.Remove([](int64_t) { return false; }), 0);
  // The length limit ends every sentence (2 x 5 + 10 = 20 steps at most).
  for (int t = 0; t < 40 && search.running() > 0; ++t) search.Step(&finished);
  ASSERT_EQ(finished.size(), 2u);
  for (const auto& f : finished) {
    EXPECT_TRUE(f.id == 10 || f.id == 11);
    ASSERT_EQ(f.hypotheses.size(), 1u);  // n_best 1
  }
}

}  // namespace
}  // namespace tern::inference
