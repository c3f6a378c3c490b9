#include "inference/rnn.h"

#include "common/error.h"
#include "inference/layers.h"
#include "tensor/ops.h"

namespace tern::inference {
namespace {

Shape WithLast(const Shape& s, int64_t last) {
  Shape out = s;
  out.set_dim(-1, last);
  return out;
}

// y (..., out) = x (..., in) @ w (in, out).
Tensor MatMul(const Tensor& x, const Tensor& w, Arena& arena) {
  Tensor y = arena.Alloc(WithLast(x.shape(), w.dim(1)));
  Gemm(x.rank() == 1 ? x.Reshape({1, x.dim(0)}) : x, false, w, false, y);
  return y;
}

Tensor Apply(UnaryOp op, const Tensor& x, Arena& arena) {
  Tensor y = arena.Alloc(x.shape());
  Unary(op, x, y);
  return y;
}

// x (a, b, rest...) -> (b, a, rest...).
Tensor Transpose01(const Tensor& x, Arena& arena) {
  const int64_t a = x.dim(0), b = x.dim(1), rest = x.numel() / (a * b);
  Shape s = x.shape();
  s.set_dim(0, b);
  s.set_dim(1, a);
  Tensor y = arena.Alloc(s);
  Permute0213(x.Reshape({1, a, b, rest}), y.Reshape({1, b, a, rest}));
  return y;
}

// x (rows..., m) + bias (m), a copy.
Tensor PlusBias(const Tensor& x, const Tensor& bias, Arena& arena) {
  Tensor y = arena.Alloc(x.shape());
  Copy(x, y);
  AddBias(y.Reshape({y.numel() / bias.numel(), bias.numel()}), bias);
  return y;
}

Tensor MaybeNorm(const Tensor& x, bool on, const Tensor& s, const Tensor& b, Arena& arena) {
  return on ? LayerNormalize(x, s, b, arena) : x;
}

struct Projected {
  Tensor rz, h;  // (..., 2d), (..., d)
};

// Nematus: LN(x W) + b with layer normalization, x W + b without.
Projected Project(const GruWeights& g, const Tensor& x, Arena& arena) {
  return {
      PlusBias(MaybeNorm(MatMul(x, g.w, arena), g.layer_norm, g.w_lns, g.w_lnb, arena), g.b, arena),
      PlusBias(MaybeNorm(MatMul(x, g.wx, arena), g.layer_norm, g.wx_lns, g.wx_lnb, arena), g.bx,
               arena)};
}

// The GRU of models/rnn_layers.h, one step. in.rz/in.h (B, 2d)/(B, d) or undefined (transition
// cell); s (B, d); mask (B, d) or undefined.
Tensor GruStep(const GruWeights& g, const Projected& in, const Tensor& s, const Tensor& mask,
               Arena& arena) {
  const int64_t batch = s.dim(0), d = s.dim(1);
  Tensor su_rz = MaybeNorm(MatMul(s, g.u, arena), g.layer_norm, g.u_lns, g.u_lnb, arena);
  Tensor su_h = MaybeNorm(MatMul(s, g.ux, arena), g.layer_norm, g.ux_lns, g.ux_lnb, arena);
  Tensor pre_rz = arena.Alloc({batch, 2 * d});
  if (in.rz.defined())
    Add(in.rz, su_rz, pre_rz);
  else
    pre_rz = PlusBias(su_rz, g.b, arena);
  Tensor rz = arena.Alloc({2, batch, d});
  Permute0213(Apply(kSigmoid, pre_rz, arena).Reshape({1, batch, 2, d}),
              rz.Reshape({1, 2, batch, d}));
  Tensor r = rz.Slice(0, 1).Reshape({batch, d}), z = rz.Slice(1, 2).Reshape({batch, d});
  Tensor gated = arena.Alloc({batch, d});
  Mul(r, su_h, gated);
  Tensor pre_h = arena.Alloc({batch, d});
  if (in.h.defined())
    Add(in.h, gated, pre_h);
  else
    pre_h = PlusBias(gated, g.bx, arena);
  Tensor h = Apply(kTanh, pre_h, arena);
  Tensor next = arena.Alloc({batch, d});
  Add(s, h, next, 1.f, -1.f);  // s - h
  Mul(z, next, next);
  Add(h, next, next);  // h + z (s - h)
  if (!mask.defined()) return next;
  Tensor out = arena.Alloc({batch, d});
  Add(next, s, out, 1.f, -1.f);
  Mul(mask, out, out);
  Add(s, out, out);  // s + mask (s' - s)
  return out;
}

// Rows t of the projections, (B, ...).
Projected StepOf(const Projected& p, int64_t t) {
  auto row = [t](const Tensor& x) { return x.Slice(t, t + 1).Reshape({x.dim(1), x.dim(2)}); };
  return {row(p.rz), row(p.h)};
}

// A stack of cells over x (T, B, in) -> (T, B, d); as models' RunGruLayer.
Tensor RunLayer(const std::vector<GruWeights>& cells, const Tensor& x, int d, const Tensor& mask,
                bool reverse, Arena& arena) {
  const int64_t len = x.dim(0), batch = x.dim(1);
  Projected in = Project(cells[0], x, arena);
  Tensor out = arena.Alloc({len, batch, d});
  Tensor s = arena.AllocZeros({batch, d});
  for (int64_t k = 0; k < len; ++k) {
    const int64_t t = reverse ? len - 1 - k : k;
    Tensor m = mask.defined() ? mask.Slice(t, t + 1).Reshape({batch, d}) : Tensor();
    s = GruStep(cells[0], StepOf(in, t), s, m, arena);
    for (size_t j = 1; j < cells.size(); ++j) s = GruStep(cells[j], {}, s, m, arena);
    Copy(s, out.Slice(t, t + 1).Reshape({batch, d}));
  }
  return out;
}

// MLP attention (models/rnn_layers.h).
class Attention {
 public:
  Attention(const Weights& w, const std::string& p, bool ln, const Tensor& context_tm,
            const Tensor& context_bm, const Tensor& src_mask, Arena& arena)
      : context_bm_(context_bm), src_mask_(src_mask), ln_(ln) {
    w_comb_ = w.Get(p + "_W_comb_att");
    u_att_ = w.Get(p + "_U_att");
    if (ln) {
      q_lns_ = w.Get(p + "_W_comb_att_lns");
      q_lnb_ = w.Get(p + "_W_comb_att_lnb");
    }
    mapped_ = PlusBias(MaybeNorm(MatMul(context_tm, w.Get(p + "_Wc_att"), arena), ln,
                                 ln ? w.Get(p + "_Wc_att_lns") : Tensor(),
                                 ln ? w.Get(p + "_Wc_att_lnb") : Tensor(), arena),
                       w.Get(p + "_b_att"), arena);
  }

