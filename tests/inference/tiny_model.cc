#include "tiny_model.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

namespace tern::inference::testing {
namespace {

using Matrix = std::vector<float>;  // row-major (rows, cols)

class Builder {
 public:
  Builder(TinyModel* model, uint32_t seed) : model_(model), rng_(seed) {}
  void Random(const std::string& name, const Shape& shape, float scale, float mean = 0.f) {
    std::uniform_real_distribution<float> u(-scale, scale);
    std::vector<float> values(shape.numel());
    for (float& v : values) v = mean + u(rng_);
    Tensor t = Tensor::FromVector(shape, values);
    model_->tensors.push_back({name, t});
    model_->weights.Add(name, t);
  }

 private:
  TinyModel* model_;
  std::mt19937 rng_;
};

void AddAttention(Builder& b, const std::string& p, int64_t d) {
  const float s = 1.f / std::sqrt(static_cast<float>(d));
  for (const char* m : {"q", "k", "v", "o"}) {
    b.Random(p + "_W" + m, {d, d}, 1.7f * s);
    b.Random(p + "_b" + m, {d}, 0.1f);
  }
  b.Random(p + "_Wo_ln_scale", {d}, 0.2f, 1.f);
  b.Random(p + "_Wo_ln_bias", {d}, 0.1f);
}

void AddFfn(Builder& b, const std::string& p, int64_t d, int64_t ffn) {
  b.Random(p + "_W1", {d, ffn}, 1.7f / std::sqrt(static_cast<float>(d)));
  b.Random(p + "_b1", {ffn}, 0.1f);
  b.Random(p + "_W2", {ffn, d}, 1.7f / std::sqrt(static_cast<float>(ffn)));
  b.Random(p + "_b2", {d}, 0.1f);
  b.Random(p + "_ffn_ln_scale", {d}, 0.2f, 1.f);
  b.Random(p + "_ffn_ln_bias", {d}, 0.1f);
}

void AddAan(Builder& b, const std::string& p, const TinyModelSpec& spec) {
  const int64_t d = spec.dim, ffn = spec.ffn;
  if (spec.aan_ffn) {
    b.Random(p + "_W1", {d, ffn}, 1.7f / std::sqrt(static_cast<float>(d)));
    b.Random(p + "_b1", {ffn}, 0.1f);
    b.Random(p + "_W2", {ffn, d}, 1.7f / std::sqrt(static_cast<float>(ffn)));
    b.Random(p + "_b2", {d}, 0.1f);
  }
  if (spec.aan_gate) {
    for (const char* gate : {"i", "f"}) {
      b.Random(p + "_W" + gate, {d, d}, 1.7f / std::sqrt(static_cast<float>(d)));
      b.Random(p + "_b" + gate, {d}, 0.1f);
    }
  }
  b.Random(p + "_ln_scale", {d}, 0.2f, 1.f);
  b.Random(p + "_ln_bias", {d}, 0.1f);
}

// --- the reference forward pass ---

const float* W(const TinyModel& m, const std::string& name) { return m.weights.Get(name).f32(); }

// x (n, in) @ w (in, out) + b
Matrix Affine(const Matrix& x, int64_t n, int64_t in, const float* w, const float* b, int64_t out) {
  Matrix y(n * out);
  for (int64_t r = 0; r < n; ++r)
    for (int64_t o = 0; o < out; ++o) {
      double s = b[o];
      for (int64_t i = 0; i < in; ++i) s += static_cast<double>(x[r * in + i]) * w[i * out + o];
      y[r * out + o] = static_cast<float>(s);
    }
  return y;
}

// model.layer_norm_eps and model.positions of `m`, as the runtime reads them (unset: Marian's).
double Eps(const TinyModel& m) {
  return m.config.model().has_layer_norm_eps() ? m.config.model().layer_norm_eps() : 1e-6;
}
bool Vaswani(const TinyModel& m) { return m.config.model().positions() == "vaswani"; }

Matrix Norm(const Matrix& x, int64_t n, int64_t d, const float* scale, const float* bias,
            double eps) {
  Matrix y(n * d);
  for (int64_t r = 0; r < n; ++r) {
    double mean = 0, var = 0;
    for (int64_t i = 0; i < d; ++i) mean += x[r * d + i];
    mean /= d;
    for (int64_t i = 0; i < d; ++i) var += (x[r * d + i] - mean) * (x[r * d + i] - mean);
    var /= d;
    for (int64_t i = 0; i < d; ++i)
      y[r * d + i] =
          static_cast<float>((x[r * d + i] - mean) / std::sqrt(var + eps) * scale[i] + bias[i]);
  }
  return y;
}

Matrix Embed(const float* table, const std::vector<int32_t>& ids, int64_t d, bool vaswani) {
  Matrix x(ids.size() * d);
  for (size_t t = 0; t < ids.size(); ++t)
    for (int64_t i = 0; i < d / 2; ++i) {
      double arg = t * std::exp(-std::log(10000.0) * i / (vaswani ? d / 2 : d / 2 - 1));
      x[t * d + i] = table[ids[t] * d + i] * std::sqrt(d) + std::sin(arg);
      x[t * d + d / 2 + i] = table[ids[t] * d + d / 2 + i] * std::sqrt(d) + std::cos(arg);
    }
  return x;
}

// Multi-head attention of queries xq (tq, d) over memory xm (tk, d).
Matrix Attention(const TinyModel& m, const std::string& p, const Matrix& xq, int64_t tq,
                 const Matrix& xm, int64_t tk, bool causal, int64_t d, int heads) {
  Matrix q = Affine(xq, tq, d, W(m, p + "_Wq"), W(m, p + "_bq"), d);
  Matrix k = Affine(xm, tk, d, W(m, p + "_Wk"), W(m, p + "_bk"), d);
  Matrix v = Affine(xm, tk, d, W(m, p + "_Wv"), W(m, p + "_bv"), d);
  const int64_t dk = d / heads;
  Matrix ctx(tq * d, 0.f);
  for (int h = 0; h < heads; ++h)
    for (int64_t i = 0; i < tq; ++i) {
      std::vector<double> s(tk);
      double mx = -1e30;
      const int64_t limit = causal ? i + 1 : tk;
      for (int64_t j = 0; j < limit; ++j) {
        double dot = 0;
        for (int64_t e = 0; e < dk; ++e) dot += q[i * d + h * dk + e] * k[j * d + h * dk + e];
        s[j] = dot / std::sqrt(static_cast<double>(dk));
        mx = std::max(mx, s[j]);
      }
      double z = 0;
      for (int64_t j = 0; j < limit; ++j) z += (s[j] = std::exp(s[j] - mx));
      for (int64_t e = 0; e < dk; ++e) {
        double c = 0;
        for (int64_t j = 0; j < limit; ++j) c += s[j] / z * v[j * d + h * dk + e];
        ctx[i * d + h * dk + e] = static_cast<float>(c);
      }
    }
  return Affine(ctx, tq, d, W(m, p + "_Wo"), W(m, p + "_bo"), d);
}

Matrix Ffn(const TinyModel& m, const std::string& p, const Matrix& x, int64_t n, int64_t d,
           int64_t ffn, const std::string& act) {
  Matrix h = Affine(x, n, d, W(m, p + "_W1"), W(m, p + "_b1"), ffn);
  for (float& v : h) {
    if (act == "gelu") {
      v = static_cast<float>(0.5 * v *
                             (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v))));
    } else if (act == "swish") {
      v = static_cast<float>(v / (1 + std::exp(-static_cast<double>(v))));
    } else {
      v = std::max(v, 0.f);
    }
  }
  return Affine(h, n, ffn, W(m, p + "_W2"), W(m, p + "_b2"), d);
}

