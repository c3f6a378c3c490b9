#include "model_checks.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "tensor/ops.h"

namespace tern::models::testing {

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

void ExpectGradientsMatchFiniteDifferences(const Model& model, uint64_t seed, int trials,
                                           const std::string& label, float step) {
  graph::ParamStore params;
  model.AddParams(&params);
  params.Finalize(Device::kCpu, seed);
  BatchTensors b = TinyBatch();
  Arena arena;
  graph::Graph g(&arena, false);
  g.Backward(TokenLoss(g, model.Logits(g, params, b), b.tgt_out, 0.1f));
  std::mt19937 rng(1);
  float* values = params.values_flat().f32();
  const float* grads = params.grads_flat().f32();
  for (int trial = 0; trial < trials; ++trial) {
    int p = rng() % params.size();
    const graph::ParamInfo& info = params.info(p);
    int64_t i = info.offset + rng() % info.shape.numel();
    const float saved = values[i], h = step;
    values[i] = saved + h;
    double up = Loss(model, params, b);
    values[i] = saved - h;
    double down = Loss(model, params, b);
    values[i] = saved;
    double numeric = (up - down) / (2 * h);
    EXPECT_NEAR(grads[i], numeric, 2e-2 * std::max(1.0, std::abs(numeric)))
        << info.name << " " << label;
  }
}

void ExpectPaddingDoesNotChangeTheOtherSentence(const Model& model) {
  graph::ParamStore params;
  model.AddParams(&params);
  params.Finalize(Device::kCpu, 3);
  BatchTensors b = TinyBatch();
  Arena arena;
  graph::Graph g(&arena, false);
  Tensor both = model.Logits(g, params, b).value();
  const int64_t vocab = both.dim(2);
  BatchTensors one;
  one.src = Tensor::FromInts({1, 3}, {9, 10, 3});
  one.src_mask = Tensor::FromVector({1, 3}, {1, 1, 1});
  one.tgt_in = Tensor::FromInts({1, 3}, {2, 10, 9});
  one.tgt_out = Tensor::FromInts({1, 3}, {10, 9, 3});
  Tensor alone = model.Logits(g, params, one).value();
  for (int t = 0; t < 3; ++t)
    for (int v = 0; v < vocab; ++v)
      EXPECT_NEAR(both.at((4 + t) * vocab + v), alone.at(t * vocab + v), 1e-5);
}

void ExpectOperandsRoundedOnceChangeNothing(const Model& model, double most) {
  graph::ParamStore params;
  model.AddParams(&params);
  params.Finalize(Device::kCpu, 5);
  const BatchTensors b = TinyBatch();
  for (DType type : {DType::kBFloat16, DType::kFloat16}) {
    // The gradients, then the loss; *rounded: the elements rounded for products meanwhile.
    auto run = [&](bool once, int64_t* rounded) {
      Arena arena;
      graph::Graph g(&arena, false);
      g.set_matmul_inputs(type);
      g.set_round_operands_once(once);
      const int64_t before = OperandRoundings();
      params.ZeroGrads();
      graph::Var loss = TokenLoss(g, model.Logits(g, params, b), b.tgt_out, 0.1f);
      g.Backward(loss);
      *rounded = OperandRoundings() - before;
      std::vector<float> out = params.grads_flat().ToVector();
      out.push_back(loss.value().at(0));
      return out;
    };
    int64_t each = 0, once = 0;
    const std::vector<float> per_product = run(false, &each), per_step = run(true, &once);
    EXPECT_EQ(per_step, per_product) << DTypeName(type);
    EXPECT_GT(once, 0) << DTypeName(type);
    EXPECT_LE(static_cast<double>(once), most * static_cast<double>(each))
        << DTypeName(type) << ": " << once << " elements rounded once a step, " << each
        << " by every product";
  }
}

void ExpectGradientStepsLowerTheLoss(const Model& model, float lr, double ratio) {
  graph::ParamStore params;
  model.AddParams(&params);
  params.Finalize(Device::kCpu, 9);
  BatchTensors b = TinyBatch();
  const double first = Loss(model, params, b);
  Arena arena;
  for (int step = 0; step < 30; ++step) {
    graph::Graph g(&arena, true, step);
    params.ZeroGrads();
    g.Backward(TokenLoss(g, model.Logits(g, params, b), b.tgt_out, 0.1f));  // as Loss()
    Axpy(-lr, params.grads_flat(), params.values_flat());
    arena.Reset();
  }
  const double last = Loss(model, params, b);
  EXPECT_LT(last, ratio * first) << "first " << first << " last " << last;
}

}  // namespace tern::models::testing
