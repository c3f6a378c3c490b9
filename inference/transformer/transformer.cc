#include "inference/transformer/transformer.h"

#include <cstring>
#include <optional>
#include <string>
#include <utility>

#include "common/error.h"
#include "tensor/ops.h"

namespace tern::inference {
namespace {

LinearWeights LoadLinear(const Weights& w, const std::string& name, const Shape& shape,
                         const LinearOptions& options) {
  return MakeLinearWeights(w.GetMatrix(name, shape), w.Scale(name), options, w.ColumnScales(name));
}

// A feed-forward block's second product, whose input is the activation's output: with ReLU most
// of it is zero.
LinearWeights LoadSecondFfnLinear(const Weights& w, const std::string& name, const Shape& shape,
                                  const LinearOptions& options) {
  LinearWeights l = LoadLinear(w, name, shape, options);
  l.skip_zero_inputs = options.skip_zero_activations;
  return l;
}

AttentionParams LoadAttention(const Weights& w, const std::string& p, int64_t d,
                              const LinearOptions& o) {
  AttentionParams a;
  a.wq = LoadLinear(w, p + "_Wq", {d, d}, o);
  a.bq = w.Get(p + "_bq", {d});
  a.wk = LoadLinear(w, p + "_Wk", {d, d}, o);
  a.bk = w.Get(p + "_bk", {d});
  a.wv = LoadLinear(w, p + "_Wv", {d, d}, o);
  a.bv = w.Get(p + "_bv", {d});
  a.wo = LoadLinear(w, p + "_Wo", {d, d}, o);
  a.bo = w.Get(p + "_bo", {d});
  a.ln_scale = w.Get(p + "_Wo_ln_scale", {d});
  a.ln_bias = w.Get(p + "_Wo_ln_bias", {d});
  return a;
}

// A GPU decoder's self-attention weights stacked (AttentionParams::w_qkv), made once; wq, wk, wv
// and their biases then become views of the stack, so that a bf16 model's rounded copies are not
// kept twice.
void StackQueriesKeysValues(AttentionParams& a) {
  const Tensor& wq = a.wq.w;
  if (wq.device() == Device::kCpu) return;
  const Shape w_shape = wq.shape(), b_shape = a.bq.shape();
  a.w_qkv = Tensor::Empty({3, w_shape[0], w_shape[1]}, wq.dtype(), wq.device());
  a.b_qkv = Tensor::Empty({3, b_shape[0]}, DType::kFloat32, wq.device());
  int64_t i = 0;
  for (auto [w, b] : {std::pair{&a.wq, &a.bq}, std::pair{&a.wk, &a.bk}, std::pair{&a.wv, &a.bv}}) {
    CHECK(!w->packed && !w->transposed && w->w.shape() == w_shape && w->w.dtype() == wq.dtype())
        << "stacking the self-attention's weights";
    const Tensor w_view = a.w_qkv.Slice(i, i + 1).Reshape(w_shape);
    const Tensor b_view = a.b_qkv.Slice(i, i + 1).Reshape(b_shape);
    Copy(w->w, w_view);
    Copy(*b, b_view);
    w->w = w_view;
    *b = b_view;
    ++i;
  }
}

FfnParams LoadFfn(const Weights& w, const std::string& p, int64_t d, int64_t ffn,
                  const LinearOptions& o) {
  FfnParams f;
  f.w1 = LoadLinear(w, p + "_W1", {d, ffn}, o);
  f.b1 = w.Get(p + "_b1", {ffn});
  f.w2 = LoadSecondFfnLinear(w, p + "_W2", {ffn, d}, o);
  f.b2 = w.Get(p + "_b2", {d});
  f.ln_scale = w.Get(p + "_ffn_ln_scale", {d});
  f.ln_bias = w.Get(p + "_ffn_ln_bias", {d});
  return f;
}

AanParams LoadAan(const Weights& w, const std::string& p, const config::ModelConfig& config,
                  const LinearOptions& o) {
  const int64_t d = config.emb_dim(), ffn = config.ffn_dim();
  AanParams a;
  a.has_ffn = !config.aan_no_ffn();
  a.has_gate = !config.aan_no_gate();
  if (a.has_ffn) {
    a.ffn.w1 = LoadLinear(w, p + "_W1", {d, ffn}, o);
    a.ffn.b1 = w.Get(p + "_b1", {ffn});
    a.ffn.w2 = LoadSecondFfnLinear(w, p + "_W2", {ffn, d}, o);
    a.ffn.b2 = w.Get(p + "_b2", {d});
  }
  if (a.has_gate) {
    a.wi = LoadLinear(w, p + "_Wi", {d, d}, o);
    a.bi = w.Get(p + "_bi", {d});
    a.wf = LoadLinear(w, p + "_Wf", {d, d}, o);
    a.bf = w.Get(p + "_bf", {d});
  }
  a.ln_scale = w.Get(p + "_ln_scale", {d});
  a.ln_bias = w.Get(p + "_ln_bias", {d});
  return a;
}

}  // namespace

std::vector<std::pair<std::string, Shape>> TransformerParameterShapes(
    const config::ModelConfig& config, int64_t vocab_size) {
  const int64_t d = config.emb_dim(), ffn = config.ffn_dim(), v = vocab_size;
  std::vector<std::pair<std::string, Shape>> shapes;
  if (config.tied_embeddings()) {
    shapes.push_back({"Wemb", {v, d}});
  } else {
    shapes.push_back({"encoder_Wemb", {v, d}});
    shapes.push_back({"decoder_Wemb", {v, d}});
  }
  shapes.push_back({"decoder_ff_logit_out_b", {v}});
  auto attention = [&](const std::string& p) {
    for (const char* m : {"q", "k", "v", "o"}) {
      shapes.push_back({p + "_W" + m, {d, d}});
      shapes.push_back({p + "_b" + m, {d}});
    }
    shapes.push_back({p + "_Wo_ln_scale", {d}});
    shapes.push_back({p + "_Wo_ln_bias", {d}});
  };
  auto feed_forward = [&](const std::string& p) {
    shapes.push_back({p + "_W1", {d, ffn}});
    shapes.push_back({p + "_b1", {ffn}});
    shapes.push_back({p + "_W2", {ffn, d}});
    shapes.push_back({p + "_b2", {d}});
    shapes.push_back({p + "_ffn_ln_scale", {d}});
    shapes.push_back({p + "_ffn_ln_bias", {d}});
  };
  for (int l = 1; l <= config.enc_depth(); ++l) {
    const std::string p = "encoder_l" + std::to_string(l) + "_";
    attention(p + "self");
    feed_forward(p + "ffn");
  }
  for (int l = 1; l <= config.dec_depth(); ++l) {
    const std::string p = "decoder_l" + std::to_string(l) + "_";
    if (config.arch() == "aan") {
      const std::string a = p + "aan";
      if (!config.aan_no_ffn()) {
        shapes.push_back({a + "_W1", {d, ffn}});
        shapes.push_back({a + "_b1", {ffn}});
        shapes.push_back({a + "_W2", {ffn, d}});
        shapes.push_back({a + "_b2", {d}});
      }
      if (!config.aan_no_gate()) {
        for (const char* gate : {"i", "f"}) {
          shapes.push_back({a + "_W" + gate, {d, d}});
          shapes.push_back({a + "_b" + gate, {d}});
        }
      }
      shapes.push_back({a + "_ln_scale", {d}});
      shapes.push_back({a + "_ln_bias", {d}});
    } else {
      attention(p + "self");
    }
    attention(p + "context");
    feed_forward(p + "ffn");
  }
  if (config.pre_norm()) {
    for (const char* stack : {"encoder", "decoder"}) {
      shapes.push_back({std::string(stack) + "_final_ln_scale", {d}});
      shapes.push_back({std::string(stack) + "_final_ln_bias", {d}});
    }
  }
  return shapes;
}

Transformer::Transformer(const config::ModelConfig& config, const Weights& weights,
                         const LinearOptions& linear)
    : config_(config),
      dim_(config.emb_dim()),
      ffn_dim_(config.ffn_dim()),
      heads_(config.heads()),
      pre_norm_(config.pre_norm()),
      aan_(config.arch() == "aan"),
      activation_(ParseActivation(config.ffn_activation())),
      positions_style_(ParsePositions(config.positions())),
      ln_eps_(config.has_layer_norm_eps() ? config.layer_norm_eps() : kLayerNormEps) {
  if (!config.arch().empty() && config.arch() != "transformer" && !aan_) {
    Fail("model.arch '", config.arch(), "' is not a transformer");
  }
  if (dim_ <= 2 || dim_ % 2 != 0 || heads_ <= 0 || dim_ % heads_ != 0 || ffn_dim_ <= 0 ||
      config.enc_depth() <= 0 || config.dec_depth() <= 0) {
    Fail("model config (emb_dim ", dim_, ", heads ", heads_, ", ffn_dim ", ffn_dim_, ", depths ",
         config.enc_depth(), "/", config.dec_depth(),
         ") is not a valid transformer: emb_dim must be even and a multiple of heads");
  }
  const int64_t d = dim_;
  const std::string emb_name = config.tied_embeddings() ? "Wemb" : "decoder_Wemb";
  const Tensor& output_embedding = weights.Get(emb_name);
  if (output_embedding.rank() != 2 || output_embedding.dim(0) <= kEosId) {
    Fail(weights.source(), ": model parameter '", emb_name, "' has shape ",
         output_embedding.shape().ToString(), "; it must be (vocabulary size, ", d, ")");
  }
  vocab_size_ = output_embedding.dim(0);
  if (output_embedding.device() != Device::kCpu) {
    if (linear.quantize || linear.autotune || linear.integer_output_layer) {
      Fail("integer products (--quantize, --autotune, --integer-output) run on the CPU only; ",
           "a GPU decodes in float (or with --precision bf16|fp16)");
    }
  }
  const int64_t v = vocab_size_;
  if (config.tied_embeddings()) {
    src_emb_ = tgt_emb_ = weights.Get("Wemb", {v, d});
  } else {
    src_emb_ = weights.Get("encoder_Wemb", {v, d});
    tgt_emb_ = weights.Get("decoder_Wemb", {v, d});
  }
  out_bias_ = weights.Get("decoder_ff_logit_out_b", {v});
  output_ =
      MakeOutputWeights(tgt_emb_, OutputLayerType(weights, linear), linear.autotune, linear.inputs);
  for (int l = 1; l <= config.enc_depth(); ++l) {
    const std::string p = "encoder_l" + std::to_string(l) + "_";
    enc_.push_back({LoadAttention(weights, p + "self", d, linear),
                    LoadFfn(weights, p + "ffn", d, ffn_dim_, linear)});
  }
  for (int l = 1; l <= config.dec_depth(); ++l) {
    const std::string p = "decoder_l" + std::to_string(l) + "_";
    DecoderLayerParams layer;
    if (aan_) {
      layer.aan = LoadAan(weights, p + "aan", config, linear);
    } else {
      layer.self = LoadAttention(weights, p + "self", d, linear);
      StackQueriesKeysValues(layer.self);
    }
    layer.context = LoadAttention(weights, p + "context", d, linear);
    layer.ffn = LoadFfn(weights, p + "ffn", d, ffn_dim_, linear);
    dec_.push_back(std::move(layer));
  }
  if (pre_norm_) {
    enc_final_scale_ = weights.Get("encoder_final_ln_scale", {d});
    enc_final_bias_ = weights.Get("encoder_final_ln_bias", {d});
    dec_final_scale_ = weights.Get("decoder_final_ln_scale", {d});
    dec_final_bias_ = weights.Get("decoder_final_ln_bias", {d});
  }
  if (device() != Device::kCpu) {
    positions_ = PositionTable(kDevicePositions, d, device(), positions_style_);
  }
}

Tensor Transformer::SublayerInput(const Tensor& x, const Tensor& ln_scale, const Tensor& ln_bias,
                                  Arena& arena) const {
  return pre_norm_ ? LayerNormalize(x, ln_scale, ln_bias, arena, ln_eps_) : x;
}

Tensor Transformer::SublayerOutput(const Tensor& x, const Tensor& f, const Tensor& ln_scale,
                                   const Tensor& ln_bias, Arena& arena) const {
  Tensor sum = arena.Alloc(x.shape());
  Add(x, f.Reshape(x.shape()), sum);
  return SublayerNorm(sum, ln_scale, ln_bias, arena);
}

Tensor Transformer::SublayerNorm(const Tensor& sum, const Tensor& ln_scale, const Tensor& ln_bias,
                                 Arena& arena) const {
  return pre_norm_ ? sum : LayerNormalize(sum, ln_scale, ln_bias, arena, ln_eps_);
}

Tensor Transformer::SelfAttentionBlock(const AttentionParams& p, const Tensor& x,
                                       const Tensor& key_mask, bool causal, Arena& arena) const {
  Tensor in = SublayerInput(x, p.ln_scale, p.ln_bias, arena);
  Tensor q = SplitHeads(Linear(in, p.wq, p.bq, arena), heads_, arena);
  Tensor k = SplitHeads(Linear(in, p.wk, p.bk, arena), heads_, arena);
  Tensor v = SplitHeads(Linear(in, p.wv, p.bv, arena), heads_, arena);
  Tensor context = AttendHeads(q, k, v, key_mask, causal, arena);
  return SublayerNorm(Linear(context, p.wo, p.bo, arena, x), p.ln_scale, p.ln_bias, arena);
}

Tensor Transformer::AanBlock(const AanParams& p, const Tensor& x, Arena& arena) const {
  Tensor in = SublayerInput(x, p.ln_scale, p.ln_bias, arena);
  Tensor g = AverageAttentionBody(p, in, CumulativeAverage(in, arena), activation_, arena);
  return SublayerOutput(x, g, p.ln_scale, p.ln_bias, arena);
}

void Transformer::ContextKeysValues(const AttentionParams& p, const Tensor& encoded, Arena& arena,
                                    Tensor* k, Tensor* v) const {
  *k = SplitHeads(Linear(encoded, p.wk, p.bk, arena), heads_, arena);
  *v = SplitHeads(Linear(encoded, p.wv, p.bv, arena), heads_, arena);
}

Tensor Transformer::ContextBlock(const AttentionParams& p, const Tensor& x, const Tensor& k,
                                 const Tensor& v, const Tensor& src_mask, Arena& arena,
                                 const int32_t* kv_sentence) const {
  Tensor in = SublayerInput(x, p.ln_scale, p.ln_bias, arena);
  Tensor q = SplitHeads(Linear(in, p.wq, p.bq, arena), heads_, arena);
  Tensor context = AttendHeads(q, k, v, src_mask, /*causal=*/false, arena, kv_sentence);
  return SublayerNorm(Linear(context, p.wo, p.bo, arena, x), p.ln_scale, p.ln_bias, arena);
}

Tensor Transformer::FfnBlock(const FfnParams& p, const Tensor& x, Arena& arena) const {
  Tensor in = SublayerInput(x, p.ln_scale, p.ln_bias, arena);
  return SublayerNorm(FeedForward(in, p, activation_, arena, x), p.ln_scale, p.ln_bias, arena);
}

Tensor Transformer::OutputInput(const Tensor& h, Arena& arena) const {
  return pre_norm_ ? LayerNormalize(h, dec_final_scale_, dec_final_bias_, arena, ln_eps_) : h;
}

Tensor Transformer::OutputLogits(const Tensor& h, Arena& arena) const {
  return Linear(OutputInput(h, arena).Flatten2D(), output_, out_bias_, arena);
}

Tensor Transformer::Encode(const Tensor& src, const Tensor& src_mask, Arena& arena) const {
  CHECK(src.rank() == 2 && src.dtype() == DType::kInt32) << "src must be int32 (B, S)";
  CHECK(src_mask.shape() == src.shape()) << "src_mask must be (B, S)";
  Tensor x = Embed(src_emb_, src, 0, arena, positions_, positions_style_);
  for (const EncoderLayerParams& layer : enc_) {
    x = SelfAttentionBlock(layer.self, x, src_mask, /*causal=*/false, arena);
    x = FfnBlock(layer.ffn, x, arena);
  }
  if (pre_norm_) x = LayerNormalize(x, enc_final_scale_, enc_final_bias_, arena, ln_eps_);
  return x;
}

Tensor Transformer::ForwardLogits(const Tensor& src, const Tensor& src_mask, const Tensor& tgt_in,
                                  Arena& arena) const {
  CHECK(tgt_in.rank() == 2 && tgt_in.dtype() == DType::kInt32 && tgt_in.dim(0) == src.dim(0))
      << "tgt_in must be int32 (B, T)";
  Tensor encoded = Encode(src, src_mask, arena);
  Tensor y = Embed(tgt_emb_, tgt_in, 0, arena, positions_, positions_style_);
  for (const DecoderLayerParams& layer : dec_) {
    y = aan_ ? AanBlock(layer.aan, y, arena)
             : SelfAttentionBlock(layer.self, y, Tensor(), /*causal=*/true, arena);
    Tensor k, v;
    ContextKeysValues(layer.context, encoded, arena, &k, &v);
    y = ContextBlock(layer.context, y, k, v, src_mask, arena);
    y = FfnBlock(layer.ffn, y, arena);
  }
  return OutputLogits(y, arena).Reshape({tgt_in.dim(0), tgt_in.dim(1), vocab_size_});
}

}  // namespace tern::inference