// One sublayer with its residual and norm; f maps the sublayer input to its output.
template <typename F>
Matrix Sublayer(const TinyModel& m, const std::string& ln, const Matrix& x, int64_t n, int64_t d,
                bool pre, F f) {
  const float *scale = W(m, ln + "_scale"), *bias = W(m, ln + "_bias");
  Matrix in = pre ? Norm(x, n, d, scale, bias, Eps(m)) : x;
  Matrix out = f(in);
  for (size_t i = 0; i < out.size(); ++i) out[i] += x[i];
  return pre ? out : Norm(out, n, d, scale, bias, Eps(m));
}

// Copies token t's rows of the embeddings and its output bias to token t + 1, t = 4, 6, ...
void MakeTwins(const std::vector<std::string>& embeddings, TinyModel* model) {
  float* bias = model->weights.Get("decoder_ff_logit_out_b").f32();
  for (const std::string& name : embeddings) {
    const Tensor& emb = model->weights.Get(name);
    const int64_t v = emb.dim(0), d = emb.dim(1);
    for (int64_t t = 4; t + 1 < v; t += 2) {
      std::copy(emb.f32() + t * d, emb.f32() + (t + 1) * d, emb.f32() + (t + 1) * d);
      bias[t + 1] = bias[t];
    }
  }
}

}  // namespace

