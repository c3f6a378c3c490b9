// The runtime on a device. On the CPU: the tensor cache (the GPU's self-attention history,
// inference/transformer/incremental_decoder.h) and the batched fused pass give the KvCache's and
// the row-by-row pass's hypotheses, plain, top-up and greedy. On a GPU (skipped without one): a
// model whose weights were copied there gives the CPU's hypotheses (Transformer and AAN), and what
// stays on the CPU says so.
#include <gtest/gtest.h>

#include <cstdio>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "common/error.h"
#include "hypotheses.h"
#include "inference/search/beam_search.h"
#include "inference/tables/clustering.h"
#include "inference/tables/shortlist.h"
#include "inference/transformer/transformer.h"
#include "inference/translator.h"
#include "inference/vocab_tables.h"
#include "tensor/allocator.h"
#include "tensor/ops.h"
#include "tiny_model.h"

namespace tern::inference {
namespace {

using testing::ExpectSameGreedy;
using testing::ExpectSameHypotheses;
using testing::MakeTinyModel;
using testing::TinyModelSpec;

// Lengths from 2 to 12 tokens, so that top-up batching mixes old and young rows.
const std::vector<std::vector<int32_t>> kSources = {{11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 3},
                                                    {5, 9, 12, 7, 3},
                                                    {26, 3},
                                                    {8, 8, 8, 3},
                                                    {4, 5, 6, 7, 8, 9, 3},
                                                    {22, 23, 3},
                                                    {10, 3},
                                                    {14, 4, 15, 4, 16, 3},
                                                    {27, 28, 3},
                                                    {7, 6, 5, 3}};

std::string Name(int beam, bool fused, const std::string& what) {
  return what + " beam " + std::to_string(beam) + (fused ? " fused" : "");
}

// Every search of `expected_model` against the same search of `model`: plain, top-up with room
// for 3, greedy; beams 1, 3 and 10 (2 * 10 columns is wider than the GPU's top-k kernel), fused
// or not.
void ExpectSameSearches(const DecoderModel& expected_model, const DecoderModel& model,
                        bool batched_fused, double tolerance) {
  for (int beam : {1, 3, 10}) {
    for (bool fused : {false, true}) {
      BeamSearchOptions options{.beam_size = beam, .n_best = beam, .fused_output = fused};
      BeamSearch expected(expected_model, options);
      options.batched_fused = batched_fused;
      BeamSearch search(model, options);
      ExpectSameHypotheses(expected.Search(kSources), search.Search(kSources),
                           Name(beam, fused, "plain"), tolerance);
      ExpectSameHypotheses(expected.SearchTopUp(kSources, 3), search.SearchTopUp(kSources, 3),
                           Name(beam, fused, "top-up"), tolerance);
    }
  }
  BeamSearch expected(expected_model, {.beam_size = 1}), search(model, {.beam_size = 1});
  ExpectSameGreedy(expected.Greedy(kSources), search.Greedy(kSources), tolerance);
}

class DeviceDecodingVariants : public ::testing::TestWithParam<TinyModelSpec> {};

TEST_P(DeviceDecodingVariants, TensorCacheAndBatchedFusedPassGiveTheCpusHypotheses) {
  const testing::TinyModel m = MakeTinyModel(GetParam());
  Transformer kv_cache(m.config.model(), m.weights), tensors(m.config.model(), m.weights);
  tensors.set_tensor_cache(true);
  ExpectSameSearches(kv_cache, tensors, /*batched_fused=*/true, 1e-4);
}

TEST_P(DeviceDecodingVariants, CudaGivesTheCpusHypotheses) {
  if (!CudaAvailable()) GTEST_SKIP() << "no CUDA GPU visible";
  const testing::TinyModel m = MakeTinyModel(GetParam());
  std::vector<Tensor> storage;
  const Weights on_gpu = CopyWeightsTo(m.weights, Device::kCuda, &storage);
  Transformer cpu(m.config.model(), m.weights), gpu(m.config.model(), on_gpu);
  ASSERT_EQ(gpu.device(), Device::kCuda);
  ExpectSameSearches(cpu, gpu, /*batched_fused=*/false, 1e-3);
  // The first batch grows the arenas chunk by chunk; the next one's reset merges them into one
  // (an allocation); from then on, a repeated batch allocates nothing.
  BeamSearch search(gpu, {.beam_size = 4, .fused_output = true});
  search.Search(kSources);
  search.Search(kSources);
  const int64_t warm = search.system_allocations();
  search.Search(kSources);
  EXPECT_EQ(search.system_allocations(), warm) << "a repeated batch allocated device memory";
  testing::ExpectOneWaitPerStep(gpu, kSources, {1, 4});
}

// An ensemble on the GPU (a Transformer and an AAN model, both there): the CPU ensemble's
// hypotheses, fused or not, plain, topped up and greedy, with the members' mean made on the GPU:
// a fused step still waits for the GPU once.
TEST(DeviceDecodingTest, CudaEnsembleGivesTheCpusHypotheses) {
  if (!CudaAvailable()) GTEST_SKIP() << "no CUDA GPU visible";
  const testing::TinyModel a = MakeTinyModel({.eos_bias = 2.f, .seed = 7});
  const testing::TinyModel b =
      MakeTinyModel({.pre_norm = true, .eos_bias = 2.5f, .seed = 13, .aan = true});
  std::vector<Tensor> storage;
  const Weights a_gpu = CopyWeightsTo(a.weights, Device::kCuda, &storage),
                b_gpu = CopyWeightsTo(b.weights, Device::kCuda, &storage);
  const Transformer a_cpu(a.config.model(), a.weights), b_cpu(b.config.model(), b.weights),
      a_on_gpu(a.config.model(), a_gpu), b_on_gpu(b.config.model(), b_gpu);
  for (int beam : {1, 3, 10}) {
    for (bool fused : {false, true}) {
      const BeamSearchOptions options{.beam_size = beam, .n_best = beam, .fused_output = fused};
      BeamSearch cpu(a_cpu, options, {&b_cpu}), gpu(a_on_gpu, options, {&b_on_gpu});
      ExpectSameHypotheses(cpu.Search(kSources), gpu.Search(kSources),
                           Name(beam, fused, "ensemble"), 1e-3);
      ExpectSameHypotheses(cpu.SearchTopUp(kSources, 3), gpu.SearchTopUp(kSources, 3),
                           Name(beam, fused, "ensemble top-up"), 1e-3);
    }
  }
  BeamSearch cpu(a_cpu, {.beam_size = 1}, {&b_cpu}), gpu(a_on_gpu, {.beam_size = 1}, {&b_on_gpu});
  ExpectSameGreedy(cpu.Greedy(kSources), gpu.Greedy(kSources), 1e-3);
  testing::ExpectOneWaitPerStep(a_on_gpu, kSources, {1, 4}, {&b_on_gpu});
}

// The GPU's fused kernel breaks exact ties as the unfused search does (to the lower column):
// over an ensemble of twin-token models the fused and unfused GPU searches give the same bits.
TEST(DeviceDecodingTest, CudaFusedPassBreaksTiesAsTheUnfusedSearch) {
  if (!CudaAvailable()) GTEST_SKIP() << "no CUDA GPU visible";
  const testing::TinyModel a = MakeTinyModel({.eos_bias = 1.f, .seed = 7, .twins = true});
  const testing::TinyModel b =
      MakeTinyModel({.pre_norm = true, .eos_bias = 1.f, .seed = 13, .aan = true, .twins = true});
  std::vector<Tensor> storage;
  const Weights a_gpu = CopyWeightsTo(a.weights, Device::kCuda, &storage),
                b_gpu = CopyWeightsTo(b.weights, Device::kCuda, &storage);
  const Transformer ma(a.config.model(), a_gpu), mb(b.config.model(), b_gpu);
  for (int beam : {2, 4, 6}) {
    BeamSearch unfused(ma, {.beam_size = beam, .n_best = beam}, {&mb});
    BeamSearch fused(ma, {.beam_size = beam, .n_best = beam, .fused_output = true}, {&mb});
    ExpectSameHypotheses(unfused.Search(kSources), fused.Search(kSources),
                         Name(beam, true, "twins ensemble"), 0.0);
  }
}

// At batch 1 a GPU decoder step costs what its launches cost, so it launches only what it needs:
// a decoder layer's heads split and merged as views (one position a step), each sublayer's
// residual added in its last product (Linear's residual), the self-attention's queries, keys and
// values one product (the stacked weights) and its cache one append (keys and values together),
// each attention one op (Attend), the feed-forward activation in its first product (GemmBias'
// activation), at beam 1: per layer 3 layer norms; the self-attention's product, append,
// attention and output product; the cross-attention's query product, attention and output
// product; the feed-forward's 2 products.
TEST(DeviceDecodingTest, CudaStepLaunchesTwelveOpsALayerAtBeamOne) {
  if (!CudaAvailable()) GTEST_SKIP() << "no CUDA GPU visible";
  const testing::TinyModel m = MakeTinyModel({.dec_depth = 3, .eos_bias = 2.f});
  std::vector<Tensor> storage;
  const Weights on_gpu = CopyWeightsTo(m.weights, Device::kCuda, &storage);
  const Transformer gpu(m.config.model(), on_gpu);
  BeamSearch search(gpu, {.beam_size = 1, .fused_output = true});
  const std::vector<std::vector<int32_t>> one = {kSources[0]};
  search.Search(one);  // warm
  const int64_t steps = search.decoder_steps(), ops = DeviceOps();
  search.Search(one);
  const double per_step =
      static_cast<double>(DeviceOps() - ops) / static_cast<double>(search.decoder_steps() - steps);
  // The embedding, its positions and the output layer's few besides, and 3 copies (the step's
  // ids and key mask up, its best columns down); the encoder's ops come once a batch, a fraction
  // of one a step.
  EXPECT_LE(per_step, 12 * 3 + 8 + 3) << "ops per decoder step";
  std::printf("device ops per decoder step: %.2f\n", per_step);
}

INSTANTIATE_TEST_SUITE_P(
    Runtime, DeviceDecodingVariants,
    ::testing::Values(
        TinyModelSpec{.eos_bias = 2.f}, TinyModelSpec{.eos_bias = 1.f, .emb_scale = 1.f},
        TinyModelSpec{.tied = false,
                      .pre_norm = true,
                      .activation = "gelu",
                      .vocab = 300,
                      .dim = 64,
                      .heads = 8,
                      .ffn = 96,
                      .eos_bias = 1.5f},
        // Swish after the product (no epilogue has it).
        TinyModelSpec{.activation = "swish", .eos_bias = 2.f},
        // Vaswani's positions: the device's table of them.
        TinyModelSpec{.positions = "vaswani", .layer_norm_eps = 1e-5f, .eos_bias = 2.f},
        // AAN: the running sums on the device.
        TinyModelSpec{.eos_bias = 2.f, .aan = true},
        TinyModelSpec{.pre_norm = true, .eos_bias = 2.f, .aan = true, .aan_ffn = false},
        TinyModelSpec{.tied = false, .eos_bias = 2.5f, .aan = true, .aan_gate = false}),
    [](const ::testing::TestParamInfo<TinyModelSpec>& info) {
      return std::string(info.param.aan ? "Aan" : "") +
             (info.param.pre_norm ? "PreNorm" : "PostNorm") + std::to_string(info.index);
    });

TEST(DeviceDecodingTest, TensorCacheNeedsNoNewMemoryOnceBatchesRepeat) {
  const testing::TinyModel m = MakeTinyModel({.eos_bias = 1.f});
  Transformer model(m.config.model(), m.weights);
  model.set_tensor_cache(true);
  BeamSearch search(model, {.beam_size = 3, .fused_output = true, .batched_fused = true});
  search.SearchTopUp(kSources, 4);
  search.SearchTopUp(kSources, 4);
  const int64_t warm = search.system_allocations();
  search.SearchTopUp(kSources, 4);
  EXPECT_EQ(search.system_allocations(), warm);
}

TEST(DeviceDecodingTest, CudaWithoutAGpuIsOneClearError) {
  if (CudaAvailable()) GTEST_SKIP() << "a GPU is visible";
  const testing::TinyModel m = MakeTinyModel({});
  TranslatorOptions options;
  options.device = Device::kCuda;
  try {
    Translator translator(m.config.model(), m.weights, nullptr, options);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--device cuda: no CUDA GPU is visible"),
              std::string::npos)
        << e.what();
  }
}

TEST(DeviceDecodingTest, CudaClustersPickTheCpusAndWaitTwiceAStepAloneOrInAnEnsemble) {
  if (!CudaAvailable()) GTEST_SKIP() << "no CUDA GPU visible";
  const testing::TinyModel m = MakeTinyModel({.eos_bias = 2.f, .emb_scale = 1.f});
  std::vector<Tensor> storage;
  const Weights on_gpu = CopyWeightsTo(m.weights, Device::kCuda, &storage);
  Transformer cpu(m.config.model(), m.weights), gpu(m.config.model(), on_gpu);
  const VocabClusters clusters = BuildVocabClusters(cpu, kSources, {.clusters = 3, .top = 4});
  const BeamSearchOptions options{.beam_size = 4, .fused_output = true, .clusters = &clusters};
  BeamSearch a(cpu, options), b(gpu, options);
  ExpectSameHypotheses(a.SearchTopUp(kSources, 4), b.SearchTopUp(kSources, 4), "clusters", 1e-3);
  EXPECT_EQ(a.mean_output_columns(), b.mean_output_columns());
  EXPECT_LT(b.mean_output_columns(), gpu.vocab_size());  // a real restriction
  // Per step: the nearest clusters come down (the host takes the union of their sets) and the
  // best columns; the union's columns go up without a wait.
  b.Search(kSources);  // warm: the position table grown
  const int64_t steps = b.decoder_steps(), drains = DeviceDrains();
  b.Search(kSources);
  EXPECT_LE(DeviceDrains() - drains, 2 * (b.decoder_steps() - steps) + 2);
  // In an ensemble the first model's states choose, and every member is restricted to the union:
  // the CPU's hypotheses, and still two waits a step.
  const testing::TinyModel other =
      MakeTinyModel({.pre_norm = true, .eos_bias = 2.f, .seed = 13, .emb_scale = 1.f});
  const Weights other_gpu = CopyWeightsTo(other.weights, Device::kCuda, &storage);
  Transformer other_cpu(other.config.model(), other.weights),
      other_on_gpu(other.config.model(), other_gpu);
  for (bool fused : {false, true}) {
    BeamSearchOptions ensemble_options = options;
    ensemble_options.fused_output = fused;
    BeamSearch c(cpu, ensemble_options, {&other_cpu}), g(gpu, ensemble_options, {&other_on_gpu});
    ExpectSameHypotheses(c.SearchTopUp(kSources, 4), g.SearchTopUp(kSources, 4),
                         fused ? "ensemble clusters fused" : "ensemble clusters", 1e-3);
    EXPECT_EQ(c.mean_output_columns(), g.mean_output_columns());
    g.Search(kSources);
    const int64_t ensemble_steps = g.decoder_steps(), ensemble_drains = DeviceDrains();
    g.Search(kSources);
    EXPECT_LE(DeviceDrains() - ensemble_drains, 2 * (g.decoder_steps() - ensemble_steps) + 2);
  }
}

TEST(DeviceDecodingTest, CudaShortlistAndHalfPrecision) {
  if (!CudaAvailable()) GTEST_SKIP() << "no CUDA GPU visible";
  const testing::TinyModel m = MakeTinyModel({.vocab = 300, .dim = 64, .heads = 8, .ffn = 96});
  std::vector<Tensor> storage;
  const Weights on_gpu = CopyWeightsTo(m.weights, Device::kCuda, &storage);
  // A shortlist of every other token (the union per batch).
  std::vector<int32_t> frequent;
  for (int32_t t = 3; t < 300; t += 2) frequent.push_back(t);
  const Shortlist list(300, frequent, std::vector<std::vector<int32_t>>(300));
  Transformer cpu(m.config.model(), m.weights), gpu(m.config.model(), on_gpu);
  for (bool fused : {false, true}) {
    BeamSearchOptions options{.beam_size = 4, .fused_output = fused, .shortlist = &list};
    BeamSearch a(cpu, options), b(gpu, options);
    ExpectSameHypotheses(a.SearchTopUp(kSources, 4), b.SearchTopUp(kSources, 4), "shortlist", 1e-3);
  }
  // bf16 products on the tensor cores against the CPU's emulation of the same rounding: the
  // sums differ in order only, so nearly every output is the same.
  for (DType inputs : {DType::kBFloat16, DType::kFloat16}) {
    LinearOptions linear;
    linear.inputs = inputs;
    Transformer cpu_half(m.config.model(), m.weights, linear);
    Transformer gpu_half(m.config.model(), on_gpu, linear);
    BeamSearch a(cpu_half, {.beam_size = 4, .fused_output = true});
    BeamSearch b(gpu_half, {.beam_size = 4, .fused_output = true});
    const auto expected = a.Search(kSources), got = b.Search(kSources);
    int same = 0;
    for (size_t i = 0; i < expected.size(); ++i) same += expected[i][0].tokens == got[i][0].tokens;
    EXPECT_GE(same, 8) << DTypeName(inputs) << ": " << same << " of 10 outputs as on the CPU";
  }
}

// A shortlist per sentence on the GPU: each sentence's columns gathered there, its rows
// multiplied by them in one batched product, the fused pass keeping two more per row for the host
// to drop the group's pad, bos and padding. The CPU's hypotheses, single or in an ensemble, plain
// and topped up, fused or not, and at beam 8 (too wide for the kernel with those two); one wait a
// step.
TEST(DeviceDecodingTest, CudaShortlistPerSentenceGivesTheCpusHypotheses) {
  if (!CudaAvailable()) GTEST_SKIP() << "no CUDA GPU visible";
  const testing::TinyModel a = MakeTinyModel({.vocab = 300, .dim = 32, .eos_bias = 2.f});
  const testing::TinyModel b =
      MakeTinyModel({.pre_norm = true, .vocab = 300, .dim = 32, .eos_bias = 2.f, .seed = 13});
  std::vector<Tensor> storage;
  const Weights a_gpu = CopyWeightsTo(a.weights, Device::kCuda, &storage),
                b_gpu = CopyWeightsTo(b.weights, Device::kCuda, &storage);
  const Transformer a_cpu(a.config.model(), a.weights), b_cpu(b.config.model(), b.weights),
      a_on_gpu(a.config.model(), a_gpu), b_on_gpu(b.config.model(), b_gpu);
  // Lists of different lengths, some with unk (token 1, before bos: bos's column moves).
  std::vector<std::vector<int32_t>> translations(300);
  for (int32_t s = 4; s < 29; ++s) {
    translations[s] = {s + 30, s + 60, 100 + (s * 13) % 150};
    if (s % 3 == 0) translations[s].push_back(1);
    if (s % 4 == 0) translations[s].push_back(250 + s);
  }
  const Shortlist list(300, {kEosId, 10, 11}, translations);
  for (bool ensemble : {false, true}) {
    const std::vector<const DecoderModel*> on_cpu =
        ensemble ? std::vector<const DecoderModel*>{&b_cpu} : std::vector<const DecoderModel*>{};
    const std::vector<const DecoderModel*> on_gpu =
        ensemble ? std::vector<const DecoderModel*>{&b_on_gpu} : std::vector<const DecoderModel*>{};
    for (int beam : {1, 3, 7, 8}) {
      for (bool fused : {false, true}) {
        const BeamSearchOptions options{.beam_size = beam,
                                        .n_best = beam,
                                        .fused_output = fused,
                                        .shortlist = &list,
                                        .shortlist_per_sentence = true};
        BeamSearch cpu(a_cpu, options, on_cpu), gpu(a_on_gpu, options, on_gpu);
        const std::string what = std::string(ensemble ? "ensemble " : "") + "per sentence";
        ExpectSameHypotheses(cpu.Search(kSources), gpu.Search(kSources), Name(beam, fused, what),
                             1e-3);
        ExpectSameHypotheses(cpu.SearchTopUp(kSources, 3), gpu.SearchTopUp(kSources, 3),
                             Name(beam, fused, what + " top-up"), 1e-3);
        EXPECT_EQ(cpu.mean_output_columns(), gpu.mean_output_columns());
        EXPECT_LT(gpu.mean_output_columns(), 32.0);  // each sentence's few of 300 columns
      }
    }
    // One step at beam 7: a sentence has fewer producible columns than the 14 the pass keeps, so
    // the rest of them are its padding, which must not become hypotheses.
    const BeamSearchOptions one_step{.beam_size = 7,
                                     .n_best = 7,
                                     .max_length_cap = 1,
                                     .fused_output = true,
                                     .shortlist = &list,
                                     .shortlist_per_sentence = true};
    BeamSearch cpu(a_cpu, one_step, on_cpu), gpu(a_on_gpu, one_step, on_gpu);
    ExpectSameHypotheses(cpu.Search(kSources), gpu.Search(kSources), "one step", 1e-3);
    // Warm, a step waits for the GPU once: the groups' tokens and biases go up without a wait.
    for (bool top_up : {false, true}) {
      BeamSearch warm(a_on_gpu,
                      {.beam_size = 4,
                       .fused_output = true,
                       .shortlist = &list,
                       .shortlist_per_sentence = true},
                      on_gpu);
      auto search = [&] { top_up ? warm.SearchTopUp(kSources, 2) : warm.Search(kSources); };
      search();
      const int64_t steps = warm.decoder_steps(), drains = DeviceDrains();
      search();
      EXPECT_LE(DeviceDrains() - drains, warm.decoder_steps() - steps)
          << (top_up ? "topped up" : "plain") << (ensemble ? ", ensemble" : "");
    }
  }
}

// With bf16 products a GPU's weight matrices are rounded once, at load: a step rounds only its
// activations. Before, every product converted its weights again (the output layer's E alone,
// every step), a launch and a pass over them per product.
TEST(DeviceDecodingTest, CudaHalfPrecisionRoundsTheWeightsOnceAtLoad) {
  if (!CudaAvailable()) GTEST_SKIP() << "no CUDA GPU visible";
  const testing::TinyModel m = MakeTinyModel({.vocab = 300, .dim = 64, .heads = 8, .ffn = 96});
  std::vector<Tensor> storage;
  const Weights on_gpu = CopyWeightsTo(m.weights, Device::kCuda, &storage);
  LinearOptions linear;
  linear.inputs = DType::kBFloat16;
  const Transformer gpu(m.config.model(), on_gpu, linear), cpu(m.config.model(), m.weights, linear);
  auto roundings_per_step = [](const Transformer& model) {
    BeamSearch search(model, {.beam_size = 1, .fused_output = true});
    const std::vector<std::vector<int32_t>> one = {kSources[0]};
    search.Search(one);  // warm
    const int64_t steps = search.decoder_steps(), rounded = OperandRoundings();
    search.Search(one);
    return static_cast<double>(OperandRoundings() - rounded) /
           static_cast<double>(search.decoder_steps() - steps);
  };
  const double table = 300.0 * 64;  // the output layer's E (V, d)
  EXPECT_GT(roundings_per_step(cpu), table) << "the CPU's emulation rounds every product's weights";
  const double gpu_roundings = roundings_per_step(gpu);
  EXPECT_LT(gpu_roundings, table / 4) << "a GPU step rounded a weight matrix";
  std::printf("elements rounded per bf16 decoder step: %.1f\n", gpu_roundings);
}

TEST(DeviceDecodingTest, WhatStaysOnTheCpuSaysSo) {
  if (!CudaAvailable()) GTEST_SKIP() << "no CUDA GPU visible";
  std::vector<Tensor> storage;
  const testing::TinyModel m = MakeTinyModel({});
  const Weights gpu_weights = CopyWeightsTo(m.weights, Device::kCuda, &storage);
  LinearOptions quantize;
  quantize.quantize = cpu::IntType::kInt16;
  EXPECT_THROW(Transformer(m.config.model(), gpu_weights, quantize), Error);
  Transformer gpu(m.config.model(), gpu_weights), cpu(m.config.model(), m.weights);
  EXPECT_THROW(BeamSearch(gpu, {.beam_size = 2}, {&cpu}), Error);  // an ensemble on two devices
}

}  // namespace
}  // namespace tern::inference
