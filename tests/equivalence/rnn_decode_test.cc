// Beam search over the GRU models (inference/rnn/rnn.h): every hypothesis' score is what the
// teacher-forced forward pass gives its tokens (ForwardLogits, itself held equal to the training
// graph), beam 1 is greedy, top-up batching and ensembles agree with plain decoding, and each of
// Devlin's speed-ups leaves the output unchanged (the exact ones) or within float noise (the
// activation approximations).
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <vector>

#include "common/error.h"
#include "inference/format/weights.h"
#include "inference/rnn/rnn.h"
#include "inference/search/beam_search.h"
#include "inference/tables/shortlist.h"
#include "models/model.h"
#include "tensor/allocator.h"
#include "tensor/ops.h"
#include "tests/equivalence/tiny_rnn_config.h"
#include "tests/inference/hypotheses.h"

namespace tern {
namespace {

using inference::BeamSearch;
using inference::Hypothesis;
using inference::RnnModel;
using inference::RnnOptions;

constexpr int kVocab = 31;

struct Variant {
  const char* arch;
  bool tied, layer_norm, deep;
};

// A randomly initialized model of `v`; weights owned by the fixture.
struct TinyRnn {
  config::ModelConfig config;
  graph::ParamStore params;
  inference::Weights weights{"test parameters"};
};

std::unique_ptr<TinyRnn> MakeTinyRnn(const Variant& v, uint64_t seed = 17) {
  auto m = std::make_unique<TinyRnn>();
  m->config = TinyRnnConfig(v.arch, v.tied, v.layer_norm, v.deep);
  const config::ModelConfig& mc = m->config;
  models::CreateModel(mc, kVocab)->AddParams(&m->params);
  m->params.Finalize(Device::kCpu, seed);
  // Sharper distributions than the initialization's, so that hypotheses differ and end.
  for (int i = 0; i < m->params.size(); ++i) {
    Tensor p = m->params.value(i);
    for (int64_t k = 0; k < p.numel(); ++k) p.f32()[k] *= 1.5f;
    // A likelier eos, so that some hypotheses end before the length limit.
    if (m->params.info(i).name == "decoder_ff_logit_l2_b") p.f32()[inference::kEosId] += 2.5f;
    m->weights.Add(m->params.info(i).name, p);
  }
  return m;
}

const std::vector<std::vector<int32_t>> kSources = {
    {5, 6, 7, 8, 9, 3}, {10, 11, 3}, {12, 13, 14, 15, 16, 17, 18, 19, 3}, {20, 3}, {21, 22, 23, 3}};

double Rescore(const RnnModel& model, const std::vector<int32_t>& src, const Hypothesis& h) {
  std::vector<int32_t> tgt_in = {inference::kBosId}, targets = h.tokens;
  tgt_in.insert(tgt_in.end(), h.tokens.begin(), h.tokens.end());
  if (h.ended_with_eos) {
    targets.push_back(inference::kEosId);
  } else {
    tgt_in.pop_back();
  }
  const int64_t s = src.size(), t = tgt_in.size(), v = model.vocab_size();
  Arena arena;
  Tensor logits = model.ForwardLogits(Tensor::FromInts({1, s}, src),
                                      Tensor::FromVector({1, s}, std::vector<float>(s, 1.f)),
                                      Tensor::FromInts({1, t}, tgt_in), arena);
  Tensor log_probs = arena.Alloc({t, v});
  LogSoftmax(logits.Reshape({t, v}), log_probs);
  double score = 0;
  for (int64_t i = 0; i < t; ++i) score += log_probs.at(i * v + targets[i]);
  return score;
}

void ExpectSame(const std::vector<std::vector<Hypothesis>>& a,
                const std::vector<std::vector<Hypothesis>>& b, float tolerance) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(a[i].size(), b[i].size()) << "sentence " << i;
    for (size_t k = 0; k < a[i].size(); ++k) {
      EXPECT_EQ(a[i][k].tokens, b[i][k].tokens) << "sentence " << i << " hypothesis " << k;
      EXPECT_NEAR(a[i][k].score, b[i][k].score, tolerance) << "sentence " << i;
    }
  }
}

// Every search of `expected_model` against the same search of `model`: plain and top-up with
// room for 2 at beams 1 and 3, fused output or not, and greedy.
void ExpectSameSearches(const RnnModel& expected_model, const RnnModel& model, float tolerance) {
  for (int beam : {1, 3}) {
    for (bool fused : {false, true}) {
      const inference::BeamSearchOptions options{
          .beam_size = beam, .n_best = beam, .fused_output = fused};
      BeamSearch expected(expected_model, options), search(model, options);
      ExpectSame(expected.Search(kSources), search.Search(kSources), tolerance);
      ExpectSame(expected.SearchTopUp(kSources, 2), search.SearchTopUp(kSources, 2), tolerance);
    }
  }
  BeamSearch expected(expected_model, {.beam_size = 1}), search(model, {.beam_size = 1});
  inference::testing::ExpectSameGreedy(expected.Greedy(kSources), search.Greedy(kSources),
                                       tolerance);
}

