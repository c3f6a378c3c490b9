// DESIGN.md rule 1 for the RNN: models/s2s.h's graph and inference/rnn/rnn.h's runtime compute the
// same logits on the same weights, over a padded batch, for each option that changes the network,
// with the CPU's loops over rows and with the tensor ops a GPU runs (RnnOptions::tensor_ops).
#include <gtest/gtest.h>

#include <string>

#include "common/error.h"
#include "graph/graph.h"
#include "inference/format/weights.h"
#include "inference/rnn/rnn.h"
#include "models/devlin.h"
#include "models/s2s.h"
#include "tensor/ops.h"
#include "tests/equivalence/tiny_rnn_config.h"

namespace tern {
namespace {

struct Case {
  const char* arch;
  bool tied, layer_norm, deep;
};

class RnnGraphRuntimeEqualityTest : public ::testing::TestWithParam<Case> {};

// Two sentences, the second padded.
models::BatchTensors PaddedBatch() {
  models::BatchTensors b;
  b.src = Tensor::FromInts({2, 6}, {5, 6, 7, 8, 9, 3, 10, 11, 12, 3, 0, 0});
  b.src_mask = Tensor::FromVector({2, 6}, {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0});
  b.tgt_in = Tensor::FromInts({2, 5}, {2, 13, 14, 15, 16, 2, 17, 18, 0, 0});
  b.tgt_out = Tensor::FromInts({2, 5}, {13, 14, 15, 16, 3, 17, 18, 3, 0, 0});
  b.src_lengths = {6, 4};
  return b;
}

// The graph's logits for b against the runtime's on the same weights, with the CPU's loops over
// rows and with the tensor ops a GPU runs.
void ExpectTheRuntimesLogits(const config::ModelConfig& mc, int vocab) {
  std::unique_ptr<models::Model> model = models::CreateModel(mc, vocab);
  graph::ParamStore params;
  model->AddParams(&params);
  params.Finalize(Device::kCpu, 17);
  const models::BatchTensors b = PaddedBatch();
  Arena arena;
  graph::Graph g(&arena, /*training=*/false);
  Tensor expected = model->Logits(g, params, b).value();

  inference::Weights weights("trainer parameters");
  for (int i = 0; i < params.size(); ++i) weights.Add(params.info(i).name, params.value(i));
  for (bool tensor_ops : {false, true}) {
    inference::RnnModel runtime(mc, weights, {}, {.tensor_ops = tensor_ops});
    Arena runtime_arena;
    Tensor got = runtime.ForwardLogits(b.src, b.src_mask, b.tgt_in, runtime_arena);
    ASSERT_EQ(got.shape(), expected.shape());
    for (int s = 0; s < 2; ++s)
      for (int t = 0; t < 5; ++t) {
        if (b.tgt_out.i32()[s * 5 + t] == 0) continue;
        for (int v = 0; v < vocab; ++v) {
          int64_t i = (s * 5 + t) * vocab + v;
          ASSERT_NEAR(got.at(i), expected.at(i), 1e-4)
              << "sentence " << s << " position " << t << (tensor_ops ? " (tensor ops)" : "");
        }
      }
  }
}

TEST_P(RnnGraphRuntimeEqualityTest, SameLogitsOnTheSameWeights) {
  const Case c = GetParam();
  config::ModelConfig mc = TinyRnnConfig(c.arch, c.tied, c.layer_norm, c.deep);
  mc.set_dropout(0.3f);  // must be off at inference on both sides
  mc.set_rnn_dropout(0.3f);
  ExpectTheRuntimesLogits(mc, 29);
}

TEST(RnnGraphRuntimeEqualityTest, WholeGruLayersGiveTheRuntimesLogits) {
  // The GRU layers that can run whole (cuDNN's on a GPU; here the host reference of what it
  // computes): the bidirectional encoder, the s2s decoder's stacked layer, Devlin's decoder GRU.
  // The runtime runs its own kernels on the same weights and gets the same logits, so a model
  // trained with whole layers decodes as one trained without them.
  ScopedGruLayerMode whole(GruLayerMode::kReference);
  for (const char* arch : {"s2s", "devlin"}) {
    config::ModelConfig mc = TinyRnnConfig(arch, /*tied=*/true, /*layer_norm=*/false, false);
    mc.set_dec_depth(2);
    SCOPED_TRACE(arch);
    ExpectTheRuntimesLogits(mc, 29);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Variants, RnnGraphRuntimeEqualityTest,
    ::testing::Values(Case{"s2s", true, false, false}, Case{"s2s", false, true, false},
                      Case{"s2s", true, true, true}, Case{"s2s", false, false, true},
                      Case{"devlin", true, false, false}, Case{"devlin", false, true, true}));

TEST(RnnRuntimeTest, RefusesAnArchitectureItCannotRun) {
  config::ModelConfig mc;
  mc.set_arch("aan");
  inference::Weights weights;
  EXPECT_THROW(inference::RnnModel runtime(mc, weights), tern::Error);
}

}  // namespace
}  // namespace tern
