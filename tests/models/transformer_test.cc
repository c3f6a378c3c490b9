#include "models/transformer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "model_checks.h"

namespace tern::models {
namespace {

using testing::ExpectGradientsMatchFiniteDifferences;
using testing::ExpectGradientStepsLowerTheLoss;
using testing::ExpectOperandsRoundedOnceChangeNothing;
using testing::ExpectPaddingDoesNotChangeTheOtherSentence;

config::ModelConfig TinyConfig(bool pre_norm, bool tied) {
  config::ModelConfig c;
  c.set_arch("transformer");
  c.set_emb_dim(16);
  c.set_ffn_dim(32);
  c.set_heads(2);
  c.set_enc_depth(2);
  c.set_dec_depth(2);
  c.set_tied_embeddings(tied);
  c.set_pre_norm(pre_norm);
  c.set_ffn_activation("gelu");  // smooth, so finite differences see no kinks
  c.set_max_length(32);
  return c;
}

TEST(TransformerTest, TransformerBaseHasTheExpectedParameterCount) {
  config::ModelConfig c = TinyConfig(false, true);
  c.set_emb_dim(512);
  c.set_ffn_dim(2048);
  c.set_heads(8);
  c.set_enc_depth(6);
  c.set_dec_depth(6);
  graph::ParamStore store;
  Transformer(c, 32000).AddParams(&store);
  int64_t n = 0;
  for (int i = 0; i < store.size(); ++i) n += store.info(i).shape.numel();
  // 6 encoder layers of 3.15M, 6 decoder layers of 4.20M, 32k x 512 embeddings, output bias.
  EXPECT_EQ(n, 18914304 + 25224192 + 16384000 + 32000);
}

// The standard deviation of a parameter's initial values.
double InitialStd(const config::ModelConfig& c, int vocab, const std::string& name) {
  graph::ParamStore store;
  Transformer(c, vocab).AddParams(&store);
  store.Finalize(Device::kCpu, /*seed=*/1234);
  const Tensor v = store.value(name);
  double sum = 0, squares = 0;
  for (int64_t i = 0; i < v.numel(); ++i) {
    sum += v.f32()[i];
    squares += double{v.f32()[i]} * v.f32()[i];
  }
  const double mean = sum / v.numel();
  return std::sqrt(squares / v.numel() - mean * mean);
}

// sqrt(d) x E starts at unit scale (N(0, d^-1/2)), as in Vaswani et al. and fairseq; Glorot over
// (V, d), Marian's, started it 4x smaller at V 8k, d 256, and the model learned less per update.
TEST(TransformerTest, EmbeddingsStartAtUnitScaleAfterTheirSqrtDScaling) {
  config::ModelConfig c = TinyConfig(true, true);
  c.set_emb_dim(64);
  c.set_heads(4);
  EXPECT_NEAR(InitialStd(c, 8000, "Wemb") * std::sqrt(64.0), 1.0, 0.02);
  c.set_tied_embeddings(false);
  EXPECT_NEAR(InitialStd(c, 8000, "encoder_Wemb") * std::sqrt(64.0), 1.0, 0.02);
  EXPECT_NEAR(InitialStd(c, 8000, "decoder_Wemb") * std::sqrt(64.0), 1.0, 0.02);
  // Marian's choice stays available: uniform with limit sqrt(6 / (V + d)).
  c.set_embedding_init("glorot");
  EXPECT_NEAR(InitialStd(c, 8000, "encoder_Wemb"), std::sqrt(6.0 / 8064) / std::sqrt(3.0), 2e-4);
}

// fairseq starts q, k and v at Glorot's limit x 1/sqrt(2) and the output projection at Glorot's.
TEST(TransformerTest, ScaledAttentionInitShrinksQKVOnly) {
  config::ModelConfig c = TinyConfig(true, true);
  c.set_emb_dim(64);
  c.set_heads(4);
  const double glorot = std::sqrt(6.0 / 128) / std::sqrt(3.0);  // the std of U(-l, l), (64, 64)
  for (const char* w : {"_Wq", "_Wk", "_Wv", "_Wo"}) {
    EXPECT_NEAR(InitialStd(c, 100, std::string("encoder_l1_self") + w), glorot, 0.01) << w;
  }
  c.set_attention_init("scaled");
  for (const char* w : {"_Wq", "_Wk", "_Wv"}) {
    EXPECT_NEAR(InitialStd(c, 100, std::string("decoder_l1_context") + w), glorot / std::sqrt(2.0),
                0.01)
        << w;
  }
  EXPECT_NEAR(InitialStd(c, 100, "decoder_l1_context_Wo"), glorot, 0.01);
}

TEST(TransformerTest, PaddingDoesNotChangeTheOtherSentence) {
  ExpectPaddingDoesNotChangeTheOtherSentence(Transformer(TinyConfig(false, true), 12));
}

// Finite differences of the whole model on a sample of parameters.
TEST(TransformerTest, WholeModelGradientMatchesFiniteDifferences) {
  for (bool pre_norm : {false, true})
    for (bool tied : {true, false})
      ExpectGradientsMatchFiniteDifferences(
          Transformer(TinyConfig(pre_norm, tied), 12), 5, 40,
          "pre_norm=" + std::to_string(pre_norm) + " tied=" + std::to_string(tied));
}

TEST(TransformerTest, MixedPrecisionRoundsEachOperandOnceWithTheSameResult) {
  ExpectOperandsRoundedOnceChangeNothing(Transformer(TinyConfig(true, true), 12), 0.6);
  ExpectOperandsRoundedOnceChangeNothing(Transformer(TinyConfig(false, false), 12), 0.6);
}

TEST(TransformerTest, GradientStepsLowerTheLoss) {
  ExpectGradientStepsLowerTheLoss(Transformer(TinyConfig(true, true), 12), 0.05f, 0.3);
}

config::ModelConfig TinyAan(bool ffn, bool gate) {
  config::ModelConfig c = TinyConfig(false, true);
  c.set_arch("aan");
  c.set_aan_no_ffn(!ffn);
  c.set_aan_no_gate(!gate);
  return c;
}

TEST(AanTest, DecoderLayersHaveAanParametersInsteadOfSelfAttention) {
  graph::ParamStore store;
  Transformer(TinyAan(true, true), 12).AddParams(&store);
  for (const char* name :
       {"decoder_l1_aan_W1", "decoder_l1_aan_b2", "decoder_l2_aan_Wi", "decoder_l2_aan_bf",
        "decoder_l1_aan_ln_scale", "decoder_l1_context_Wq", "encoder_l1_self_Wq"})
    EXPECT_GE(store.Find(name), 0) << name;
  EXPECT_EQ(store.Find("decoder_l1_self_Wq"), -1);
  graph::ParamStore bare;
  Transformer(TinyAan(false, false), 12).AddParams(&bare);
  EXPECT_EQ(bare.Find("decoder_l1_aan_W1"), -1);
  EXPECT_EQ(bare.Find("decoder_l1_aan_Wi"), -1);
}

TEST(AanTest, WholeModelGradientMatchesFiniteDifferences) {
  for (bool ffn : {true, false})
    for (bool gate : {true, false})
      ExpectGradientsMatchFiniteDifferences(
          Transformer(TinyAan(ffn, gate), 12), 5, 30,
          "ffn=" + std::to_string(ffn) + " gate=" + std::to_string(gate));
}

TEST(AanTest, PaddingDoesNotChangeTheOtherSentence) {
  ExpectPaddingDoesNotChangeTheOtherSentence(Transformer(TinyAan(true, true), 12));
  ExpectPaddingDoesNotChangeTheOtherSentence(Transformer(TinyAan(false, false), 12));
}

TEST(AanTest, MixedPrecisionRoundsEachOperandOnceWithTheSameResult) {
  ExpectOperandsRoundedOnceChangeNothing(Transformer(TinyAan(true, true), 12), 0.6);
}

TEST(AanTest, GradientStepsLowerTheLoss) {
  ExpectGradientStepsLowerTheLoss(Transformer(TinyAan(true, true), 12), 0.05f, 0.3);
}

}  // namespace
}  // namespace tern::models