class RnnDecodeTest : public ::testing::TestWithParam<Variant> {};

TEST_P(RnnDecodeTest, BeamScoresAreTheForwardPassLogProbabilities) {
  auto m = MakeTinyRnn(GetParam());
  RnnModel model(m->config, m->weights);
  BeamSearch search(model, {.beam_size = 3, .n_best = 3});
  const auto results = search.Search(kSources);
  int ended = 0;
  for (size_t i = 0; i < kSources.size(); ++i) {
    ASSERT_FALSE(results[i].empty());
    for (size_t k = 0; k < results[i].size(); ++k) {
      const Hypothesis& h = results[i][k];
      EXPECT_NEAR(h.score, Rescore(model, kSources[i], h), 1e-3) << "sentence " << i;
      if (k > 0) {
        EXPECT_GE(results[i][k - 1].normalized_score, h.normalized_score);
      }
      ended += h.ended_with_eos;
    }
  }
  EXPECT_GT(ended, 0) << "no hypothesis ended: the test model is degenerate";
}

TEST_P(RnnDecodeTest, BeamOneIsGreedyAndTopUpIsPlain) {
  auto m = MakeTinyRnn(GetParam());
  RnnModel model(m->config, m->weights);
  BeamSearch beam1(model, {.beam_size = 1});
  const auto searched = beam1.Search(kSources);
  const auto greedy = beam1.Greedy(kSources);
  for (size_t i = 0; i < kSources.size(); ++i) {
    EXPECT_EQ(searched[i][0].tokens, greedy[i].tokens) << "sentence " << i;
    EXPECT_NEAR(searched[i][0].score, greedy[i].score, 1e-4);
  }
  BeamSearch plain(model, {.beam_size = 2, .n_best = 2}),
      top_up(model, {.beam_size = 2, .n_best = 2});
  ExpectSame(plain.Search(kSources), top_up.SearchTopUp(kSources, 2), 1e-4);
}

TEST_P(RnnDecodeTest, ExactSpeedUpsChangeNothing) {
  auto m = MakeTinyRnn(GetParam());
  RnnModel plain_model(m->config, m->weights, {}, RnnOptions{.precomputed_attention = false});
  BeamSearch plain(plain_model, {.beam_size = 3, .n_best = 3});
  const auto expected = plain.Search(kSources);
  // Part of the vocabulary from the table (ids < 15), the rest by products; then all of it.
  for (int table : {15, kVocab}) {
    RnnModel fast(m->config, m->weights, {},
                  RnnOptions{.precomputed_embeddings = table, .merge_states = true});
    BeamSearch search(fast, {.beam_size = 3, .n_best = 3});
    ExpectSame(expected, search.Search(kSources), 1e-4);
    const int64_t allocations = search.system_allocations();
    search.Search(kSources);
    EXPECT_EQ(search.system_allocations(), allocations) << "a repeated batch must not allocate";
  }
}

TEST_P(RnnDecodeTest, ApproximateActivationsStayWithinFloatNoise) {
  auto m = MakeTinyRnn(GetParam());
  RnnModel exact(m->config, m->weights);
  RnnModel approx(m->config, m->weights, {}, RnnOptions{.approx_activations = true});
  BeamSearch a(exact, {.beam_size = 3, .n_best = 3}), b(approx, {.beam_size = 3, .n_best = 3});
  ExpectSame(a.Search(kSources), b.Search(kSources), 1e-3);
}

TEST_P(RnnDecodeTest, Int16AtLoadDecodesCloseToFloat) {
  auto m = MakeTinyRnn(GetParam());
  RnnModel exact(m->config, m->weights);
  inference::LinearOptions linear;
  linear.quantize = cpu::IntType::kInt16;
  RnnModel quantized(m->config, m->weights, linear);
  BeamSearch a(exact, {.beam_size = 1}), b(quantized, {.beam_size = 1});
  const auto x = a.Greedy(kSources), y = b.Greedy(kSources);
  int same = 0;
  for (size_t i = 0; i < kSources.size(); ++i) {
    same += x[i].tokens == y[i].tokens;
    if (x[i].tokens == y[i].tokens) {
      EXPECT_NEAR(x[i].score, y[i].score, 0.05);
    }
  }
  EXPECT_GE(same, static_cast<int>(kSources.size()) - 1);
}

