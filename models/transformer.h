// The Transformer encoder-decoder (Vaswani et al. 2017) with Marian's options: tied embeddings,
// pre- or post-norm, dropout on residuals, attention and FFN, ReLU or GELU.
//
// Parameter names (shared with inference/transformer/transformer.cc; W stored (in, out),
// y = x W + b):
//   Wemb (V, d) when tied; else encoder_Wemb, decoder_Wemb; decoder_ff_logit_out_b (V).
//   encoder_l{l}_self_{Wq,bq,Wk,bk,Wv,bv,Wo,bo}, encoder_l{l}_self_Wo_ln_{scale,bias},
//   encoder_l{l}_ffn_{W1,b1,W2,b2}, encoder_l{l}_ffn_ffn_ln_{scale,bias};
//   decoder_l{l}_self_*, decoder_l{l}_context_* (same set), decoder_l{l}_ffn_*;
//   pre-norm only: {encoder,decoder}_final_ln_{scale,bias}.
// Embeddings are scaled by sqrt(d) and get sinusoidal positions (SinusoidalPositions).
//
// Arch "aan" replaces the decoder's self-attention with the average attention network (Zhang et
// al. 2018, Marian's names): g = the cumulative average of the layer's inputs y_1..y_t; unless
// aan_no_ffn, g = FFN(g) with decoder_l{l}_aan_{W1,b1,W2,b2}; unless aan_no_gate,
// g = sigmoid(y Wi + bi) * y + sigmoid(g Wf + bf) * g with decoder_l{l}_aan_{Wi,bi,Wf,bf}; then
// dropout, residual and decoder_l{l}_aan_ln_{scale,bias} as for any sublayer.
#pragma once

#include <mutex>
#include <string>

#include "configs/config_io.h"
#include "models/model.h"

namespace tern::models {

class Transformer : public Model {
 public:
  Transformer(const config::ModelConfig& config, int vocab_size);

  void AddParams(graph::ParamStore* store) const override;
  graph::Var Logits(graph::Graph& g, const graph::ParamStore& params,
                    const BatchTensors& batch) const override;

 private:
  struct Ctx;  // per-call state (graph, params, masks)
  graph::Var Embed(Ctx& c, const std::string& table, const Tensor& ids) const;
  // SinusoidalPositions(max_length, d) on `device`, made at the first call for it.
  const Tensor& Positions(Device device) const;
  graph::Var Attention(Ctx& c, const std::string& prefix, graph::Var q_in, graph::Var kv_in,
                       const Tensor& key_mask, bool causal) const;
  graph::Var Ffn(Ctx& c, const std::string& prefix, graph::Var x) const;
  // The average attention network on y (batch, len, d).
  graph::Var AverageAttention(Ctx& c, const std::string& prefix, graph::Var y) const;
  // Wraps a sublayer with dropout, residual and layer norm (pre- or post-norm).
  template <typename F>
  graph::Var Sublayer(Ctx& c, const std::string& ln_prefix, graph::Var x, F&& body) const;
  void AddAttentionParams(graph::ParamStore* store, const std::string& prefix) const;
  void AddFfnParams(graph::ParamStore* store, const std::string& prefix,
                    bool with_norm = true) const;

  config::ModelConfig config_;
  int vocab_;
  int dim_;
  bool aan_;
  // model.layer_norm_eps (1e-6 when unset).
  float LayerNormEps() const {
    return config_.has_layer_norm_eps() ? config_.layer_norm_eps() : config::kDefaultLayerNormEps;
  }
  mutable std::mutex positions_mutex_;
  mutable Tensor positions_[2];  // Positions' tables: the CPU's, a GPU's
};

// pe (max_len, d): pe[p, i] = sin(p * exp(-ln(10000) * i / (d/2 - 1))) for i < d/2 and
// cos(same) at d/2 + i (Marian's layout: all sines, then all cosines); with `vaswani` the
// timescales are 10000^(2i / d) instead (model.positions "vaswani").
Tensor SinusoidalPositions(int max_len, int dim, bool vaswani = false);

}  // namespace tern::models
