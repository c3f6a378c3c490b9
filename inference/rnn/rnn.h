// The runtime's GRU encoder-decoders: models/s2s.h's "s2s" (Nematus: bidirectional GRU encoder,
// conditional GRU decoder with MLP attention, deep transition, deep output) and models/devlin.h's
// "devlin" (Devlin 2017's student: one attentional GRU, then fully-connected ReLU layers with
// residuals around pairs, an FC-tanh top). The same function as the training graph on the same
// parameter names (tests/equivalence/rnn_graph_runtime_equality_test.cc); ForwardLogits runs the
// step decoder that beam search uses, teacher-forced, so that test covers decoding too.
//
// Every matrix is a LinearWeights: float32, or int16/int8 from an integer export or quantized at
// load (LinearOptions), then run through the integer GEMM. Devlin's clip_weights is applied to
// the clipped matrices at load (float) or at export (integer; ClipForExport). The output layer is
// the (clipped) target embedding, or decoder_ff_logit_l2_W transposed at load when untied.
//
// Decoding keeps, per row of the beam, the decoder's recurrent states (s2s: the base state after
// the transition cells and one state per deeper layer; devlin: the GRU's state), reordered by the
// back-pointers each step, and per sentence the encoder's context, its attention projection and
// the initial state. Devlin's speed-ups are switches (RnnOptions,
// inference/layers/decoder_model.h).
//
// On a GPU (weights from CopyWeightsTo) every step runs on tensor ops there: the GRU updates and
// the attention scores as kernels of their own (tensor/ops.h's GruCell, AdditiveAttentionScores),
// the attention's softmax and context and the initial state's masked mean as a masked softmax
// and batched products, the states reordered by one gather. RnnOptions::tensor_ops runs the same
// path on the CPU, for tests.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "configs/tern.pb.h"
#include "inference/format/model_file.h"
#include "inference/format/weights.h"
#include "inference/layers/decoder_model.h"
#include "inference/layers/linear.h"
#include "tensor/arena.h"
#include "tensor/tensor.h"

namespace tern::inference {

// In-place tanh and sigmoid over n floats: the library's functions, or (approx) a vectorizable
// rational approximation with absolute error below 2e-6.
void TanhInPlace(float* x, int64_t n, bool approx);
void SigmoidInPlace(float* x, int64_t n, bool approx);

// One GRU cell's weights (models/rnn_layers.h); w, wx unset for a transition cell.
struct GruWeights {
  bool has_input = false;
  LinearWeights w, wx, u, ux;  // (in, 2d), (in, d), (d, 2d), (d, d)
  Tensor b, bx;                // (2d), (d)
  bool layer_norm = false;
  Tensor w_lns, w_lnb, wx_lns, wx_lnb, u_lns, u_lnb, ux_lns, ux_lnb;
};

// The MLP attention (models/rnn_layers.h): e_t = tanh(LN(c_t Wc) + b + LN(s W_comb)) . u.
struct RnnAttentionWeights {
  LinearWeights w_comb, wc;  // (d, c), (c, c)
  Tensor b, u;               // (c), (c, 1)
  bool layer_norm = false;
  Tensor q_lns, q_lnb, c_lns, c_lnb;
};

// Whether `name` is one of Devlin's clipped matrices (clip_weights) in an RNN model of `config`.
bool IsClippedWeightName(const config::ModelConfig& config, const std::string& name);
// For an integer export of a devlin model with clip_weights: replaces the clipped matrices by
// clipped copies (owned by the result) before ConvertWeights quantizes them.
std::vector<NamedTensor> ClipForExport(const config::ModelConfig& config,
                                       const std::vector<NamedTensor>& tensors);

class RnnDecoder;

class RnnModel : public DecoderModel {
 public:
  // config.arch() "s2s" or "devlin"; tern::Error naming a missing parameter. `weights` must
  // outlive the model.
  RnnModel(const config::ModelConfig& config, const Weights& weights,
           const LinearOptions& linear = {}, const RnnOptions& options = {});
  ~RnnModel() override;

  const config::ModelConfig& config() const override { return config_; }
  int64_t vocab_size() const override { return out_bias_.dim(0); }
  // src (B, S) int32, src_mask (B, S) -> context (B, S, 2d).
  Tensor Encode(const Tensor& src, const Tensor& src_mask, Arena& arena) const override;
  std::unique_ptr<DecoderState> NewDecoder() const override;
  Tensor OutputInput(const Tensor& h, Arena&) const override { return h; }
  const Tensor& output_embeddings() const override { return out_emb_; }
  const Tensor& output_table() const override { return output_.w; }
  const LinearWeights* integer_output() const override {
    return output_.packed ? &output_ : nullptr;
  }
  const Tensor& output_bias() const override { return out_bias_; }
  const RnnOptions& options() const { return options_; }
  Device device() const override { return out_emb_.device(); }
  DType product_inputs() const override { return output_.inputs; }
  // Whether the encoder and decoder run on tensor ops (on a GPU, or RnnOptions::tensor_ops)
  // rather than the CPU's loops over rows.
  bool tensor_ops() const { return options_.tensor_ops || device() != Device::kCpu; }

  // src (B, Ts) int32, src_mask (B, Ts) float, tgt_in (B, T) int32 -> logits (B, T, V): the step
  // decoder at beam 1 fed the target.
  Tensor ForwardLogits(const Tensor& src, const Tensor& src_mask, const Tensor& tgt_in,
                       Arena& arena) const;

 private:
  friend class RnnDecoder;
  // The matrix `name` of `shape` (float32, int16 or int8); Devlin's clip_weights applied when
  // `clipped` and float. tern::Error naming a missing or misshapen parameter.
  LinearWeights Matrix(const std::string& name, const Shape& shape, bool clipped);
  // A GRU cell; input_dim 0 for a transition cell (no input).
  GruWeights Gru(const std::string& prefix, int64_t input_dim);

  config::ModelConfig config_;
  const Weights& weights_;
  LinearOptions linear_;
  RnnOptions options_;
  bool s2s_;
  int64_t dim_, emb_;
  std::vector<Tensor> owned_;  // clipped or transposed copies
  Tensor src_emb_, tgt_emb_, out_emb_, out_bias_;
  std::vector<std::vector<GruWeights>> fw_, bw_;  // encoder layers' cells
  // Decoder. s2s: cell1, cell2 (input: the context), transition cells 3.., deeper layers' cells,
  // ff_state (initial state), deep output l1 from (y, state, context). devlin: cell1, fc layers.
  std::vector<GruWeights> base_;
  std::vector<std::vector<GruWeights>> high_;  // s2s layers 2..dec_depth
  RnnAttentionWeights att_;
  LinearWeights ff_state_;
  LinearWeights output_;  // E^T: a float view of out_emb_, maybe an integer copy
  Tensor ff_state_b_;
  LinearWeights logit_w_[3];  // s2s: l1_W0..2; devlin: l1_W in [0]
  Tensor logit_b_[3];
  std::vector<LinearWeights> fc_w_;  // devlin: fc1_W0, fc1_W1, fc2_W, ..
  std::vector<Tensor> fc_b_;         // devlin: fc1_b, fc2_b, ..
  // RnnOptions::precomputed_embeddings: (N, 3d) rows [LN(E W) + b | LN(E Wx) + bx] of cell1.
  Tensor emb_table_;
};

}  // namespace tern::inference