// --integer-output-layer: the output layer as int16 too (off by default), in beam search (with and
// without a restricted vocabulary) and in the forward pass alike.
TEST_P(RnnDecodeTest, IntegerOutputLayerIsASwitch) {
  auto m = MakeTinyRnn(GetParam());
  inference::LinearOptions linear;
  linear.quantize = cpu::IntType::kInt16;
  RnnModel hidden_only(m->config, m->weights, linear);
  EXPECT_EQ(hidden_only.integer_output(), nullptr);
  linear.integer_output_layer = true;
  RnnModel quantized(m->config, m->weights, linear);
  ASSERT_NE(quantized.integer_output(), nullptr);
  BeamSearch a(hidden_only, {.beam_size = 2}), b(quantized, {.beam_size = 2});
  const auto x = a.Search(kSources), y = b.Search(kSources);
  int same = 0;
  for (size_t i = 0; i < kSources.size(); ++i) same += x[i][0].tokens == y[i][0].tokens;
  EXPECT_GE(same, static_cast<int>(kSources.size()) - 1);
  // Each hypothesis' score is the integer forward pass' log-probability of its tokens, which is
  // not the float output layer's.
  for (size_t i = 0; i < kSources.size(); ++i) {
    const double integer = Rescore(quantized, kSources[i], y[i][0]);
    EXPECT_NEAR(y[i][0].score, integer, 1e-4) << "sentence " << i;
    EXPECT_NE(integer, Rescore(hidden_only, kSources[i], y[i][0])) << "sentence " << i;
  }
}

TEST_P(RnnDecodeTest, AnEnsembleOfAModelWithItselfIsTheModel) {
  auto m = MakeTinyRnn(GetParam());
  RnnModel model(m->config, m->weights);
  BeamSearch alone(model, {.beam_size = 2, .n_best = 2});
  BeamSearch pair(model, {.beam_size = 2, .n_best = 2}, {&model});
  ExpectSame(alone.Search(kSources), pair.Search(kSources), 1e-4);
}

// The GPU's code path, run on the CPU: the same hypotheses as the loops over rows, plain, top-up
// and greedy, fused or not; nothing allocated once batches repeat.
TEST_P(RnnDecodeTest, TensorOpsGiveTheRowLoopsHypotheses) {
  auto m = MakeTinyRnn(GetParam());
  RnnModel loops(m->config, m->weights), tensors(m->config, m->weights, {}, {.tensor_ops = true});
  ASSERT_TRUE(tensors.tensor_ops());
  ASSERT_FALSE(loops.tensor_ops());
  ExpectSameSearches(loops, tensors, 1e-4);
  BeamSearch search(tensors, {.beam_size = 3, .n_best = 3});
  search.SearchTopUp(kSources, 2);
  search.SearchTopUp(kSources, 2);
  const int64_t warm = search.system_allocations();
  search.SearchTopUp(kSources, 2);
  EXPECT_EQ(search.system_allocations(), warm) << "a repeated batch must not allocate";
}

// --precision bf16|fp16 on the GPU's code path (emulated on the CPU): every linear product rounds
// its operands, and the translations stay near the float ones.
TEST_P(RnnDecodeTest, HalfProductsRoundTheirOperandsAndStayNearFloat) {
  auto m = MakeTinyRnn(GetParam());
  RnnModel full(m->config, m->weights, {}, {.tensor_ops = true});
  BeamSearch reference(full, {.beam_size = 3});
  const auto expected = reference.Search(kSources);
  for (DType inputs : {DType::kBFloat16, DType::kFloat16}) {
    inference::LinearOptions linear;
    linear.inputs = inputs;
    RnnModel half(m->config, m->weights, linear, {.tensor_ops = true});
    BeamSearch search(half, {.beam_size = 3});
    const int64_t before = OperandRoundings();
    const auto got = search.Search(kSources);
    EXPECT_GT(OperandRoundings(), before) << DTypeName(inputs) << ": nothing was rounded";
    // The search's scores are the rounded model's (the forward pass rounds alike), a few
    // hundredths at most from float's, and not float's own.
    int same = 0, moved = 0;
    for (size_t i = 0; i < kSources.size(); ++i) {
      same += got[i][0].tokens == expected[i][0].tokens;
      moved += got[i][0].score != expected[i][0].score;
      EXPECT_NEAR(got[i][0].score, Rescore(half, kSources[i], got[i][0]), 1e-4)
          << DTypeName(inputs) << " sentence " << i;
      EXPECT_NEAR(got[i][0].score, expected[i][0].score, 5e-2) << DTypeName(inputs) << " " << i;
    }
    EXPECT_GE(same, 4) << DTypeName(inputs) << ": " << same << " of 5 as in float";
    EXPECT_GT(moved, 0) << DTypeName(inputs) << ": every score is float's";
  }
}

