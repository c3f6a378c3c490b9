// Devlin's student (Devlin 2017, "Sharp models on dull hardware"): a bidirectional GRU encoder
// (models/s2s.h's, same names); a decoder whose bottom layer is one GRU over the target
// embeddings with MLP attention from its states (the attention does not feed back into the
// recurrence, so the GRU runs over the whole sentence first); then fc_depth fully-connected ReLU
// layers of ffn_dim with a residual connection around every pair of layers; then an FC-tanh layer
// to emb_dim and the output layer.
//
// ffn_activation "gelu" replaces the ReLUs (smooth, for gradient checks; no clipping then).
// Quantization-friendly options: clip_relu > 0 clips every ReLU to [0, clip_relu] (Devlin: 10);
// clip_weights > 0 uses each decoder and output matrix clipped to [-clip_weights, clip_weights]
// in the forward pass (Devlin: 1), so the network trains for the weights the integer path sees.
//
// Parameter names: Wemb | encoder_Wemb, decoder_Wemb, decoder_ff_logit_l2_W (e, V);
//   encoder_bi*, encoder_bi_r* (models/s2s.h); decoder_cell1 (a GRU); decoder_att;
//   decoder_fc1_{W0 (d, f), W1 (2d, f), b}: ReLU(s W0 + c W1 + b) from state s and context c;
//   decoder_fc{k}_{W,b} (f, f) for k = 2..fc_depth; decoder_ff_logit_l1_{W,b} (f, e), tanh;
//   decoder_ff_logit_l2_b (V).
#pragma once

#include <string>

#include "models/model.h"
#include "models/rnn_layers.h"
#include "models/s2s.h"

namespace tern::models {

class Devlin : public Model {
 public:
  Devlin(const config::ModelConfig& config, int vocab_size);

  void AddParams(graph::ParamStore* store) const override;
  graph::Var Logits(graph::Graph& g, const graph::ParamStore& params,
                    const BatchTensors& batch) const override;

 private:
  graph::Var Relu(graph::Graph& g, graph::Var x) const;
  graph::Var Weight(const RnnCtx& c, const std::string& name) const;

  config::ModelConfig config_;
  S2S encoder_;  // its encoder: parameters and forward pass
  int vocab_;
  int emb_;
  int dim_;
  int fc_;
};

}  // namespace tern::models
