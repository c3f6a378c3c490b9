// The runtime Transformer against a plain-loop reference, and incremental decoding (with cache
// reordering and dropped sentences) against the full-sequence ForwardLogits.
#include "inference/transformer/transformer.h"

#include <gtest/gtest.h>

#include <random>

#include "common/error.h"
#include "inference/transformer/incremental_decoder.h"
#include "tensor/arena.h"
#include "tensor/ops.h"
#include "tiny_model.h"

namespace tern::inference {
namespace {

using testing::MakeTinyModel;
using testing::TinyModel;
using testing::TinyModelSpec;

struct Batch {
  Tensor src, mask;  // (B, S)
};

Batch MakeBatch(const std::vector<std::vector<int32_t>>& sources) {
  size_t s = 0;
  for (const auto& x : sources) s = std::max(s, x.size());
  const int64_t b = sources.size();
  Batch batch{Tensor::Zeros({b, static_cast<int64_t>(s)}, DType::kInt32),
              Tensor::Zeros({b, static_cast<int64_t>(s)})};
  for (int64_t i = 0; i < b; ++i)
    for (size_t j = 0; j < sources[i].size(); ++j) {
      batch.src.i32()[i * s + j] = sources[i][j];
      batch.mask.f32()[i * s + j] = 1.f;
    }
  return batch;
}

Tensor Ids(const std::vector<std::vector<int32_t>>& rows) {
  const int64_t t = rows[0].size();
  Tensor ids = Tensor::Zeros({static_cast<int64_t>(rows.size()), t}, DType::kInt32);
  for (size_t i = 0; i < rows.size(); ++i)
    for (int64_t j = 0; j < t; ++j) ids.i32()[i * t + j] = rows[i][j];
  return ids;
}

const std::vector<std::vector<int32_t>> kSources = {
    {5, 9, 12, 7, 3}, {8, 3}, {4, 4, 6, 10, 11, 13, 20, 3}};

class TransformerVariants : public ::testing::TestWithParam<TinyModelSpec> {};

TEST_P(TransformerVariants, ForwardLogitsMatchesTheReferenceAndIgnoresPadding) {
  TinyModel m = MakeTinyModel(GetParam());
  Transformer model(m.config.model(), m.weights);
  Batch batch = MakeBatch(kSources);
  std::vector<std::vector<int32_t>> tgt = {{2, 6, 7, 8}, {2, 9, 3, 0}, {2, 14, 15, 16}};
  Arena arena;
  Tensor logits = model.ForwardLogits(batch.src, batch.mask, Ids(tgt), arena);
  ASSERT_EQ(logits.shape(), Shape({3, 4, model.vocab_size()}));
  const int64_t v = model.vocab_size();
  for (size_t i = 0; i < kSources.size(); ++i) {
    std::vector<float> ref = testing::ReferenceLogits(m, kSources[i], tgt[i]);
    for (int64_t k = 0; k < 4 * v; ++k) {
      ASSERT_NEAR(logits.at(i * 4 * v + k), ref[k], 1e-4) << "sentence " << i << " entry " << k;
    }
  }
}

// Drives the incremental decoder with `beam` rows per sentence, random parents and tokens, drops
// a sentence half-way, and checks each step's logits against ForwardLogits of each row's history.
TEST_P(TransformerVariants, IncrementalDecodingEqualsForwardLogitsAtEveryPosition) {
  TinyModel m = MakeTinyModel(GetParam());
  Transformer model(m.config.model(), m.weights);
  const int beam = 3;
  Batch batch = MakeBatch(kSources);
  Arena enc_arena;
  Tensor encoded = model.Encode(batch.src, batch.mask, enc_arena);
  IncrementalDecoder decoder(model);
  decoder.Start(encoded, batch.mask, beam);
  enc_arena.Reset();  // the decoder must not need the encoder's arena any more

  std::mt19937 rng(3);
  std::vector<int32_t> sentence_of;  // original sentence of each current sentence
  for (size_t i = 0; i < kSources.size(); ++i) sentence_of.push_back(i);
  std::vector<std::vector<int32_t>> history(kSources.size() * beam, {kBosId});
  std::vector<int32_t> prev(history.size(), kBosId), parents(history.size());
  const int64_t v = model.vocab_size();
  for (int step = 0; step < 7; ++step) {
    IncrementalDecoder::StepOutput out = decoder.Step(prev, parents);
    // The reference: ForwardLogits over every row's full history.
    std::vector<std::vector<int32_t>> row_sources;
    for (size_t r = 0; r < history.size(); ++r)
      row_sources.push_back(kSources[sentence_of[r / beam]]);
    Batch rows = MakeBatch(row_sources);
    Arena arena;
    Tensor full = model.ForwardLogits(rows.src, rows.mask, Ids(history), arena);
    const int64_t t = step + 1;
    for (size_t r = 0; r < history.size(); ++r)
      for (int64_t k = 0; k < v; ++k) {
        ASSERT_NEAR(out.logits.at(r * v + k), full.at((r * t + step) * v + k), 1e-4)
            << "step " << step << " row " << r;
      }
    // Drop the middle sentence after step 3.
    std::vector<int32_t> keep;
    for (size_t i = 0; i < sentence_of.size(); ++i)
      if (!(step == 3 && i == 1)) keep.push_back(i);
    if (keep.size() != sentence_of.size()) decoder.KeepSentences(keep);
    std::vector<std::vector<int32_t>> next_history;
    std::vector<int32_t> next_sentence_of;
    prev.clear();
    parents.clear();
    for (int32_t i : keep) {
      next_sentence_of.push_back(sentence_of[i]);
      for (int j = 0; j < beam; ++j) {
        const int32_t parent = i * beam + static_cast<int32_t>(rng() % beam);
        const int32_t token = 4 + static_cast<int32_t>(rng() % (v - 4));
        next_history.push_back(history[parent]);
        next_history.back().push_back(token);
        parents.push_back(parent);
        prev.push_back(token);
      }
    }
    history = next_history;
    sentence_of = next_sentence_of;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Runtime, TransformerVariants,
    ::testing::Values(TinyModelSpec{},
                      TinyModelSpec{.tied = false, .pre_norm = true, .activation = "gelu"},
                      TinyModelSpec{.tied = true, .pre_norm = false, .activation = "swish"},
                      // Hugging Face's Marian port: Vaswani's timescales, PyTorch's epsilon.
                      TinyModelSpec{.tied = true,
                                    .pre_norm = false,
                                    .activation = "swish",
                                    .positions = "vaswani",
                                    .layer_norm_eps = 1e-5f},
                      TinyModelSpec{.tied = true, .pre_norm = true, .heads = 2, .dec_depth = 1}),
    [](const ::testing::TestParamInfo<TinyModelSpec>& info) {
      const TinyModelSpec& s = info.param;
      return std::string(s.tied ? "Tied" : "Untied") + (s.pre_norm ? "PreNorm" : "PostNorm") +
             (s.activation == "gelu"    ? "Gelu"
              : s.activation == "swish" ? "Swish"
                                        : "Relu") +
             (s.positions == "vaswani" ? "Vaswani" : "") + std::to_string(s.heads) + "Heads";
    });

TEST(TransformerTest, ParameterShapesListExactlyWhatTheRuntimeReads) {
  for (TinyModelSpec spec : {TinyModelSpec{}, TinyModelSpec{.tied = false, .pre_norm = true}}) {
    TinyModel m = MakeTinyModel(spec);
    auto shapes = TransformerParameterShapes(m.config.model(), spec.vocab);
    ASSERT_EQ(shapes.size(), m.weights.size());
    for (const auto& [name, shape] : shapes) {
      EXPECT_EQ(m.weights.Get(name).shape(), shape) << name;
    }
  }
}

TEST(TransformerTest, MissingOrMisshapenParameterIsAnErrorNamingIt) {
  TinyModel m = MakeTinyModel({});
  Weights missing("model.tern");
  for (const NamedTensor& t : m.tensors)
    if (t.name != "decoder_l2_ffn_W2") missing.Add(t.name, t.tensor);
  try {
    Transformer model(m.config.model(), missing);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("decoder_l2_ffn_W2"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("model.tern"), std::string::npos) << e.what();
  }
  Weights wrong("model.tern");
  for (const NamedTensor& t : m.tensors) {
    wrong.Add(t.name, t.name == "encoder_l1_self_bq" ? t.tensor.Slice(0, 8) : t.tensor);
  }
  try {
    Transformer model(m.config.model(), wrong);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("encoder_l1_self_bq"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tern::inference