TEST_P(RnnDecodeTest, CudaGivesTheCpusHypotheses) {
  if (!CudaAvailable()) GTEST_SKIP() << "no CUDA GPU visible";
  auto m = MakeTinyRnn(GetParam());
  std::vector<Tensor> storage;
  const inference::Weights on_gpu = inference::CopyWeightsTo(m->weights, Device::kCuda, &storage);
  RnnModel cpu(m->config, m->weights), gpu(m->config, on_gpu);
  ASSERT_EQ(gpu.device(), Device::kCuda);
  ASSERT_TRUE(gpu.tensor_ops());
  ExpectSameSearches(cpu, gpu, 1e-3);
  inference::testing::ExpectOneWaitPerStep(gpu, kSources, {1, 3});
  // A shortlist per sentence, each sentence's columns gathered on the GPU as for a Transformer.
  std::vector<std::vector<int32_t>> translations(kVocab);
  for (int32_t t = 4; t < kVocab; ++t) translations[t] = {(t * 7) % kVocab, (t * 11) % kVocab};
  const inference::Shortlist list(kVocab, {inference::kEosId, 4}, translations);
  for (bool fused : {false, true}) {
    const inference::BeamSearchOptions options{.beam_size = 3,
                                               .n_best = 3,
                                               .fused_output = fused,
                                               .shortlist = &list,
                                               .shortlist_per_sentence = true};
    BeamSearch a(cpu, options), b(gpu, options);
    ExpectSame(a.Search(kSources), b.Search(kSources), 1e-3);
    ExpectSame(a.SearchTopUp(kSources, 2), b.SearchTopUp(kSources, 2), 1e-3);
    EXPECT_LT(b.mean_output_columns(), kVocab);
  }
  // Half products on the tensor cores against the CPU's emulation of the same rounding: the sums
  // differ in order only, so nearly every output is the same.
  for (DType inputs : {DType::kBFloat16, DType::kFloat16}) {
    inference::LinearOptions linear;
    linear.inputs = inputs;
    RnnModel cpu_half(m->config, m->weights, linear, {.tensor_ops = true});
    RnnModel gpu_half(m->config, on_gpu, linear);
    BeamSearch a(cpu_half, {.beam_size = 3, .fused_output = true});
    BeamSearch b(gpu_half, {.beam_size = 3, .fused_output = true});
    const auto expected = a.Search(kSources), got = b.Search(kSources);
    int same = 0;
    for (size_t i = 0; i < expected.size(); ++i) same += expected[i][0].tokens == got[i][0].tokens;
    EXPECT_GE(same, 4) << DTypeName(inputs) << ": " << same << " of 5 outputs as on the CPU";
  }
  // Integer products stay on the CPU, and say so.
  inference::LinearOptions quantize;
  quantize.quantize = cpu::IntType::kInt16;
  EXPECT_THROW(RnnModel(m->config, on_gpu, quantize), Error);
}

INSTANTIATE_TEST_SUITE_P(Variants, RnnDecodeTest,
                         ::testing::Values(Variant{"s2s", true, false, false},
                                           Variant{"s2s", false, true, true},
                                           Variant{"devlin", true, false, false},
                                           Variant{"devlin", false, true, true}));

TEST(RnnModelTest, AMisshapenOrMissingParameterIsAnErrorNamingIt) {
  auto m = MakeTinyRnn({"s2s", true, false, false});
  const std::pair<std::string, bool> cases[] = {{"decoder_att_Wc_att", false},
                                                {"decoder_cell2_Ux", true}};  // (name, missing)
  for (const auto& [broken, missing] : cases) {
    inference::Weights weights("test parameters");
    for (const std::string& name : m->weights.Names()) {
      if (name != broken) {
        weights.Add(name, m->weights.Get(name));
      } else if (!missing) {
        weights.Add(name, Tensor::Zeros({3, 5}));
      }
    }
    try {
      RnnModel model(m->config, weights);
      FAIL() << broken << " was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(broken), std::string::npos) << e.what();
    }
  }
}

TEST(RnnActivationsTest, ApproximationsAreWithinTwoMillionths) {
  std::vector<float> x, t, s;
  for (float v = -20.f; v <= 20.f; v += 0.001f) x.push_back(v);
  t = x;
  s = x;
  inference::TanhInPlace(t.data(), static_cast<int64_t>(t.size()), /*approx=*/true);
  inference::SigmoidInPlace(s.data(), static_cast<int64_t>(s.size()), /*approx=*/true);
  double worst_t = 0, worst_s = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    worst_t = std::max(worst_t, std::abs(t[i] - std::tanh(static_cast<double>(x[i]))));
    worst_s =
        std::max(worst_s, std::abs(s[i] - 1.0 / (1.0 + std::exp(-static_cast<double>(x[i])))));
  }
  EXPECT_LT(worst_t, 2e-6);
  EXPECT_LT(worst_s, 2e-6);
}

}  // namespace
}  // namespace tern
