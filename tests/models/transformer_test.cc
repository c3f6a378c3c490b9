#include "models/transformer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "graph/ops.h"
#include "tensor/ops.h"

namespace tern::models {
namespace {

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

// Two sentences; the second is shorter (padded).
BatchTensors TinyBatch() {
  BatchTensors b;
  b.src = Tensor::FromInts({2, 5}, {5, 6, 7, 8, 3, 9, 10, 3, 0, 0});
  b.src_mask = Tensor::FromVector({2, 5}, {1, 1, 1, 1, 1, 1, 1, 1, 0, 0});
  b.tgt_in = Tensor::FromInts({2, 4}, {2, 8, 7, 6, 2, 10, 9, 0});
  b.tgt_out = Tensor::FromInts({2, 4}, {8, 7, 6, 3, 10, 9, 3, 0});
  return b;
}

double Loss(const Model& model, const graph::ParamStore& params, const BatchTensors& batch) {
  Arena arena;
  graph::Graph g(&arena, false);
  return TokenLoss(g, model.Logits(g, params, batch), batch.tgt_out, 0.1f).value().at(0);
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

TEST(TransformerTest, PaddingDoesNotChangeTheOtherSentence) {
  Transformer model(TinyConfig(false, true), 12);
  graph::ParamStore params;
  model.AddParams(&params);
  params.Finalize(Device::kCpu, 3);
  BatchTensors b = TinyBatch();
  Arena arena;
  graph::Graph g(&arena, false);
  Tensor both = model.Logits(g, params, b).value();
  BatchTensors one;
  one.src = Tensor::FromInts({1, 3}, {9, 10, 3});
  one.src_mask = Tensor::FromVector({1, 3}, {1, 1, 1});
  one.tgt_in = Tensor::FromInts({1, 3}, {2, 10, 9});
  one.tgt_out = Tensor::FromInts({1, 3}, {10, 9, 3});
  Tensor alone = model.Logits(g, params, one).value();
  for (int t = 0; t < 3; ++t)
    for (int v = 0; v < 12; ++v) EXPECT_NEAR(both.at((4 + t) * 12 + v), alone.at(t * 12 + v), 1e-5);
}

// Finite differences of the whole model on a sample of parameters.
TEST(TransformerTest, WholeModelGradientMatchesFiniteDifferences) {
  for (bool pre_norm : {false, true}) {
    for (bool tied : {true, false}) {
      Transformer model(TinyConfig(pre_norm, tied), 12);
      graph::ParamStore params;
      model.AddParams(&params);
      params.Finalize(Device::kCpu, 5);
      BatchTensors b = TinyBatch();
      Arena arena;
      graph::Graph g(&arena, false);
      g.Backward(TokenLoss(g, model.Logits(g, params, b), b.tgt_out, 0.1f));
      std::mt19937 rng(1);
      float* values = params.values_flat().f32();
      const float* grads = params.grads_flat().f32();
      for (int trial = 0; trial < 40; ++trial) {
        int p = rng() % params.size();
        const graph::ParamInfo& info = params.info(p);
        int64_t i = info.offset + rng() % info.shape.numel();
        const float saved = values[i], h = 1e-2f;
        values[i] = saved + h;
        double up = Loss(model, params, b);
        values[i] = saved - h;
        double down = Loss(model, params, b);
        values[i] = saved;
        double numeric = (up - down) / (2 * h);
        EXPECT_NEAR(grads[i], numeric, 2e-2 * std::max(1.0, std::abs(numeric)))
            << info.name << " pre_norm=" << pre_norm << " tied=" << tied;
      }
    }
  }
}

TEST(TransformerTest, GradientStepsLowerTheLoss) {
  Transformer model(TinyConfig(true, true), 12);
  graph::ParamStore params;
  model.AddParams(&params);
  params.Finalize(Device::kCpu, 9);
  BatchTensors b = TinyBatch();
  double first = Loss(model, params, b), last = first;
  Arena arena;
  for (int step = 0; step < 30; ++step) {
    graph::Graph g(&arena, true, step);
    params.ZeroGrads();
    g.Backward(TokenLoss(g, model.Logits(g, params, b), b.tgt_out, 0.f));
    Axpy(-0.05f, params.grads_flat(), params.values_flat());
    arena.Reset();
  }
  last = Loss(model, params, b);
  EXPECT_LT(last, 0.3 * first) << "first " << first << " last " << last;
}

}  // namespace
}  // namespace tern::models
