// config::ParameterCount, computed from the config alone, equals what models/ registers, for
// every architecture and the options that change its tensors.
#include "configs/model_size.h"

#include <gtest/gtest.h>

#include <vector>

#include "configs/config_io.h"
#include "graph/params.h"
#include "models/model.h"

namespace tern::config {
namespace {

int64_t RegisteredCount(const ModelConfig& m, int vocab) {
  graph::ParamStore store;  // shapes only: nothing is allocated before Finalize
  models::CreateModel(m, vocab)->AddParams(&store);
  int64_t n = 0;
  for (int i = 0; i < store.size(); ++i) n += store.info(i).shape.numel();
  return n;
}

ModelConfig Model(const std::string& arch) {
  TrainConfig c;
  c.mutable_model()->set_arch(arch);
  c.mutable_model()->set_emb_dim(24);
  c.mutable_model()->set_ffn_dim(40);
  c.mutable_model()->set_heads(3);
  c.mutable_model()->set_rnn_dim(20);
  FillDefaults(&c);
  return c.model();
}

TEST(ModelSize, ParameterCountMatchesTheModels) {
  std::vector<ModelConfig> configs;
  for (const char* arch : {"transformer", "aan", "s2s", "devlin"}) {
    for (int variant = 0; variant < 8; ++variant) {
      ModelConfig m = Model(arch);
      m.set_tied_embeddings(variant & 1);
      m.set_pre_norm(variant & 2);
      m.set_layer_normalization(variant & 2);
      m.set_aan_no_ffn(variant & 4);
      m.set_aan_no_gate(variant & 1);
      m.set_enc_depth(1 + variant % 3);
      m.set_dec_depth(1 + (variant + 1) % 3);
      m.set_enc_cell_depth(1 + variant % 2);
      m.set_dec_cell_base_depth(2 + variant % 3);
      m.set_dec_cell_high_depth(1 + (variant / 2) % 2);
      m.set_fc_depth(1 + variant % 4);
      configs.push_back(m);
    }
  }
  for (const ModelConfig& m : configs) {
    EXPECT_EQ(ParameterCount(m, 37), RegisteredCount(m, 37)) << ToText([&] {
      TrainConfig c;
      *c.mutable_model() = m;
      return c;
    }());
  }
}

TEST(ModelSize, TheBoundCountsParametersGradientsAndLogits) {
  TrainConfig c;
  *c.mutable_model() = Model("s2s");
  c.mutable_data()->set_batch_tokens(100);
  const int64_t params = ParameterCount(c.model(), 50);
  EXPECT_EQ(TrainingBytesLowerBound(c, 50), 8 * params + 8 * 100 * 50);
}

}  // namespace
}  // namespace tern::config
