#include "models/transformer.h"

#include <cmath>

#include "common/error.h"
#include "graph/ops.h"
#include "tensor/ops.h"

namespace tern::models {

using graph::Init;
using graph::Var;

struct Transformer::Ctx {
  graph::Graph& g;
  const graph::ParamStore& params;
  Var P(const std::string& name) { return g.Param(params, name); }
};

Transformer::Transformer(const config::ModelConfig& config, int vocab_size)
    : config_(config), vocab_(vocab_size), dim_(config.emb_dim()), aan_(config.arch() == "aan") {}

const Tensor& Transformer::Positions(Device device) const {
  std::lock_guard<std::mutex> lock(positions_mutex_);
  Tensor& table = positions_[device == Device::kCpu ? 0 : 1];
  if (!table.defined()) {
    Tensor host = SinusoidalPositions(config_.max_length(), dim_, config_.positions() == "vaswani");
    if (device == Device::kCpu) {
      table = host;
    } else {
      table = Tensor::Empty(host.shape(), DType::kFloat32, device);
      Copy(host, table);
    }
  }
  return table;
}

Tensor SinusoidalPositions(int max_len, int dim, bool vaswani) {
  Tensor pe = Tensor::Empty({max_len, dim});
  const int half = dim / 2;
  const double log_step = std::log(10000.0) / (vaswani ? half : std::max(half - 1, 1));
  for (int p = 0; p < max_len; ++p)
    for (int i = 0; i < half; ++i) {
      double angle = p * std::exp(-log_step * i);
      pe.f32()[p * dim + i] = static_cast<float>(std::sin(angle));
      pe.f32()[p * dim + half + i] = static_cast<float>(std::cos(angle));
    }
  return pe;
}

void Transformer::AddAttentionParams(graph::ParamStore* s, const std::string& p) const {
  // fairseq's "scaled" start: q, k and v at gain 1/sqrt(2), the output projection at 1.
  const float qkv_gain = config_.attention_init() == "scaled" ? std::sqrt(0.5f) : 1.f;
  for (const char* m : {"q", "k", "v", "o"}) {
    s->Add(p + "_W" + m, {dim_, dim_}, Init::kGlorotUniform, *m == 'o' ? 1.f : qkv_gain);
    s->Add(p + "_b" + m, {dim_}, Init::kZeros);
  }
  s->Add(p + "_Wo_ln_scale", {dim_}, Init::kOnes);
  s->Add(p + "_Wo_ln_bias", {dim_}, Init::kZeros);
}

void Transformer::AddFfnParams(graph::ParamStore* s, const std::string& p, bool with_norm) const {
  s->Add(p + "_W1", {dim_, config_.ffn_dim()}, Init::kGlorotUniform);
  s->Add(p + "_b1", {config_.ffn_dim()}, Init::kZeros);
  s->Add(p + "_W2", {config_.ffn_dim(), dim_}, Init::kGlorotUniform);
  s->Add(p + "_b2", {dim_}, Init::kZeros);
  if (!with_norm) return;
  s->Add(p + "_ffn_ln_scale", {dim_}, Init::kOnes);
  s->Add(p + "_ffn_ln_bias", {dim_}, Init::kZeros);
}

void Transformer::AddParams(graph::ParamStore* s) const {
  // "normal": N(0, d^-1/2), so that sqrt(d) E[id] starts at unit scale beside the positions
  // (amplitude 1) and the tied output layer's logits at unit scale too. Glorot over (V, d) starts
  // the embeddings sqrt(V / d) / 2.5 times smaller (0.25 against 1 at V 8k, d 256): the positions
  // drown the words, and the model learns measurably less per update (docs/training.md).
  const bool normal = config_.embedding_init() != "glorot";
  const Init init = normal ? Init::kNormal : Init::kGlorotUniform;
  const float scale = normal ? 1.f / std::sqrt(static_cast<float>(dim_)) : 0.f;
  if (config_.tied_embeddings()) {
    s->Add("Wemb", {vocab_, dim_}, init, scale);
  } else {
    s->Add("encoder_Wemb", {vocab_, dim_}, init, scale);
    s->Add("decoder_Wemb", {vocab_, dim_}, init, scale);
  }
  s->Add("decoder_ff_logit_out_b", {vocab_}, Init::kZeros);
  for (int l = 1; l <= config_.enc_depth(); ++l) {
    std::string p = "encoder_l" + std::to_string(l);
    AddAttentionParams(s, p + "_self");
    AddFfnParams(s, p + "_ffn");
  }
  for (int l = 1; l <= config_.dec_depth(); ++l) {
    std::string p = "decoder_l" + std::to_string(l);
    if (aan_) {
      const std::string a = p + "_aan";
      if (!config_.aan_no_ffn()) AddFfnParams(s, a, /*with_norm=*/false);
      if (!config_.aan_no_gate()) {
        for (const char* gate : {"i", "f"}) {
          s->Add(a + "_W" + gate, {dim_, dim_}, Init::kGlorotUniform);
          s->Add(a + "_b" + gate, {dim_}, Init::kZeros);
        }
      }
      s->Add(a + "_ln_scale", {dim_}, Init::kOnes);
      s->Add(a + "_ln_bias", {dim_}, Init::kZeros);
    } else {
      AddAttentionParams(s, p + "_self");
    }
    AddAttentionParams(s, p + "_context");
    AddFfnParams(s, p + "_ffn");
  }
  if (config_.pre_norm()) {
    for (const char* stack : {"encoder", "decoder"}) {
      s->Add(std::string(stack) + "_final_ln_scale", {dim_}, Init::kOnes);
      s->Add(std::string(stack) + "_final_ln_bias", {dim_}, Init::kZeros);
    }
  }
}

// (batch, len) ids -> (batch, len, d): sqrt(d) * E[ids] + positions, then dropout.
Var Transformer::Embed(Ctx& c, const std::string& table, const Tensor& ids) const {
  const int64_t len = ids.dim(1);
  if (len > config_.max_length())
    Fail("sentence of ", len, " tokens is longer than model.max_length ", config_.max_length());
  Var x = graph::Embedding(c.P(table), ids, std::sqrt(static_cast<float>(dim_)));
  // Positions added to every sentence from the table kept on the ids' device: nothing is copied
  // (a copy from the host, once per row, made a GPU's step wait for its queue 2 x batch times).
  x = graph::AddBroadcast(x, c.g.Constant(Positions(ids.device()).Slice(0, len)));
  return graph::Dropout(x, config_.dropout());
}

Var Transformer::Attention(Ctx& c, const std::string& p, Var q_in, Var kv_in,
                           const Tensor& key_mask, bool causal) const {
  const int heads = config_.heads();
  const int64_t batch = q_in.dim(0), tq = q_in.dim(1), tk = kv_in.dim(1);
  Var q = graph::SplitHeads(graph::Linear(q_in, c.P(p + "_Wq"), c.P(p + "_bq")), heads);
  Var k = graph::SplitHeads(graph::Linear(kv_in, c.P(p + "_Wk"), c.P(p + "_bk")), heads);
  Var v = graph::SplitHeads(graph::Linear(kv_in, c.P(p + "_Wv"), c.P(p + "_bv")), heads);
  Var scores = graph::MatMul(q, k, false, true);  // (batch*heads, tq, tk)
  const float scale = 1.f / std::sqrt(static_cast<float>(dim_ / heads));
  Var probs =
      graph::Softmax(graph::Reshape(scores, {batch, heads, tq, tk}), key_mask, causal, scale);
  probs = graph::Dropout(probs, config_.attention_dropout());
  Var ctx = graph::MatMul(graph::Reshape(probs, {batch * heads, tq, tk}), v);
  return graph::Linear(graph::MergeHeads(ctx, heads), c.P(p + "_Wo"), c.P(p + "_bo"));
}

Var Transformer::Ffn(Ctx& c, const std::string& p, Var x) const {
  // ReLU in the product's pass (GemmBias' epilogue on a GPU); GELU's backward needs its input.
  const std::string& act = config_.ffn_activation();
  const bool relu = act.empty() || act == "relu";
  Var h = graph::Linear(x, c.P(p + "_W1"), c.P(p + "_b1"), /*trans_w=*/false, relu);
  if (act == "gelu") h = graph::Gelu(h);
  if (act == "swish") h = graph::Swish(h);
  h = graph::Dropout(h, config_.ffn_dropout());
  return graph::Linear(h, c.P(p + "_W2"), c.P(p + "_b2"));
}

// avg (batch, len, d) = A y with A[t, s] = 1/(t+1) for s <= t, one A per sentence (a constant).
Var Transformer::AverageAttention(Ctx& c, const std::string& p, Var y) const {
  const int64_t batch = y.dim(0), len = y.dim(1);
  // A is the causal softmax of zeros, made where y lives: exp(0) = 1 for each key up to t, so
  // each row is 1/(t+1) exactly (no copy from the host, which would make a GPU wait).
  Tensor zeros = c.g.arena()->Alloc({batch, 1, len, len});
  Fill(zeros, 0.f);
  Tensor weights = c.g.arena()->Alloc({batch, 1, len, len});
  Softmax(zeros, weights, Tensor(), /*causal=*/true);
  Var g = graph::MatMul(c.g.Constant(weights.Reshape({batch, len, len})), y);
  if (!config_.aan_no_ffn()) g = Ffn(c, p, g);
  if (config_.aan_no_gate()) return g;
  Var input_gate = graph::Sigmoid(graph::Linear(y, c.P(p + "_Wi"), c.P(p + "_bi")));
  Var forget_gate = graph::Sigmoid(graph::Linear(g, c.P(p + "_Wf"), c.P(p + "_bf")));
  return graph::Add(graph::Mul(input_gate, y), graph::Mul(forget_gate, g));
}

template <typename F>
Var Transformer::Sublayer(Ctx& c, const std::string& ln, Var x, F&& body) const {
  Var scale = c.P(ln + "_scale"), bias = c.P(ln + "_bias");
  // The output's dropout and the residual connection in one pass (DropoutAdd).
  if (config_.pre_norm()) {
    return graph::DropoutAdd(x, body(graph::LayerNorm(x, scale, bias, LayerNormEps())),
                             config_.dropout());
  }
  return graph::LayerNorm(graph::DropoutAdd(x, body(x), config_.dropout()), scale, bias,
                          LayerNormEps());
}

Var Transformer::Logits(graph::Graph& g, const graph::ParamStore& params,
                        const BatchTensors& batch) const {
  Ctx c{g, params};
  const bool tied = config_.tied_embeddings();
  // Encoder.
  Var x = Embed(c, tied ? "Wemb" : "encoder_Wemb", batch.src);
  for (int l = 1; l <= config_.enc_depth(); ++l) {
    std::string p = "encoder_l" + std::to_string(l);
    x = Sublayer(c, p + "_self_Wo_ln", x,
                 [&](Var in) { return Attention(c, p + "_self", in, in, batch.src_mask, false); });
    x = Sublayer(c, p + "_ffn_ffn_ln", x, [&](Var in) { return Ffn(c, p + "_ffn", in); });
  }
  if (config_.pre_norm())
    x = graph::LayerNorm(x, c.P("encoder_final_ln_scale"), c.P("encoder_final_ln_bias"),
                         LayerNormEps());
  Var memory = x;
  // Decoder.
  Var y = Embed(c, tied ? "Wemb" : "decoder_Wemb", batch.tgt_in);
  for (int l = 1; l <= config_.dec_depth(); ++l) {
    std::string p = "decoder_l" + std::to_string(l);
    if (aan_)
      y = Sublayer(c, p + "_aan_ln", y,
                   [&](Var in) { return AverageAttention(c, p + "_aan", in); });
    else
      y = Sublayer(c, p + "_self_Wo_ln", y,
                   [&](Var in) { return Attention(c, p + "_self", in, in, Tensor(), true); });
    y = Sublayer(c, p + "_context_Wo_ln", y, [&](Var in) {
      return Attention(c, p + "_context", in, memory, batch.src_mask, false);
    });
    y = Sublayer(c, p + "_ffn_ffn_ln", y, [&](Var in) { return Ffn(c, p + "_ffn", in); });
  }
  if (config_.pre_norm())
    y = graph::LayerNorm(y, c.P("decoder_final_ln_scale"), c.P("decoder_final_ln_bias"),
                         LayerNormEps());
  // Output layer tied to the target embedding.
  return graph::Linear(y, c.P(tied ? "Wemb" : "decoder_Wemb"), c.P("decoder_ff_logit_out_b"),
                       /*trans_w=*/true);
}

}  // namespace tern::models
