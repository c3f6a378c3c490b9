#include "models/devlin.h"

#include <gtest/gtest.h>

#include <cmath>

#include "model_checks.h"

namespace tern::models {
namespace {

using testing::ExpectGradientsMatchFiniteDifferences;
using testing::ExpectGradientStepsLowerTheLoss;
using testing::ExpectOperandsRoundedOnceChangeNothing;
using testing::ExpectPaddingDoesNotChangeTheOtherSentence;

config::ModelConfig TinyDevlin(bool tied, int fc_depth) {
  config::ModelConfig c;
  c.set_arch("devlin");
  c.set_emb_dim(8);
  c.set_rnn_dim(6);
  c.set_ffn_dim(10);
  c.set_enc_depth(1);
  c.set_enc_cell_depth(1);
  c.set_fc_depth(fc_depth);
  c.set_tied_embeddings(tied);
  c.set_ffn_activation("relu");
  return c;
}

TEST(DevlinTest, ParametersOfTheFcStack) {
  graph::ParamStore store;
  Devlin(TinyDevlin(false, 5), 12).AddParams(&store);
  for (const char* name :
       {"encoder_bi_W", "encoder_bi_r_Ux", "decoder_cell1_W", "decoder_att_U_att", "decoder_fc1_W0",
        "decoder_fc1_W1", "decoder_fc5_W", "decoder_ff_logit_l1_W", "decoder_ff_logit_l2_W"})
    EXPECT_GE(store.Find(name), 0) << name;
  EXPECT_EQ(store.Find("decoder_fc6_W"), -1);
  EXPECT_EQ(store.Find("decoder_cell2_W"), -1) << "one GRU in the decoder";
}

// Regression: the embeddings' initial scale must not shrink with the vocabulary (Glorot's did,
// and an 8000-piece devlin never left the unigram plateau).
TEST(DevlinTest, EmbeddingScaleDoesNotShrinkWithTheVocabulary) {
  for (bool tied : {true, false}) {
    for (int vocab : {50, 8000}) {
      graph::ParamStore store;
      config::ModelConfig c = TinyDevlin(tied, 2);
      c.set_emb_dim(16);
      Devlin(c, vocab).AddParams(&store);
      store.Finalize(Device::kCpu, 7);
      const Tensor w = store.value(tied ? "Wemb" : "decoder_Wemb");
      double sum = 0;
      for (int64_t i = 0; i < w.numel(); ++i) sum += double{w.f32()[i]} * w.f32()[i];
      EXPECT_NEAR(std::sqrt(sum / w.numel()), 0.25, 0.03) << "vocabulary " << vocab;
    }
  }
}

// With GELU for the ReLUs, so that finite differences cross no kinks.
TEST(DevlinTest, WholeModelGradientMatchesFiniteDifferences) {
  for (bool tied : {true, false}) {
    config::ModelConfig c = TinyDevlin(tied, tied ? 4 : 3);
    c.set_ffn_activation("gelu");
    ExpectGradientsMatchFiniteDifferences(Devlin(c, 12), 5, 40, tied ? "tied fc4" : "untied fc3");
  }
}

TEST(DevlinTest, PaddingDoesNotChangeTheOtherSentence) {
  ExpectPaddingDoesNotChangeTheOtherSentence(Devlin(TinyDevlin(true, 4), 12));
}

TEST(DevlinTest, MixedPrecisionRoundsEachOperandOnceWithTheSameResult) {
  ExpectOperandsRoundedOnceChangeNothing(Devlin(TinyDevlin(true, 4), 12), 0.6);
}

TEST(DevlinTest, GradientStepsLowerTheLoss) {
  ExpectGradientStepsLowerTheLoss(Devlin(TinyDevlin(true, 4), 12), 0.05f, 0.75);
}

// With clipping, a weight beyond the range changes nothing and gets no gradient; training still
// lowers the loss.
TEST(DevlinTest, ClippedWeightsAndReluTrainAndIgnoreWeightsBeyondTheRange) {
  config::ModelConfig c = TinyDevlin(true, 4);
  c.set_clip_weights(0.5f);
  c.set_clip_relu(10.f);
  Devlin model(c, 12);
  graph::ParamStore params;
  model.AddParams(&params);
  params.Finalize(Device::kCpu, 5);
  const int w = params.Index("decoder_fc2_W");
  params.value(w).f32()[0] = 3.f;  // far beyond the clip
  BatchTensors b = testing::TinyBatch();
  const double before = testing::Loss(model, params, b);
  params.value(w).f32()[0] = 5.f;
  EXPECT_DOUBLE_EQ(testing::Loss(model, params, b), before);
  Arena arena;
  graph::Graph g(&arena, false);
  g.Backward(TokenLoss(g, model.Logits(g, params, b), b.tgt_out, 0.1f));
  EXPECT_EQ(params.grad(w).at(0), 0.f);
  ExpectGradientStepsLowerTheLoss(model, 0.05f, 0.85);
}

}  // namespace
}  // namespace tern::models