TinyModel MakeTinyModel(const TinyModelSpec& spec) {
  TinyModel model;
  config::ModelConfig* c = model.config.mutable_model();
  c->set_arch(spec.aan ? "aan" : "transformer");
  c->set_aan_no_ffn(!spec.aan_ffn);
  c->set_aan_no_gate(!spec.aan_gate);
  c->set_emb_dim(spec.dim);
  c->set_ffn_dim(spec.ffn);
  c->set_heads(spec.heads);
  c->set_enc_depth(spec.enc_depth);
  c->set_dec_depth(spec.dec_depth);
  c->set_tied_embeddings(spec.tied);
  c->set_pre_norm(spec.pre_norm);
  c->set_ffn_activation(spec.activation);
  // Set only when not the defaults, as a Marian import leaves them.
  if (spec.positions != "marian") c->set_positions(spec.positions);
  if (spec.layer_norm_eps != 1e-6f) c->set_layer_norm_eps(spec.layer_norm_eps);
  c->set_max_length(64);
  model.config.mutable_data()->set_vocab_size(spec.vocab);
  Builder b(&model, spec.seed);
  const int64_t d = spec.dim, v = spec.vocab;
  if (spec.tied) {
    b.Random("Wemb", {v, d}, spec.emb_scale);
  } else {
    b.Random("encoder_Wemb", {v, d}, spec.emb_scale);
    b.Random("decoder_Wemb", {v, d}, spec.emb_scale);
  }
  b.Random("decoder_ff_logit_out_b", {v}, 0.5f);
  model.weights.Get("decoder_ff_logit_out_b").f32()[3] += spec.eos_bias;
  for (int l = 1; l <= spec.enc_depth; ++l) {
    const std::string p = "encoder_l" + std::to_string(l) + "_";
    AddAttention(b, p + "self", d);
    AddFfn(b, p + "ffn", d, spec.ffn);
  }
  for (int l = 1; l <= spec.dec_depth; ++l) {
    const std::string p = "decoder_l" + std::to_string(l) + "_";
    if (spec.aan) {
      AddAan(b, p + "aan", spec);
    } else {
      AddAttention(b, p + "self", d);
    }
    AddAttention(b, p + "context", d);
    AddFfn(b, p + "ffn", d, spec.ffn);
  }
  if (spec.pre_norm) {
    for (const char* stack : {"encoder", "decoder"}) {
      b.Random(std::string(stack) + "_final_ln_scale", {d}, 0.2f, 1.f);
      b.Random(std::string(stack) + "_final_ln_bias", {d}, 0.1f);
    }
  }
  if (spec.twins)
    MakeTwins(spec.tied ? std::vector<std::string>{"Wemb"}
                        : std::vector<std::string>{"encoder_Wemb", "decoder_Wemb"},
              &model);
  return model;
}

std::vector<float> ReferenceLogits(const TinyModel& model, const std::vector<int32_t>& src,
                                   const std::vector<int32_t>& tgt_in) {
  const config::ModelConfig& c = model.config.model();
  const int64_t d = c.emb_dim(), s = src.size(), t = tgt_in.size(), ffn = c.ffn_dim();
  const bool pre = c.pre_norm();
  const std::string& act = c.ffn_activation();
  const std::string src_emb = c.tied_embeddings() ? "Wemb" : "encoder_Wemb";
  const std::string tgt_emb = c.tied_embeddings() ? "Wemb" : "decoder_Wemb";
  Matrix x = Embed(W(model, src_emb), src, d, Vaswani(model));
  for (int l = 1; l <= c.enc_depth(); ++l) {
    const std::string p = "encoder_l" + std::to_string(l) + "_";
    x = Sublayer(model, p + "self_Wo_ln", x, s, d, pre, [&](const Matrix& in) {
      return Attention(model, p + "self", in, s, in, s, false, d, c.heads());
    });
    x = Sublayer(model, p + "ffn_ffn_ln", x, s, d, pre,
                 [&](const Matrix& in) { return Ffn(model, p + "ffn", in, s, d, ffn, act); });
  }
  if (pre)
    x = Norm(x, s, d, W(model, "encoder_final_ln_scale"), W(model, "encoder_final_ln_bias"),
             Eps(model));
  Matrix y = Embed(W(model, tgt_emb), tgt_in, d, Vaswani(model));
  for (int l = 1; l <= c.dec_depth(); ++l) {
    const std::string p = "decoder_l" + std::to_string(l) + "_";
    y = Sublayer(model, p + "self_Wo_ln", y, t, d, pre, [&](const Matrix& in) {
      return Attention(model, p + "self", in, t, in, t, true, d, c.heads());
    });
    y = Sublayer(model, p + "context_Wo_ln", y, t, d, pre, [&](const Matrix& in) {
      return Attention(model, p + "context", in, t, x, s, false, d, c.heads());
    });
    y = Sublayer(model, p + "ffn_ffn_ln", y, t, d, pre,
                 [&](const Matrix& in) { return Ffn(model, p + "ffn", in, t, d, ffn, act); });
  }
  if (pre)
    y = Norm(y, t, d, W(model, "decoder_final_ln_scale"), W(model, "decoder_final_ln_bias"),
             Eps(model));
  const int64_t v = model.weights.Get(tgt_emb).dim(0);
  const float* e = W(model, tgt_emb);
  const float* b = W(model, "decoder_ff_logit_out_b");
  Matrix logits(t * v);
  for (int64_t i = 0; i < t; ++i)
    for (int64_t o = 0; o < v; ++o) {
      double sum = b[o];
      for (int64_t k = 0; k < d; ++k) sum += static_cast<double>(y[i * d + k]) * e[o * d + k];
      logits[i * v + o] = static_cast<float>(sum);
    }
  return logits;
}

}  // namespace tern::inference::testing
