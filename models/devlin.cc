#include "models/devlin.h"

#include <cmath>

#include "graph/ops.h"
#include "tensor/ops.h"

namespace tern::models {

using graph::Init;
using graph::Var;

namespace {

// A (n) constant filled with `value`, to add to every row.
Var Filled(graph::Graph& g, int64_t n, float value) {
  Tensor t = g.arena()->Alloc({n});
  Fill(t, value);
  return g.Constant(t);
}

// clip(x, lo, hi) = lo + relu(x - lo) - relu(x - hi), from differentiable pieces.
Var Clip(graph::Graph& g, Var x, float lo, float hi) {
  const int64_t n = x.shape().cols();
  Var above_lo = graph::Relu(graph::AddBroadcast(x, Filled(g, n, -lo)));
  Var above_hi = graph::Relu(graph::AddBroadcast(x, Filled(g, n, -hi)));
  Var y = graph::Add(above_lo, graph::Scale(above_hi, -1.f));
  return lo == 0.f ? y : graph::AddBroadcast(y, Filled(g, n, lo));
}

}  // namespace

Devlin::Devlin(const config::ModelConfig& config, int vocab_size)
    : config_(config),
      encoder_(config, vocab_size),
      vocab_(vocab_size),
      emb_(config.emb_dim()),
      dim_(config.rnn_dim()),
      fc_(config.ffn_dim()) {}

void Devlin::AddParams(graph::ParamStore* s) const {
  const bool ln = config_.layer_normalization();
  // Embeddings ~ N(0, 1/emb), not Glorot: Glorot's scale shrinks with the vocabulary (std 0.016
  // at 8000 x 256), and through the GRU, the FC stack and the tied output layer that left the
  // model on the unigram plateau (cost 6.3-6.5 for 1000 updates on the bible corpus, 350 on a
  // 1500-pair slice), where the same slice with 600 pieces or this init (5.3 by update 300) learns.
  const float emb_std = 1.f / std::sqrt(static_cast<float>(emb_));
  if (config_.tied_embeddings()) {
    s->Add("Wemb", {vocab_, emb_}, Init::kNormal, emb_std);
  } else {
    s->Add("encoder_Wemb", {vocab_, emb_}, Init::kNormal, emb_std);
    s->Add("decoder_Wemb", {vocab_, emb_}, Init::kNormal, emb_std);
    s->Add("decoder_ff_logit_l2_W", {emb_, vocab_}, Init::kGlorotUniform);
  }
  encoder_.AddEncoderParams(s);
  AddGruParams(s, "decoder_cell1", emb_, dim_, ln);
  AddAttentionParams(s, "decoder_att", dim_, 2 * dim_, ln);
  s->Add("decoder_fc1_W0", {dim_, fc_}, Init::kGlorotUniform);
  s->Add("decoder_fc1_W1", {2 * dim_, fc_}, Init::kGlorotUniform);
  s->Add("decoder_fc1_b", {fc_}, Init::kZeros);
  for (int k = 2; k <= config_.fc_depth(); ++k) {
    s->Add("decoder_fc" + std::to_string(k) + "_W", {fc_, fc_}, Init::kGlorotUniform);
    s->Add("decoder_fc" + std::to_string(k) + "_b", {fc_}, Init::kZeros);
  }
  s->Add("decoder_ff_logit_l1_W", {fc_, emb_}, Init::kGlorotUniform);
  s->Add("decoder_ff_logit_l1_b", {emb_}, Init::kZeros);
  s->Add("decoder_ff_logit_l2_b", {vocab_}, Init::kZeros);
}

Var Devlin::Relu(graph::Graph& g, Var x) const {
  if (config_.ffn_activation() == "gelu") return graph::Gelu(x);
  const float clip = config_.clip_relu();
  return clip > 0.f ? Clip(g, x, 0.f, clip) : graph::Relu(x);
}

Var Devlin::Weight(const RnnCtx& c, const std::string& name) const {
  const float clip = config_.clip_weights();
  Var w = c.P(name);
  return clip > 0.f ? Clip(c.g, w, -clip, clip) : w;
}

Var Devlin::Logits(graph::Graph& g, const graph::ParamStore& params,
                   const BatchTensors& batch) const {
  RnnCtx c{g, params, config_.layer_normalization(), config_.rnn_dropout()};
  const bool tied = config_.tied_embeddings();
  const int64_t len = batch.tgt_in.dim(1);
  Var context_tm = encoder_.Encode(c, tied ? "Wemb" : "encoder_Wemb", batch);  // (Ts, b, 2d)
  Var context_bm = graph::Transpose01(context_tm);
  // The bottom GRU over the whole target sentence, then attention from each of its states.
  Var y = graph::Transpose01(
      graph::Embedding(c.P(tied ? "Wemb" : "decoder_Wemb"), batch.tgt_in));  // (len, b, e)
  Var states = RunGruLayer(c, {"decoder_cell1"}, y, dim_, Tensor(), /*reverse=*/false);
  MlpAttention attention(c, "decoder_att", context_bm, batch.src_mask);
  std::vector<Var> contexts(len);
  for (int64_t t = 0; t < len; ++t)
    contexts[t] = attention.Step(
        graph::Reshape(graph::Slice(states, t, t + 1), {states.dim(1), states.dim(2)}));
  // The FC stack: x1 from state and context; pairs of layers with a residual around each pair.
  Var x = graph::Add(
      graph::Linear(states, Weight(c, "decoder_fc1_W0"), Var()),
      graph::Linear(graph::Stack(contexts), Weight(c, "decoder_fc1_W1"), c.P("decoder_fc1_b")));
  x = Relu(g, x);
  Var pair_input = x;
  for (int k = 2; k <= config_.fc_depth(); ++k) {
    const std::string p = "decoder_fc" + std::to_string(k);
    x = Relu(g, graph::Linear(x, Weight(c, p + "_W"), c.P(p + "_b")));
    if (k % 2 == 1) {
      x = graph::Add(x, pair_input);
      pair_input = x;
    }
  }
  x = graph::Dropout(x, config_.dropout());
  Var top = graph::Tanh(
      graph::Linear(x, Weight(c, "decoder_ff_logit_l1_W"), c.P("decoder_ff_logit_l1_b")));
  return graph::Linear(graph::Transpose01(top), Weight(c, tied ? "Wemb" : "decoder_ff_logit_l2_W"),
                       c.P("decoder_ff_logit_l2_b"), /*trans_w=*/tied);
}

}  // namespace tern::models
