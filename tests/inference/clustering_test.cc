// Vocabulary clustering: built by decoding with a tiny model; every cluster's set holds the top
// tokens of its states; the tables survive the model file; clusters that hold every token give
// the unrestricted search's hypotheses, and restricted ones keep outputs inside the union, for one
// model or an ensemble (the first model's states choose).
#include "inference/tables/clustering.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "common/error.h"
#include "inference/search/beam_search.h"
#include "inference/transformer/transformer.h"
#include "inference/vocab_tables.h"
#include "tiny_model.h"

namespace tern::inference {
namespace {

const std::vector<std::vector<int32_t>> kSources = {
    {5, 9, 12, 7, 3}, {8, 3}, {4, 4, 6, 10, 11, 13, 20, 3}, {17, 18, 3}, {25, 3}, {6, 7, 8, 9, 3}};

TEST(ClusteringTest, ClustersHoldingEveryTokenChangeNothing) {
  testing::TinyModel m = testing::MakeTinyModel({.eos_bias = 2.f});
  Transformer model(m.config.model(), m.weights);
  VocabClusters clusters = BuildVocabClusters(
      model, kSources, {.clusters = 4, .top = static_cast<int>(model.vocab_size()) - 2});
  EXPECT_EQ(clusters.clusters(), 4);
  // Alone, and in an ensemble with another model (the first model's states choose, every member
  // is restricted).
  testing::TinyModel other =
      testing::MakeTinyModel({.pre_norm = true, .eos_bias = 2.f, .seed = 13});
  Transformer second(other.config.model(), other.weights);
  for (const auto& members :
       {std::vector<const DecoderModel*>{}, std::vector<const DecoderModel*>{&second}}) {
    for (bool fused : {false, true}) {
      BeamSearch plain(model, {.beam_size = 3, .n_best = 3}, members);
      BeamSearch clustered(
          model, {.beam_size = 3, .n_best = 3, .fused_output = fused, .clusters = &clusters},
          members);
      auto a = plain.Search(kSources), b = clustered.Search(kSources);
      for (size_t i = 0; i < kSources.size(); ++i) {
        ASSERT_EQ(a[i].size(), b[i].size());
        for (size_t j = 0; j < a[i].size(); ++j) {
          EXPECT_EQ(a[i][j].tokens, b[i][j].tokens) << members.size() + 1 << " model(s)";
          EXPECT_NEAR(a[i][j].score, b[i][j].score, 1e-4);
        }
      }
    }
  }
}

TEST(ClusteringTest, SmallSetsRestrictAndSurviveTheModelFileTables) {
  testing::TinyModel m = testing::MakeTinyModel({.eos_bias = 2.f, .emb_scale = 1.f});
  Transformer model(m.config.model(), m.weights);
  VocabClusters clusters = BuildVocabClusters(model, kSources, {.clusters = 3, .top = 2});
  int64_t total = 0;
  for (int64_t c = 0; c < clusters.clusters(); ++c) total += clusters.set_size(c);
  EXPECT_LT(total, 3 * (model.vocab_size() - 2));  // a real restriction

  Weights w("clusters");
  std::vector<NamedTensor> tensors = clusters.ToTensors();
  for (const NamedTensor& t : tensors) w.Add(t.name, t.tensor);
  std::unique_ptr<VocabClusters> read =
      VocabClusters::FromWeights(w, model.vocab_size(), model.dim());
  ASSERT_NE(read, nullptr);
  Tensor x = Tensor::FromVector({2, model.dim()}, std::vector<float>(2 * model.dim(), 0.2f));
  x.f32()[model.dim()] = 3.f;
  std::vector<int32_t> a, b;
  clusters.Select(x, &a);
  read->Select(x, &b);
  EXPECT_EQ(a, b);
  EXPECT_TRUE(std::binary_search(a.begin(), a.end(), kEosId));
  EXPECT_EQ(VocabClusters::FromWeights(m.weights, model.vocab_size(), model.dim()), nullptr);
  EXPECT_THROW(VocabClusters::FromWeights(w, model.vocab_size(), model.dim() + 1), Error);

  // The GPU's way of choosing the clusters (a product with the centroids, then the fused pass's
  // argmax) picks the host's.
  for (bool fused : {false, true}) {
    BeamSearchOptions options{
        .beam_size = 3, .n_best = 3, .fused_output = fused, .clusters = &clusters};
    BeamSearch host(model, options);
    options.batched_fused = true;
    BeamSearch device_way(model, options);
    const auto a = host.SearchTopUp(kSources, 2), b = device_way.SearchTopUp(kSources, 2);
    for (size_t i = 0; i < kSources.size(); ++i) {
      ASSERT_EQ(a[i].size(), b[i].size());
      for (size_t j = 0; j < a[i].size(); ++j) EXPECT_EQ(a[i][j].tokens, b[i][j].tokens);
    }
    EXPECT_EQ(host.mean_output_columns(), device_way.mean_output_columns());
  }

  // Every output token is in some cluster's set, alone or in an ensemble (whose other member
  // would pick other tokens unrestricted).
  const Tensor& ids = tensors[2].tensor;
  std::vector<int32_t> any(ids.i32(), ids.i32() + ids.numel());
  std::sort(any.begin(), any.end());
  testing::TinyModel other =
      testing::MakeTinyModel({.pre_norm = true, .eos_bias = 2.f, .seed = 13, .emb_scale = 1.f});
  Transformer second(other.config.model(), other.weights);
  for (const auto& members :
       {std::vector<const DecoderModel*>{}, std::vector<const DecoderModel*>{&second}}) {
    BeamSearch search(model, {.beam_size = 2, .n_best = 2, .clusters = &clusters}, members);
    for (const auto& hyps : search.Search(kSources)) {
      ASSERT_FALSE(hyps.empty());
      for (const Hypothesis& h : hyps) {
        for (int32_t token : h.tokens) {
          EXPECT_TRUE(std::binary_search(any.begin(), any.end(), token))
              << token << ", " << members.size() + 1 << " model(s)";
        }
      }
    }
    EXPECT_LT(search.mean_output_columns(), model.vocab_size());
  }
}

}  // namespace
}  // namespace tern::inference
