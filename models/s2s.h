// The Nematus-style RNN encoder-decoder (Sennrich et al. 2017; Marian's "s2s"): a bidirectional
// GRU encoder, a conditional GRU decoder (cGRU) with MLP attention, and a deep output layer.
//
// Options (configs/tern.proto): emb_dim, rnn_dim; enc_depth stacked bidirectional layers of
// enc_cell_depth cells (deep transition); the decoder's first layer is the cGRU of
// dec_cell_base_depth cells (cell 1 reads the embedding, attention reads cell 1's state, cell 2
// reads the attended context, cells 3.. only the state), then dec_depth - 1 stacked GRU layers of
// dec_cell_high_depth cells; skip adds residual connections between stacked layers;
// layer_normalization; rnn_dropout (variational) and dropout (on the deep output layer).
//
// Parameter names (Marian's, see models/rnn_layers.h for a cell's and attention's):
//   Wemb (V, e) when tied, else encoder_Wemb, decoder_Wemb, decoder_ff_logit_l2_W (e, V);
//   encoder_bi[_l{i}][_cell{j}] (left to right), encoder_bi_r[_l{i}][_cell{j}] (right to left),
//     where _l{i} appears for layers i > 1 and _cell{j} for i > 1 or j > 1;
//   decoder_ff_state_{W,b} (2 rnn_dim -> rnn_dim), tanh of the masked mean of the context;
//   decoder_cell1, decoder_att, decoder_cell2 .. decoder_cell{base}; decoder_l{i}_cell{j};
//   decoder_ff_logit_l1_{W0,b0,W1,b1,W2,b2}: tanh(y W0 + b0 + s W1 + b1 + c W2 + b2) -> (e);
//   decoder_ff_logit_l2_b (V).
#pragma once

#include <string>
#include <vector>

#include "models/model.h"
#include "models/rnn_layers.h"

namespace tern::models {

class S2S : public Model {
 public:
  S2S(const config::ModelConfig& config, int vocab_size);

  void AddParams(graph::ParamStore* store) const override;
  graph::Var Logits(graph::Graph& g, const graph::ParamStore& params,
                    const BatchTensors& batch) const override;

  // Names of the cells of encoder layer `layer` (1-based) in one direction.
  std::vector<std::string> EncoderCells(bool reverse, int layer) const;
  // The encoder alone (shared with models/devlin.h): its GRU cells' parameters, and
  // (batch, Ts) ids -> context (Ts, batch, 2 rnn_dim) from the embedding table `table`.
  void AddEncoderParams(graph::ParamStore* store) const;
  graph::Var Encode(const RnnCtx& c, const std::string& table, const BatchTensors& batch) const;

 private:
  config::ModelConfig config_;
  int vocab_;
  int emb_;
  int dim_;
};

}  // namespace tern::models
