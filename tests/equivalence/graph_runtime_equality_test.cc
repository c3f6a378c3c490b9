// DESIGN.md rule 1: the training graph (models/) and the bundled runtime (inference/) compute the
// same function on the same weights. The runtime reads a view of the trainer's flat buffer.
#include <gtest/gtest.h>

#include <cmath>
#include <ostream>

#include "graph/graph.h"
#include "inference/format/weights.h"
#include "inference/transformer/transformer.h"
#include "models/transformer.h"

namespace tern {
namespace {

struct Case {
  bool pre_norm, tied;
  const char* activation;
  const char* arch = "transformer";
  bool aan_ffn = true, aan_gate = true;  // arch "aan" only
  const char* positions = "marian";
  float layer_norm_eps = 1e-6f;
};

void PrintTo(const Case& c, std::ostream* os) {
  *os << c.arch << (c.pre_norm ? " pre-norm " : " post-norm ") << (c.tied ? "tied " : "untied ")
      << c.activation << (c.aan_ffn ? "" : " no-ffn") << (c.aan_gate ? "" : " no-gate");
}

class GraphRuntimeEqualityTest : public ::testing::TestWithParam<Case> {};

TEST_P(GraphRuntimeEqualityTest, SameLogitsOnTheSameWeights) {
  const Case c = GetParam();
  config::ModelConfig mc;
  mc.set_arch(c.arch);
  mc.set_aan_no_ffn(!c.aan_ffn);
  mc.set_aan_no_gate(!c.aan_gate);
  mc.set_emb_dim(32);
  mc.set_ffn_dim(64);
  mc.set_heads(4);
  mc.set_enc_depth(2);
  mc.set_dec_depth(2);
  mc.set_tied_embeddings(c.tied);
  mc.set_pre_norm(c.pre_norm);
  mc.set_dropout(0.3f);  // must be off at inference on both sides
  mc.set_ffn_activation(c.activation);
  mc.set_positions(c.positions);
  mc.set_layer_norm_eps(c.layer_norm_eps);
  mc.set_max_length(64);
  const int vocab = 29;
  models::Transformer model(mc, vocab);
  graph::ParamStore params;
  model.AddParams(&params);
  params.Finalize(Device::kCpu, 17);
  // Biases start at zero and norms at one: perturb every parameter so that each one counts.
  for (int i = 0; i < params.size(); ++i) {
    Tensor w = params.value(i);
    for (int64_t j = 0; j < w.numel(); ++j) w.f32()[j] += 0.05f * std::sin(1.7f * j + i);
  }

  models::BatchTensors b;
  b.src = Tensor::FromInts({2, 6}, {5, 6, 7, 8, 9, 3, 10, 11, 12, 3, 0, 0});
  b.src_mask = Tensor::FromVector({2, 6}, {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0});
  b.tgt_in = Tensor::FromInts({2, 5}, {2, 13, 14, 15, 16, 2, 17, 18, 0, 0});
  b.tgt_out = Tensor::FromInts({2, 5}, {13, 14, 15, 16, 3, 17, 18, 3, 0, 0});
  Arena arena;
  graph::Graph g(&arena, /*training=*/false);
  Tensor expected = model.Logits(g, params, b).value();

  inference::Weights weights("trainer parameters");
  for (int i = 0; i < params.size(); ++i) weights.Add(params.info(i).name, params.value(i));
  inference::Transformer runtime(mc, weights);
  Arena runtime_arena;
  Tensor got = runtime.ForwardLogits(b.src, b.src_mask, b.tgt_in, runtime_arena);
  ASSERT_EQ(got.shape(), expected.shape());
  // Compare every real (non-pad) target position.
  for (int s = 0; s < 2; ++s)
    for (int t = 0; t < 5; ++t) {
      if (b.tgt_out.i32()[s * 5 + t] == 0) continue;
      for (int v = 0; v < vocab; ++v) {
        int64_t i = (s * 5 + t) * vocab + v;
        ASSERT_NEAR(got.at(i), expected.at(i), 1e-4) << "sentence " << s << " position " << t;
      }
    }
}

INSTANTIATE_TEST_SUITE_P(
    Variants, GraphRuntimeEqualityTest,
    ::testing::Values(Case{false, true, "relu"}, Case{true, true, "relu"},
                      Case{false, false, "gelu"}, Case{true, false, "gelu"},
                      Case{false, true, "swish"},
                      Case{false, true, "swish", "transformer", true, true, "vaswani", 1e-5f},
                      Case{false, true, "relu", "aan"}, Case{true, false, "gelu", "aan"},
                      Case{false, false, "relu", "aan", false, true},
                      Case{true, true, "relu", "aan", true, false},
                      Case{true, false, "relu", "aan", false, false}));

}  // namespace
}  // namespace tern
