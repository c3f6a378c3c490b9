#include "models/s2s.h"

#include <gtest/gtest.h>

#include "model_checks.h"

namespace tern::models {
namespace {

using testing::ExpectGradientsMatchFiniteDifferences;
using testing::ExpectGradientStepsLowerTheLoss;
using testing::ExpectOperandsRoundedOnceChangeNothing;
using testing::ExpectPaddingDoesNotChangeTheOtherSentence;

config::ModelConfig TinyS2S() {
  config::ModelConfig c;
  c.set_arch("s2s");
  c.set_emb_dim(8);
  c.set_rnn_dim(6);
  c.set_enc_depth(1);
  c.set_dec_depth(1);
  c.set_enc_cell_depth(1);
  c.set_dec_cell_base_depth(2);
  c.set_dec_cell_high_depth(1);
  c.set_tied_embeddings(true);
  return c;
}

// Every option that changes the network: depth, deep transition, skip, layer norm, untied.
config::ModelConfig DeepS2S() {
  config::ModelConfig c = TinyS2S();
  c.set_enc_depth(2);
  c.set_dec_depth(2);
  c.set_enc_cell_depth(2);
  c.set_dec_cell_base_depth(3);
  c.set_dec_cell_high_depth(2);
  c.set_skip(true);
  c.set_layer_normalization(true);
  c.set_tied_embeddings(false);
  return c;
}

TEST(S2STest, ParameterNamesFollowMarian) {
  graph::ParamStore store;
  S2S(DeepS2S(), 12).AddParams(&store);
  for (const char* name :
       {"encoder_Wemb", "decoder_Wemb", "encoder_bi_W", "encoder_bi_Ux", "encoder_bi_cell2_U",
        "encoder_bi_r_l2_cell1_W", "encoder_bi_r_l2_cell2_Ux_lns", "decoder_ff_state_W",
        "decoder_cell1_Wx", "decoder_att_W_comb_att", "decoder_att_Wc_att", "decoder_att_U_att",
        "decoder_cell2_W", "decoder_cell3_U", "decoder_l2_cell1_W", "decoder_l2_cell2_Ux",
        "decoder_ff_logit_l1_W2", "decoder_ff_logit_l2_W", "decoder_ff_logit_l2_b"})
    EXPECT_GE(store.Find(name), 0) << name;
  EXPECT_EQ(store.Find("decoder_cell3_W"), -1) << "a transition cell has no input weights";
  // The cGRU's second cell reads the bidirectional context.
  EXPECT_EQ(store.info(store.Index("decoder_cell2_W")).shape, Shape({12, 12}));
}

TEST(S2STest, WholeModelGradientMatchesFiniteDifferences) {
  ExpectGradientsMatchFiniteDifferences(S2S(TinyS2S(), 12), 5, 40, "tiny");
  ExpectGradientsMatchFiniteDifferences(S2S(DeepS2S(), 12), 5, 60, "deep");
}

TEST(S2STest, PaddingDoesNotChangeTheOtherSentence) {
  ExpectPaddingDoesNotChangeTheOtherSentence(S2S(TinyS2S(), 12));
  ExpectPaddingDoesNotChangeTheOtherSentence(S2S(DeepS2S(), 12));
}

TEST(S2STest, MixedPrecisionRoundsEachOperandOnceWithTheSameResult) {
  // The recurrent weights enter one product a time step: rounded once, they cost far less.
  ExpectOperandsRoundedOnceChangeNothing(S2S(DeepS2S(), 12), 0.6);
}

TEST(S2STest, GradientStepsLowerTheLoss) {
  config::ModelConfig c = DeepS2S();
  c.set_rnn_dropout(0.1f);
  c.set_dropout(0.1f);
  ExpectGradientStepsLowerTheLoss(S2S(c, 12), 0.1f, 0.5);
}

}  // namespace
}  // namespace tern::models
