// The tiny GRU models of the RNN runtime tests (rnn_graph_runtime_equality_test.cc,
// rnn_decode_test.cc): deep switches on the deep transition, deeper encoder and decoder, skip
// connections and Devlin's clipping together.
#pragma once

#include "configs/tern.pb.h"

namespace tern {

inline config::ModelConfig TinyRnnConfig(const char* arch, bool tied, bool layer_norm, bool deep) {
  config::ModelConfig mc;
  mc.set_arch(arch);
  mc.set_emb_dim(12);
  mc.set_rnn_dim(10);
  mc.set_ffn_dim(14);
  mc.set_fc_depth(deep ? 5 : 2);
  mc.set_ffn_activation("relu");
  if (deep) {
    mc.set_clip_weights(0.3f);
    mc.set_clip_relu(0.5f);
  }
  mc.set_enc_depth(deep ? 2 : 1);
  mc.set_dec_depth(deep ? 2 : 1);
  mc.set_enc_cell_depth(deep ? 2 : 1);
  mc.set_dec_cell_base_depth(deep ? 3 : 2);
  mc.set_dec_cell_high_depth(deep ? 2 : 1);
  mc.set_skip(deep);
  mc.set_tied_embeddings(tied);
  mc.set_layer_normalization(layer_norm);
  return mc;
}

}  // namespace tern
