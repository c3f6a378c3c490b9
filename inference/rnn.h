// The runtime's forward pass of the GRU encoder-decoders (models/s2s.h's "s2s" and
// models/devlin.h's "devlin"), teacher-forced: the same function as the training graph on the
// same parameter names (held equal by tests/trainer/rnn_graph_runtime_equality_test.cc).
// Not here yet: incremental decoding for beam search.
#pragma once

#include <string>
#include <vector>

#include "configs/tern.pb.h"
#include "inference/weights.h"
#include "tensor/arena.h"
#include "tensor/tensor.h"

namespace tern::inference {

// One GRU cell's weights (models/rnn_layers.h); w, wx undefined for a transition cell.
struct GruWeights {
  Tensor w, wx, b, bx, u, ux;
  bool layer_norm = false;
  Tensor w_lns, w_lnb, wx_lns, wx_lnb, u_lns, u_lnb, ux_lns, ux_lnb;
};
GruWeights LoadGru(const Weights& weights, const std::string& prefix, bool has_input,
                   bool layer_norm);

class RnnModel {
 public:
  // config.arch() "s2s" or "devlin"; tern::Error naming a missing parameter.
  RnnModel(const config::ModelConfig& config, const Weights& weights);
  // src (B, Ts) int32, src_mask (B, Ts) float, tgt_in (B, T) int32 -> logits (B, T, V).
  Tensor ForwardLogits(const Tensor& src, const Tensor& src_mask, const Tensor& tgt_in,
                       Arena& arena) const;

 private:
  // (Ts, B, 2d) context, time-major.
  Tensor Encode(const Tensor& src, const Tensor& src_mask, Arena& arena) const;
  Tensor S2SDecode(const Tensor& context, const Tensor& src_mask, const Tensor& tgt_in,
                   Arena& arena) const;
  Tensor DevlinDecode(const Tensor& context, const Tensor& src_mask, const Tensor& tgt_in,
                      Arena& arena) const;
  Tensor Output(const Tensor& top, const Tensor& out, Arena& arena) const;
  // Devlin's clipping options applied as in training.
  Tensor Weight(const std::string& name, Arena& arena) const;
  Tensor Relu(const Tensor& x, Arena& arena) const;
  const Tensor& W(const std::string& name) const { return weights_.Get(name); }

  config::ModelConfig config_;
  const Weights& weights_;
  int dim_;
  std::vector<std::vector<GruWeights>> fw_, bw_;  // encoder layers' cells
};

}  // namespace tern::inference
