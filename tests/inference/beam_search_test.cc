// Beam search and greedy decoding on tiny random models: beam 1 is greedy, n-best lists are
// sorted, and every reported score is the hypothesis' log-probability under ForwardLogits.
#include "inference/search/beam_search.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <memory>
#include <utility>
#include <vector>

#include "common/error.h"
#include "hypotheses.h"
#include "inference/transformer/transformer.h"
#include "tensor/arena.h"
#include "tensor/ops.h"
#include "tiny_model.h"

namespace tern::inference {
namespace {

using testing::MakeTinyModel;
using testing::TinyModel;
using testing::TinyModelSpec;

const std::vector<std::vector<int32_t>> kSources = {
    {5, 9, 12, 7, 3}, {8, 3}, {4, 4, 6, 10, 11, 13, 20, 3}, {17, 18, 3}, {25, 3}, {6, 7, 8, 9, 3}};

// Sum of log p(token | prefix) for the hypothesis (and eos if it ended with one), by ForwardLogits.
double Rescore(const Transformer& model, const std::vector<int32_t>& src, const Hypothesis& h) {
  std::vector<int32_t> tgt_in = {kBosId}, targets = h.tokens;
  tgt_in.insert(tgt_in.end(), h.tokens.begin(), h.tokens.end());
  if (h.ended_with_eos) {
    targets.push_back(kEosId);
  } else {
    tgt_in.pop_back();
  }
  const int64_t s = src.size(), t = tgt_in.size(), v = model.vocab_size();
  Tensor src_t = Tensor::FromInts({1, s}, src);
  Tensor mask = Tensor::FromVector({1, s}, std::vector<float>(s, 1.f));
  Arena arena;
  Tensor logits = model.ForwardLogits(src_t, mask, Tensor::FromInts({1, t}, tgt_in), arena);
  Tensor log_probs = arena.Alloc({t, v});
  LogSoftmax(logits.Reshape({t, v}), log_probs);
  double score = 0;
  for (int64_t i = 0; i < t; ++i) score += log_probs.at(i * v + targets[i]);
  return score;
}

class BeamSearchVariants : public ::testing::TestWithParam<TinyModelSpec> {};

TEST_P(BeamSearchVariants, BeamOneEqualsGreedy) {
  TinyModel m = MakeTinyModel(GetParam());
  Transformer model(m.config.model(), m.weights);
  BeamSearch search(model, {.beam_size = 1, .n_best = 1});
  std::vector<std::vector<Hypothesis>> beam = search.Search(kSources);
  std::vector<Hypothesis> greedy = search.Greedy(kSources);
  ASSERT_EQ(beam.size(), kSources.size());
  for (size_t i = 0; i < kSources.size(); ++i) {
    ASSERT_EQ(beam[i].size(), 1u);
    EXPECT_EQ(beam[i][0].tokens, greedy[i].tokens) << "sentence " << i;
    EXPECT_EQ(beam[i][0].ended_with_eos, greedy[i].ended_with_eos);
    EXPECT_NEAR(beam[i][0].score, greedy[i].score, 1e-4);
    EXPECT_NEAR(greedy[i].score, Rescore(model, kSources[i], greedy[i]), 1e-3);
  }
}

TEST_P(BeamSearchVariants, NBestIsSortedAndScoresAreForwardLogitsLogProbabilities) {
  TinyModel m = MakeTinyModel(GetParam());
  Transformer model(m.config.model(), m.weights);
  for (float alpha : {0.f, 1.f}) {
    BeamSearch search(model, {.beam_size = 4, .n_best = 4, .length_alpha = alpha});
    std::vector<std::vector<Hypothesis>> results = search.Search(kSources);
    for (size_t i = 0; i < kSources.size(); ++i) {
      const auto& hyps = results[i];
      ASSERT_EQ(hyps.size(), 4u) << "sentence " << i;
      const int max_length = 2 * static_cast<int>(kSources[i].size()) + 10;
      for (size_t j = 0; j < hyps.size(); ++j) {
        const Hypothesis& h = hyps[j];
        if (j > 0) {
          EXPECT_GE(hyps[j - 1].normalized_score, h.normalized_score);
        }
        const int length = static_cast<int>(h.tokens.size()) + (h.ended_with_eos ? 1 : 0);
        EXPECT_LE(length, max_length);
        if (!h.ended_with_eos) {
          EXPECT_EQ(length, max_length);
        }
        for (int32_t token : h.tokens) {
          EXPECT_TRUE(token != kEosId && token != kPadId && token != kBosId) << token;
        }
        EXPECT_NEAR(h.score, Rescore(model, kSources[i], h), 1e-3) << "sentence " << i;
        EXPECT_NEAR(h.normalized_score, h.score / std::pow(static_cast<float>(length), alpha),
                    1e-4);
        for (size_t k = 0; k < j; ++k) EXPECT_NE(hyps[k].tokens, h.tokens) << "duplicate";
      }
    }
  }
}

TEST_P(BeamSearchVariants, ABatchGivesTheSameResultsAsOneSentenceAtATime) {
  TinyModel m = MakeTinyModel(GetParam());
  Transformer model(m.config.model(), m.weights);
  BeamSearch search(model, {.beam_size = 3, .n_best = 3});
  std::vector<std::vector<Hypothesis>> batch = search.Search(kSources);
  for (size_t i = 0; i < kSources.size(); ++i) {
    std::vector<std::vector<Hypothesis>> alone = search.Search({kSources[i]});
    ASSERT_EQ(alone[0].size(), batch[i].size());
    for (size_t j = 0; j < batch[i].size(); ++j) {
      EXPECT_EQ(alone[0][j].tokens, batch[i][j].tokens) << "sentence " << i << " hyp " << j;
      EXPECT_NEAR(alone[0][j].score, batch[i][j].score, 1e-4);
    }
  }
}

// With a beam wider than the vocabulary and outputs of at most two tokens, beam search is
// exhaustive: its best hypothesis must be the best of all sequences, found here by brute force.
TEST_P(BeamSearchVariants, WideBeamFindsTheExhaustiveOptimum) {
  TinyModel m = MakeTinyModel(GetParam());
  Transformer model(m.config.model(), m.weights);
  const int64_t v = model.vocab_size();
  BeamSearch search(model, {.beam_size = static_cast<int>(v) + 1,
                            .n_best = 1,
                            .length_alpha = 0.f,
                            .max_length_cap = 2});
  std::vector<std::vector<Hypothesis>> results = search.Search(kSources);
  for (size_t i = 0; i < kSources.size(); ++i) {
    // Every [a, b] with a != eos: log p(a) + log p(b | a); and [eos] alone (pad, bos excluded).
    const int64_t s = kSources[i].size();
    std::vector<int32_t> src_rows, tgt_rows;
    for (int32_t a = 0; a < v; ++a) {
      src_rows.insert(src_rows.end(), kSources[i].begin(), kSources[i].end());
      tgt_rows.insert(tgt_rows.end(), {kBosId, a});
    }
    Tensor src = Tensor::FromInts({v, s}, src_rows);
    Tensor mask = Tensor::FromVector({v, s}, std::vector<float>(v * s, 1.f));
    Arena arena;
    Tensor logits = model.ForwardLogits(src, mask, Tensor::FromInts({v, 2}, tgt_rows), arena);
    Tensor lp = arena.Alloc({v * 2, v});
    LogSoftmax(logits.Reshape({v * 2, v}), lp);
    // Row a*2 is p(. | bos) (the same for every a); row a*2+1 is p(. | bos a).
    double best = lp.at(kEosId);
    auto producible = [](int64_t x) { return x != kPadId && x != kBosId; };
    for (int64_t a = 0; a < v; ++a) {
      if (a == kEosId || !producible(a)) continue;
      for (int64_t b = 0; b < v; ++b) {
        if (!producible(b)) continue;
        best = std::max(best, static_cast<double>(lp.at(a)) + lp.at((a * 2 + 1) * v + b));
      }
    }
    EXPECT_NEAR(results[i][0].score, best, 1e-4) << "sentence " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Runtime, BeamSearchVariants,
    // Random models tend to end at once or to loop; these mix both among the test sentences.
    ::testing::Values(
        TinyModelSpec{.eos_bias = 2.f}, TinyModelSpec{.eos_bias = 2.5f, .emb_scale = 1.f},
        TinyModelSpec{.tied = false, .pre_norm = true, .activation = "gelu", .eos_bias = 1.5f},
        // The AAN decoder (running sums as state), with and without FFN and gate.
        TinyModelSpec{.eos_bias = 2.f, .aan = true},
        TinyModelSpec{.pre_norm = true, .eos_bias = 2.f, .aan = true, .aan_ffn = false},
        TinyModelSpec{.tied = false, .eos_bias = 2.5f, .aan = true, .aan_gate = false}),
    [](const ::testing::TestParamInfo<TinyModelSpec>& info) {
      return std::string(info.param.pre_norm ? "PreNorm" : "PostNorm") + std::to_string(info.index);
    });

// The test models above exercise both ways a hypothesis ends.
TEST(BeamSearchTest, TestModelsEndSomeSentencesWithEosAndCutOthersOff) {
  TinyModel m = MakeTinyModel({.eos_bias = 2.f});
  Transformer model(m.config.model(), m.weights);
  BeamSearch search(model, {.beam_size = 1});
  int ended = 0;
  for (const Hypothesis& h : search.Greedy(kSources)) ended += h.ended_with_eos;
  EXPECT_GT(ended, 0);
  EXPECT_LT(ended, static_cast<int>(kSources.size()));
}

TEST(BeamSearchTest, RepeatedBatchesDoNotCallTheAllocator) {
  TinyModel m = MakeTinyModel({.eos_bias = 2.5f, .emb_scale = 1.f});
  Transformer model(m.config.model(), m.weights);
  BeamSearch search(model, {.beam_size = 4, .n_best = 2});
  search.Search(kSources);
  search.Search(kSources);
  const int64_t warm = search.system_allocations();
  std::vector<std::vector<Hypothesis>> again = search.Search(kSources);
  search.Greedy(kSources);
  EXPECT_EQ(search.system_allocations(), warm);
  EXPECT_EQ(again.size(), kSources.size());
}

TEST(BeamSearchTest, LengthLimitAndEmptyBatch) {
  TinyModel m = MakeTinyModel({.eos_bias = -10.f});  // eos never wins: every search hits the limit
  Transformer model(m.config.model(), m.weights);
  BeamSearch search(model, {.beam_size = 2, .n_best = 2, .max_length_cap = 5});
  std::vector<std::vector<Hypothesis>> results = search.Search(kSources);
  for (const auto& hyps : results) {
    ASSERT_EQ(hyps.size(), 2u);
    for (const Hypothesis& h : hyps) {
      EXPECT_EQ(h.tokens.size(), 5u);
      EXPECT_FALSE(h.ended_with_eos);
    }
  }
  EXPECT_TRUE(search.Search({}).empty());
  EXPECT_TRUE(search.Greedy({}).empty());
}

// Ensembles: every hypothesis' score is the mean of the members' log-probabilities of it (each
// rescored alone by ForwardLogits); beam 1 equals greedy; top-up equals plain batching.
TEST(EnsembleTest, ScoresAreTheMeanOfTheMembersLogProbabilities) {
  TinyModel a = MakeTinyModel({.eos_bias = 2.f, .seed = 7});
  TinyModel b = MakeTinyModel({.eos_bias = 2.f, .seed = 11});
  TinyModel c = MakeTinyModel({.pre_norm = true, .eos_bias = 2.5f, .seed = 13, .aan = true});
  Transformer ma(a.config.model(), a.weights), mb(b.config.model(), b.weights),
      mc(c.config.model(), c.weights);
  BeamSearch search(ma, {.beam_size = 4, .n_best = 4}, {&mb, &mc});
  EXPECT_EQ(search.ensemble_size(), 3);
  const std::vector<std::vector<Hypothesis>> results = search.Search(kSources);
  bool differs_from_first = false;
  BeamSearch alone(ma, {.beam_size = 4, .n_best = 4});
  const std::vector<std::vector<Hypothesis>> single = alone.Search(kSources);
  for (size_t i = 0; i < kSources.size(); ++i) {
    ASSERT_FALSE(results[i].empty());
    for (const Hypothesis& h : results[i]) {
      const double mean = (Rescore(ma, kSources[i], h) + Rescore(mb, kSources[i], h) +
                           Rescore(mc, kSources[i], h)) /
                          3;
      EXPECT_NEAR(h.score, mean, 1e-3) << "sentence " << i;
    }
    differs_from_first |= results[i][0].tokens != single[i][0].tokens;
  }
  EXPECT_TRUE(differs_from_first) << "the ensemble decodes exactly as its first member";

  BeamSearch greedy_search(ma, {.beam_size = 1}, {&mb, &mc});
  const std::vector<std::vector<Hypothesis>> beam1 = greedy_search.Search(kSources);
  const std::vector<Hypothesis> greedy = greedy_search.Greedy(kSources);
  const std::vector<std::vector<Hypothesis>> topup = search.SearchTopUp(kSources, 2);
  for (size_t i = 0; i < kSources.size(); ++i) {
    EXPECT_EQ(beam1[i][0].tokens, greedy[i].tokens) << "sentence " << i;
    EXPECT_NEAR(beam1[i][0].score, greedy[i].score, 1e-4);
    ASSERT_EQ(topup[i].size(), results[i].size());
    for (size_t k = 0; k < results[i].size(); ++k) {
      EXPECT_EQ(topup[i][k].tokens, results[i][k].tokens) << "sentence " << i;
    }
  }
}

// The fused output pass over an ensemble picks from the members' mean log-probabilities: the
// unfused search's hypotheses and scores, row by row or batched, at beam 1 (one column a row),
// 3 and 10 (2 * 10 columns, wider than the GPU's kernel), plain and topped up; greedy too.
TEST(EnsembleTest, FusedPassOverTheMeanGivesTheUnfusedHypotheses) {
  TinyModel a = MakeTinyModel({.eos_bias = 2.f, .seed = 7});
  TinyModel b = MakeTinyModel({.pre_norm = true, .eos_bias = 2.5f, .seed = 13, .aan = true});
  Transformer ma(a.config.model(), a.weights), mb(b.config.model(), b.weights);
  for (int beam : {1, 3, 10}) {
    BeamSearch unfused(ma, {.beam_size = beam, .n_best = beam}, {&mb});
    const auto expected = unfused.Search(kSources);
    const auto expected_top_up = unfused.SearchTopUp(kSources, 3);
    for (bool batched : {false, true}) {
      const std::string what = "beam " + std::to_string(beam) + (batched ? " batched" : "");
      BeamSearch fused(
          ma, {.beam_size = beam, .n_best = beam, .fused_output = true, .batched_fused = batched},
          {&mb});
      testing::ExpectSameHypotheses(expected, fused.Search(kSources), what, 0.0);
      testing::ExpectSameHypotheses(expected_top_up, fused.SearchTopUp(kSources, 3),
                                    what + " top-up", 0.0);
    }
  }
  BeamSearch greedy(ma, {.beam_size = 1}, {&mb});
  BeamSearch fused(ma, {.beam_size = 1, .fused_output = true, .need_scores = false}, {&mb});
  const std::vector<Hypothesis> best = greedy.Greedy(kSources);
  const auto beam1 = fused.Search(kSources);
  for (size_t i = 0; i < kSources.size(); ++i) {
    EXPECT_EQ(beam1[i][0].tokens, best[i].tokens) << "sentence " << i;
    EXPECT_NEAR(beam1[i][0].score, best[i].score, 1e-4) << "not the mean log-probability";
  }
}

// Exact ties between candidates are broken alike by the unfused search, which offers every
// column, and the fused one, which offers each row's best: an ensemble's hypotheses are the same
// bits either way, a single model's the same tokens. Regression: the candidates' heap left
// equal scores in the order they were offered, so the async e2e model's fused ensemble dropped a
// token the unfused one kept.
TEST(BeamSearchTest, TiesAreBrokenAlikeWithAndWithoutTheFusedPass) {
  TinyModel a = MakeTinyModel({.eos_bias = 1.f, .seed = 7, .twins = true});
  TinyModel b =
      MakeTinyModel({.pre_norm = true, .eos_bias = 1.f, .seed = 13, .aan = true, .twins = true});
  Transformer ma(a.config.model(), a.weights), mb(b.config.model(), b.weights);
  const std::vector<std::vector<const DecoderModel*>> ensembles = {{}, {&mb}};
  for (const auto& members : ensembles) {
    const double tolerance = members.empty() ? 1e-4 : 0.0;
    for (int beam : {2, 4, 6}) {
      BeamSearch unfused(ma, {.beam_size = beam, .n_best = beam}, members);
      const auto expected = unfused.Search(kSources);
      for (bool batched : {false, true}) {
        const std::string what = std::to_string(members.size() + 1) + " model(s), beam " +
                                 std::to_string(beam) + (batched ? " batched" : "");
        BeamSearch fused(
            ma, {.beam_size = beam, .n_best = beam, .fused_output = true, .batched_fused = batched},
            members);
        testing::ExpectSameHypotheses(expected, fused.Search(kSources), what, tolerance);
      }
    }
  }
}

// Clusters are taken in an ensemble (the first model's states choose; clustering_test).
TEST(EnsembleTest, RejectsOtherVocabularies) {
  TinyModel a = MakeTinyModel({.eos_bias = 2.f});
  TinyModel b = MakeTinyModel({.vocab = 31, .eos_bias = 2.f});
  Transformer ma(a.config.model(), a.weights), mb(b.config.model(), b.weights);
  EXPECT_THROW(BeamSearch(ma, {.beam_size = 2}, {&mb}), Error);
}

// Issue 38, 7: --max-length-factor inf, nan or 1e9 cut every translation to one word (the limit
// overflowed its int), with exit 0; a NaN alpha left the hypotheses' order undefined.
TEST(BeamSearchOptionsTest, OutOfRangeOptionsAreRefused) {
  TinyModel m = MakeTinyModel({});
  Transformer model(m.config.model(), m.weights);
  auto error_of = [&](BeamSearchOptions options) -> std::string {
    try {
      BeamSearch search(model, options);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_EQ(error_of({}), "");
  for (float factor : {std::numeric_limits<float>::infinity(), std::nanf(""), 1e9f, -1.f}) {
    EXPECT_NE(error_of({.max_length_factor = factor}).find("output length limit"),
              std::string::npos)
        << factor;
  }
  EXPECT_NE(error_of({.length_alpha = std::nanf("")}).find("alpha"), std::string::npos);
  EXPECT_NE(error_of({.length_alpha = 1e9f}).find("alpha"), std::string::npos);
  EXPECT_NE(error_of({.beam_size = 100000}).find("beam size"), std::string::npos);
}

// A model whose next-token probabilities are a script of the hypothesis' history, through an
// identity output layer (E = I, b = 0, the decoder's output is the logits), to put candidates in
// a chosen order.
class ScriptedModel final : public DecoderModel {
 public:
  using Script = std::function<std::vector<std::pair<int32_t, float>>(
      const std::vector<int32_t>& history)>;  // (token, probability); others 1e-6, the last
                                              // token what remains

  static constexpr int64_t kVocab = 8;

  explicit ScriptedModel(Script script)
      : script_(std::move(script)),
        identity_(Tensor::Zeros({kVocab, kVocab})),
        bias_(Tensor::Zeros({kVocab})) {
    for (int64_t i = 0; i < kVocab; ++i) identity_.f32()[i * kVocab + i] = 1.f;
    config_.set_arch("transformer");
  }
  const config::ModelConfig& config() const override { return config_; }
  int64_t vocab_size() const override { return kVocab; }
  Tensor Encode(const Tensor& src, const Tensor&, Arena& arena) const override {
    Tensor out = arena.Alloc({src.shape()[0], src.shape()[1], 1});
    Fill(out, 0.f);
    return out;
  }
  std::unique_ptr<DecoderState> NewDecoder() const override {
    return std::make_unique<State>(this);
  }
  Tensor OutputInput(const Tensor& h, Arena&) const override { return h; }
  const Tensor& output_embeddings() const override { return identity_; }
  const Tensor& output_bias() const override { return bias_; }

 private:
  class State final : public DecoderState {
   public:
    explicit State(const ScriptedModel* model) : model_(model) {}
    void Start(const Tensor& encoded, const Tensor&, int beam) override {
      beam_ = beam;
      histories_.assign(encoded.shape()[0] * beam, {});
    }
    StepOutput Step(const std::vector<int32_t>&, const std::vector<int32_t>&) override {
      ADD_FAILURE() << "beam search steps through StepHidden";
      return {};
    }
    Tensor StepHidden(const std::vector<int32_t>& prev,
                      const std::vector<int32_t>& parents) override {
      std::vector<std::vector<int32_t>> next(prev.size());
      for (size_t r = 0; r < prev.size(); ++r) {
        if (prev[r] != kBosId) next[r] = histories_[parents[r]];
        next[r].push_back(prev[r]);
      }
      histories_ = std::move(next);
      const int64_t rows = static_cast<int64_t>(prev.size());
      logits_ = arena_.Alloc({rows, kVocab});
      for (int64_t r = 0; r < rows; ++r) {
        std::vector<float> p(kVocab, 1e-6f);
        for (auto [token, prob] : model_->script_(histories_[r])) p[token] = prob;
        float rest = 1.f;
        for (int64_t v = 0; v + 1 < kVocab; ++v) rest -= p[v];
        p[kVocab - 1] = std::max(rest, 1e-6f);  // the last token takes what is left
        for (int64_t v = 0; v < kVocab; ++v) logits_.f32()[r * kVocab + v] = std::log(p[v]);
      }
      return logits_;
    }
    void KeepSentences(const std::vector<int32_t>& keep) override {
      std::vector<std::vector<int32_t>> kept;
      for (int32_t s : keep) {
        for (int b = 0; b < beam_; ++b) kept.push_back(histories_[s * beam_ + b]);
      }
      histories_ = std::move(kept);
    }
    void AddSentences(const Tensor&, const Tensor&) override { ADD_FAILURE() << "no top-up here"; }
    int64_t system_allocations() const override { return 0; }

   private:
    const ScriptedModel* model_;
    int beam_ = 1;
    std::vector<std::vector<int32_t>> histories_;  // per row, bos first
    Arena arena_;
    Tensor logits_;
  };

  Script script_;
  config::ModelConfig config_;
  Tensor identity_, bias_;
};

// An eos ranked below the beam's best beam_size continuations is not a finished hypothesis (as in
// Marian, fairseq and Hugging Face's generate()). At beam 2, the second step ranks a-c (.30),
// b-eos (.20), a-eos (.15), then b's others: counting a-eos too would end the sentence there with
// "b" (-0.80 normalized); without it a-c goes on to a-c-eos (.27, -0.44), the translation.
TEST(BeamSearchTest, AnEosBelowTheBeamsBestContinuationsDoesNotFinish) {
  constexpr int32_t a = 4, b = 5, c = 6;
  ScriptedModel model([&](const std::vector<int32_t>& h) -> std::vector<std::pair<int32_t, float>> {
    if (h == std::vector<int32_t>{kBosId}) return {{a, .5f}, {b, .4f}, {kEosId, .05f}, {c, .03f}};
    if (h == std::vector<int32_t>{kBosId, a}) return {{c, .6f}, {kEosId, .3f}, {b, .05f}};
    if (h == std::vector<int32_t>{kBosId, b}) return {{kEosId, .5f}, {c, .1f}, {a, .05f}};
    if (h == std::vector<int32_t>{kBosId, a, c}) return {{kEosId, .9f}, {a, .05f}};
    return {{kEosId, .5f}, {a, .2f}};
  });
  BeamSearch search(model, {.beam_size = 2, .n_best = 2});
  const std::vector<std::vector<Hypothesis>> out = search.Search({{a, b, kEosId}});
  ASSERT_EQ(out.size(), 1u);
  ASSERT_EQ(out[0].size(), 2u);
  EXPECT_EQ(out[0][0].tokens, (std::vector<int32_t>{a, c}));
  EXPECT_NEAR(out[0][0].score, std::log(.5 * .6 * .9), 1e-4);
  EXPECT_EQ(out[0][1].tokens, (std::vector<int32_t>{b}));
  for (const Hypothesis& h : out[0]) EXPECT_TRUE(h.ended_with_eos);
}

}  // namespace
}  // namespace tern::inference