  // state (B, d) -> context (B, c).
  Tensor Step(const Tensor& state, Arena& arena) const {
    const int64_t len = mapped_.dim(0), batch = mapped_.dim(1), c = mapped_.dim(2);
    Tensor q = MaybeNorm(MatMul(state, w_comb_, arena), ln_, q_lns_, q_lnb_, arena);
    Tensor e = arena.Alloc(mapped_.shape());
    for (int64_t t = 0; t < len; ++t)
      Add(mapped_.Slice(t, t + 1).Reshape({batch, c}), q, e.Slice(t, t + 1).Reshape({batch, c}));
    Unary(kTanh, e, e);
    Tensor scores = Transpose01(MatMul(e, u_att_, arena).Reshape({len, batch}), arena);
    Tensor alpha = arena.Alloc({batch, 1, 1, len});
    Softmax(scores.Reshape({batch, 1, 1, len}), alpha, src_mask_);
    Tensor ctx = arena.Alloc({batch, 1, c});
    Gemm(alpha.Reshape({batch, 1, len}), false, context_bm_, false, ctx);
    return ctx.Reshape({batch, c});
  }

 private:
  Tensor context_bm_, src_mask_, mapped_, w_comb_, u_att_, q_lns_, q_lnb_;
  bool ln_;
};

// lo + relu(x - lo) - relu(x - hi), as models/devlin.cc computes it.
Tensor Clip(const Tensor& x, float lo, float hi, Arena& arena) {
  const int64_t n = x.shape().cols();
  Tensor shift = arena.Alloc({n});
  Fill(shift, -lo);
  Tensor above_lo = Apply(kRelu, PlusBias(x, shift, arena), arena);
  Fill(shift, -hi);
  Tensor above_hi = Apply(kRelu, PlusBias(x, shift, arena), arena);
  Add(above_lo, above_hi, above_lo, 1.f, -1.f);
  if (lo == 0.f) return above_lo;
  Fill(shift, lo);
  return PlusBias(above_lo, shift, arena);
}

std::string CellName(const std::string& layer, int j) {
  return layer + "_cell" + std::to_string(j);
}

}  // namespace

GruWeights LoadGru(const Weights& w, const std::string& p, bool has_input, bool ln) {
  GruWeights g;
  if (has_input) {
    g.w = w.Get(p + "_W");
    g.wx = w.Get(p + "_Wx");
  }
  g.b = w.Get(p + "_b");
  g.bx = w.Get(p + "_bx");
  g.u = w.Get(p + "_U");
  g.ux = w.Get(p + "_Ux");
  g.layer_norm = ln;
  if (ln) {
    if (has_input) {
      g.w_lns = w.Get(p + "_W_lns");
      g.w_lnb = w.Get(p + "_W_lnb");
      g.wx_lns = w.Get(p + "_Wx_lns");
      g.wx_lnb = w.Get(p + "_Wx_lnb");
    }
    g.u_lns = w.Get(p + "_U_lns");
    g.u_lnb = w.Get(p + "_U_lnb");
    g.ux_lns = w.Get(p + "_Ux_lns");
    g.ux_lnb = w.Get(p + "_Ux_lnb");
  }
  return g;
}

RnnModel::RnnModel(const config::ModelConfig& config, const Weights& weights)
    : config_(config), weights_(weights), dim_(config.rnn_dim()) {
  if (config.arch() != "s2s" && config.arch() != "devlin")
    Fail("model.arch '", config.arch(), "' is not an RNN model (s2s, devlin)");
  const bool ln = config.layer_normalization();
  for (bool reverse : {false, true}) {
    auto& layers = reverse ? bw_ : fw_;
    for (int i = 1; i <= config.enc_depth(); ++i) {
      std::string base = reverse ? "encoder_bi_r" : "encoder_bi";
      if (i > 1) base += "_l" + std::to_string(i);
      std::vector<GruWeights> cells;
      for (int j = 1; j <= config.enc_cell_depth(); ++j)
        cells.push_back(LoadGru(weights, i > 1 || j > 1 ? CellName(base, j) : base, j == 1, ln));
      layers.push_back(std::move(cells));
    }
  }
}

Tensor RnnModel::Encode(const Tensor& src, const Tensor& src_mask, Arena& arena) const {
  const int64_t batch = src.dim(0), len = src.dim(1);
  const Tensor& table = W(config_.tied_embeddings() ? "Wemb" : "encoder_Wemb");
  Tensor emb = arena.Alloc({batch, len, table.dim(1)});
  GatherRows(table, src.Reshape({batch * len}), emb.Reshape({batch * len, table.dim(1)}));
  Tensor x = Transpose01(emb, arena);  // (Ts, B, e)
  // The time-major mask (Ts, B, d).
  Tensor mask_tb = Transpose01(src_mask.Reshape({batch, len, 1}), arena);
  Tensor ones = arena.Alloc({1, dim_});
  Fill(ones, 1.f);
  Tensor mask = arena.Alloc({len, batch, dim_});
  Gemm(mask_tb.Reshape({len * batch, 1}), false, ones, false, mask.Reshape({len * batch, dim_}));
  Tensor dirs[2];
  for (int r = 0; r < 2; ++r) {
    const auto& layers = r ? bw_ : fw_;
    Tensor h = x;
    for (size_t i = 0; i < layers.size(); ++i) {
      Tensor y = RunLayer(layers[i], h, dim_, mask, r == 1, arena);
      if (config_.skip() && i > 0) Add(h, y, y);
      h = y;
    }
    dirs[r] = h;
  }
  // Concatenate: (2, Ts*B, d) -> (Ts*B, 2, d) = (Ts, B, 2d).
  Tensor both = arena.Alloc({2, len * batch, dim_});
  Copy(dirs[0], both.Slice(0, 1).Reshape(dirs[0].shape()));
  Copy(dirs[1], both.Slice(1, 2).Reshape(dirs[1].shape()));
  return Transpose01(both, arena).Reshape({len, batch, 2 * dim_});
}

Tensor RnnModel::ForwardLogits(const Tensor& src, const Tensor& src_mask, const Tensor& tgt_in,
                               Arena& arena) const {
  Tensor context = Encode(src, src_mask, arena);
  return config_.arch() == "s2s" ? S2SDecode(context, src_mask, tgt_in, arena)
                                 : DevlinDecode(context, src_mask, tgt_in, arena);
}

Tensor RnnModel::S2SDecode(const Tensor& context_tm, const Tensor& src_mask, const Tensor& tgt_in,
                           Arena& arena) const {
  const bool tied = config_.tied_embeddings(), ln = config_.layer_normalization();
  const int64_t batch = tgt_in.dim(0), len = tgt_in.dim(1), slen = context_tm.dim(0);
  Tensor context_bm = Transpose01(context_tm, arena);
  // Initial state: tanh(masked mean of the context W + b).
  Tensor zeros = arena.AllocZeros({batch, 1, 1, slen}), weights = arena.Alloc({batch, 1, 1, slen});
  Softmax(zeros, weights, src_mask);
  Tensor mean = arena.Alloc({batch, 1, 2 * dim_});
  Gemm(weights.Reshape({batch, 1, slen}), false, context_bm, false, mean);
  Tensor s = Apply(kTanh,
                   Linear(mean.Reshape({batch, 2 * dim_}), W("decoder_ff_state_W"),
                          W("decoder_ff_state_b"), arena),
                   arena);
  const Tensor& table = W(tied ? "Wemb" : "decoder_Wemb");
  const int64_t e = table.dim(1);
  Tensor emb = arena.Alloc({batch, len, e});
  GatherRows(table, tgt_in.Reshape({batch * len}), emb.Reshape({batch * len, e}));
  Tensor y = Transpose01(emb, arena);  // (T, B, e)
  GruWeights cell1 = LoadGru(weights_, "decoder_cell1", true, ln);
  GruWeights cell2 = LoadGru(weights_, "decoder_cell2", true, ln);
  std::vector<GruWeights> transition;
  for (int j = 3; j <= config_.dec_cell_base_depth(); ++j)
    transition.push_back(LoadGru(weights_, CellName("decoder", j), false, ln));
  Attention attention(weights_, "decoder_att", ln, context_tm, context_bm, src_mask, arena);
  Projected in1 = Project(cell1, y, arena);
  Tensor states = arena.Alloc({len, batch, dim_}), contexts = arena.Alloc({len, batch, 2 * dim_});
  for (int64_t t = 0; t < len; ++t) {
    Tensor s1 = GruStep(cell1, StepOf(in1, t), s, Tensor(), arena);
    Tensor c = attention.Step(s1, arena);
    s = GruStep(cell2, Project(cell2, c, arena), s1, Tensor(), arena);
    for (const GruWeights& cell : transition) s = GruStep(cell, {}, s, Tensor(), arena);
    Copy(s, states.Slice(t, t + 1).Reshape({batch, dim_}));
    Copy(c, contexts.Slice(t, t + 1).Reshape({batch, 2 * dim_}));
  }
  Tensor out = states;
  for (int i = 2; i <= config_.dec_depth(); ++i) {
    std::vector<GruWeights> cells;
    for (int j = 1; j <= config_.dec_cell_high_depth(); ++j)
      cells.push_back(LoadGru(weights_, CellName("decoder_l" + std::to_string(i), j), j == 1, ln));
    Tensor next = RunLayer(cells, out, dim_, Tensor(), false, arena);
    if (config_.skip()) Add(out, next, next);
    out = next;
  }
  // Deep output.
  const Tensor* inputs[] = {&y, &out, &contexts};
  Tensor sum;
  for (int k = 0; k < 3; ++k) {
    std::string n = std::to_string(k);
    Tensor part =
        Linear(*inputs[k], W("decoder_ff_logit_l1_W" + n), W("decoder_ff_logit_l1_b" + n), arena);
    if (k == 0)
      sum = part;
    else
      Add(sum, part, sum);
  }
  return Output(Apply(kTanh, sum, arena), W(tied ? "Wemb" : "decoder_ff_logit_l2_W"), arena);
}

// top (T, B, e) -> logits (B, T, V) through `out` (V, e) when tied, else (e, V).
Tensor RnnModel::Output(const Tensor& top, const Tensor& out, Arena& arena) const {
  const int64_t len = top.dim(0), batch = top.dim(1), e = top.dim(2);
  Tensor hidden = Transpose01(top, arena);  // (B, T, e)
  const Tensor& bias = W("decoder_ff_logit_l2_b");
  Tensor logits = arena.Alloc({batch, len, bias.dim(0)});
  Gemm(hidden.Reshape({batch * len, e}), false, out, config_.tied_embeddings(),
       logits.Reshape({batch * len, bias.dim(0)}));
  AddBias(logits.Reshape({batch * len, bias.dim(0)}), bias);
  return logits;
}

Tensor RnnModel::Weight(const std::string& name, Arena& arena) const {
  const float clip = config_.clip_weights();
  return clip > 0.f ? Clip(W(name), -clip, clip, arena) : W(name);
}

Tensor RnnModel::Relu(const Tensor& x, Arena& arena) const {
  if (config_.ffn_activation() == "gelu") return Apply(kGelu, x, arena);
  const float clip = config_.clip_relu();
  return clip > 0.f ? Clip(x, 0.f, clip, arena) : Apply(kRelu, x, arena);
}

// models/devlin.cc's decoder.
Tensor RnnModel::DevlinDecode(const Tensor& context_tm, const Tensor& src_mask,
                              const Tensor& tgt_in, Arena& arena) const {
  const bool tied = config_.tied_embeddings(), ln = config_.layer_normalization();
  const int64_t batch = tgt_in.dim(0), len = tgt_in.dim(1);
  Tensor context_bm = Transpose01(context_tm, arena);
  const Tensor& table = W(tied ? "Wemb" : "decoder_Wemb");
  const int64_t e = table.dim(1);
  Tensor emb = arena.Alloc({batch, len, e});
  GatherRows(table, tgt_in.Reshape({batch * len}), emb.Reshape({batch * len, e}));
  Tensor y = Transpose01(emb, arena);  // (T, B, e)
  Tensor states =
      RunLayer({LoadGru(weights_, "decoder_cell1", true, ln)}, y, dim_, Tensor(), false, arena);
  Attention attention(weights_, "decoder_att", ln, context_tm, context_bm, src_mask, arena);
  Tensor contexts = arena.Alloc({len, batch, 2 * dim_});
  for (int64_t t = 0; t < len; ++t)
    Copy(attention.Step(states.Slice(t, t + 1).Reshape({batch, dim_}), arena),
         contexts.Slice(t, t + 1).Reshape({batch, 2 * dim_}));
  Tensor x = MatMul(states, Weight("decoder_fc1_W0", arena), arena);
  Tensor from_context =
      Linear(contexts, Weight("decoder_fc1_W1", arena), W("decoder_fc1_b"), arena);
  Add(x, from_context, x);
  x = Relu(x, arena);
  Tensor pair_input = x;
  for (int k = 2; k <= config_.fc_depth(); ++k) {
    const std::string p = "decoder_fc" + std::to_string(k);
    x = Relu(Linear(x, Weight(p + "_W", arena), W(p + "_b"), arena), arena);
    if (k % 2 == 1) {
      Add(x, pair_input, x);
      pair_input = x;
    }
  }
  Tensor top = Apply(
      kTanh, Linear(x, Weight("decoder_ff_logit_l1_W", arena), W("decoder_ff_logit_l1_b"), arena),
      arena);
  return Output(top, Weight(tied ? "Wemb" : "decoder_ff_logit_l2_W", arena), arena);
}

}  // namespace tern::inference
