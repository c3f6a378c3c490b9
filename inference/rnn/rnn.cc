#include "inference/rnn/rnn.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <tuple>

#include "common/error.h"
#include "inference/rnn/rnn_kernels.h"
#include "tensor/ops.h"

namespace tern::inference {

using namespace rnn_internal;  // NOLINT: this module's own kernels

namespace {

Tensor Transposed(const Tensor& w) {  // (a, b) float -> owning (b, a), on w's device
  const int64_t a = w.dim(0), b = w.dim(1);
  Tensor t = Tensor::Empty({b, a}, DType::kFloat32, w.device());
  Permute0213(w.Reshape({1, a, b, 1}), t.Reshape({1, b, a, 1}));
  return t;
}

Tensor Clipped(const Tensor& w, float clip) {  // owning copy, on w's device
  Tensor t = Tensor::Empty(w.shape(), DType::kFloat32, w.device());
  Copy(w, t);
  Clamp(t, -clip, clip);
  return t;
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

std::string CellName(const std::string& layer, int j) {
  return layer + "_cell" + std::to_string(j);
}

}  // namespace

bool IsClippedWeightName(const config::ModelConfig& config, const std::string& name) {
  if (config.arch() != "devlin" || config.clip_weights() <= 0.f) return false;
  if (name == "decoder_fc1_W0" || name == "decoder_fc1_W1" || name == "decoder_ff_logit_l1_W" ||
      name == "decoder_ff_logit_l2_W") {
    return true;
  }
  for (int k = 2; k <= config.fc_depth(); ++k) {
    if (name == "decoder_fc" + std::to_string(k) + "_W") return true;
  }
  return false;
}

std::vector<NamedTensor> ClipForExport(const config::ModelConfig& config,
                                       const std::vector<NamedTensor>& tensors) {
  std::vector<NamedTensor> out;
  for (const NamedTensor& t : tensors) {
    if (IsClippedWeightName(config, t.name) && t.tensor.dtype() == DType::kFloat32) {
      out.push_back({t.name, Clipped(t.tensor, config.clip_weights()), t.scale});
    } else {
      out.push_back(t);
    }
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// The model.

LinearWeights RnnModel::Matrix(const std::string& name, const Shape& shape, bool clipped) {
  const Tensor& t = weights_.GetMatrix(name, shape);
  const float clip = config_.clip_weights();
  if (clipped && clip > 0.f && t.dtype() == DType::kFloat32) {
    owned_.push_back(Clipped(t, clip));
    return MakeLinearWeights(owned_.back(), 1.f, linear_);
  }
  return MakeLinearWeights(t, weights_.Scale(name), linear_, weights_.ColumnScales(name));
}

GruWeights RnnModel::Gru(const std::string& p, int64_t input_dim) {
  const Weights& w = weights_;
  const int64_t d = dim_;
  GruWeights g;
  g.has_input = input_dim > 0;
  if (g.has_input) {
    g.w = Matrix(p + "_W", {input_dim, 2 * d}, false);
    g.wx = Matrix(p + "_Wx", {input_dim, d}, false);
  }
  g.b = w.Get(p + "_b", {2 * d});
  g.bx = w.Get(p + "_bx", {d});
  g.u = Matrix(p + "_U", {d, 2 * d}, false);
  g.ux = Matrix(p + "_Ux", {d, d}, false);
  g.layer_norm = config_.layer_normalization();
  if (g.layer_norm) {
    if (g.has_input) {
      g.w_lns = w.Get(p + "_W_lns", {2 * d});
      g.w_lnb = w.Get(p + "_W_lnb", {2 * d});
      g.wx_lns = w.Get(p + "_Wx_lns", {d});
      g.wx_lnb = w.Get(p + "_Wx_lnb", {d});
    }
    g.u_lns = w.Get(p + "_U_lns", {2 * d});
    g.u_lnb = w.Get(p + "_U_lnb", {2 * d});
    g.ux_lns = w.Get(p + "_Ux_lns", {d});
    g.ux_lnb = w.Get(p + "_Ux_lnb", {d});
  }
  return g;
}

RnnModel::RnnModel(const config::ModelConfig& config, const Weights& weights,
                   const LinearOptions& linear, const RnnOptions& options)
    : config_(config),
      weights_(weights),
      linear_(linear),
      options_(options),
      s2s_(config.arch() == "s2s"),
      dim_(config.rnn_dim()),
      emb_(config.emb_dim()) {
  if (config.arch() != "s2s" && config.arch() != "devlin")
    Fail("model.arch '", config.arch(), "' is not an RNN model (s2s, devlin)");
  if (options.precomputed_embeddings < 0) Fail("precomputed embeddings must be >= 0");
  // The layer counts the weights are read by: with none, an encoder would hand on its
  // embeddings (emb_dim wide, not rnn_dim) and the concatenation of its directions fail.
  for (const auto& [field, value, least] :
       {std::tuple<const char*, int, int>{"enc_depth", config.enc_depth(), 1},
        {"enc_cell_depth", config.enc_cell_depth(), 1},
        {"dec_depth", config.dec_depth(), 1},
        {"dec_cell_base_depth", config.dec_cell_base_depth(), s2s_ ? 2 : 0},
        {"dec_cell_high_depth", config.dec_cell_high_depth(),
         s2s_ && config.dec_depth() > 1 ? 1 : 0}}) {
    if (value < least)
      Fail(weights.source(), ": model.", field, " is ", value, "; an RNN model (", config.arch(),
           ") needs at least ", least);
  }
  const bool tied = config.tied_embeddings();
  const int64_t d = dim_, e = emb_, c = 2 * dim_, f = config.ffn_dim();
  out_bias_ = weights.Get("decoder_ff_logit_l2_b");
  if (out_bias_.rank() != 1) Fail(weights.source(), ": decoder_ff_logit_l2_b must be a vector");
  const int64_t v = out_bias_.dim(0);
  src_emb_ = weights.Get(tied ? "Wemb" : "encoder_Wemb", {v, e});
  tgt_emb_ = weights.Get(tied ? "Wemb" : "decoder_Wemb", {v, e});
  const float clip = s2s_ ? 0.f : config.clip_weights();
  if (tied) {
    out_emb_ = tgt_emb_;
  } else {
    const Tensor& l2 = weights.Get("decoder_ff_logit_l2_W", {e, v});
    if (l2.dtype() != DType::kFloat32)
      Fail(weights.source(), ": decoder_ff_logit_l2_W must be float32");
    owned_.push_back(Transposed(l2));
    out_emb_ = owned_.back();
  }
  if (clip > 0.f) {
    owned_.push_back(Clipped(out_emb_, clip));
    out_emb_ = owned_.back();
  }
  if (device() != Device::kCpu &&
      (linear.quantize || linear.autotune || linear.integer_output_layer)) {
    Fail("integer products (--quantize, --autotune, --integer-output) run on the CPU only; ",
         "a GPU decodes in float (or with --precision bf16|fp16)");
  }
  output_ =
      MakeOutputWeights(out_emb_, OutputLayerType(weights, linear), linear.autotune, linear.inputs);

  for (bool reverse : {false, true}) {
    auto& layers = reverse ? bw_ : fw_;
    for (int i = 1; i <= config.enc_depth(); ++i) {
      std::string base = reverse ? "encoder_bi_r" : "encoder_bi";
      if (i > 1) base += "_l" + std::to_string(i);
      std::vector<GruWeights> cells;
      for (int j = 1; j <= config.enc_cell_depth(); ++j)
        cells.push_back(
            Gru(i > 1 || j > 1 ? CellName(base, j) : base, j > 1 ? 0 : (i == 1 ? e : d)));
      layers.push_back(std::move(cells));
    }
  }
  base_.push_back(Gru("decoder_cell1", e));
  att_.w_comb = Matrix("decoder_att_W_comb_att", {d, c}, false);
  att_.wc = Matrix("decoder_att_Wc_att", {c, c}, false);
  att_.b = weights.Get("decoder_att_b_att", {c});
  att_.u = weights.Get("decoder_att_U_att", {c, 1});
  att_.layer_norm = config.layer_normalization();
  if (att_.layer_norm) {
    att_.q_lns = weights.Get("decoder_att_W_comb_att_lns", {c});
    att_.q_lnb = weights.Get("decoder_att_W_comb_att_lnb", {c});
    att_.c_lns = weights.Get("decoder_att_Wc_att_lns", {c});
    att_.c_lnb = weights.Get("decoder_att_Wc_att_lnb", {c});
  }
  if (s2s_) {
    base_.push_back(Gru("decoder_cell2", c));
    for (int j = 3; j <= config.dec_cell_base_depth(); ++j)
      base_.push_back(Gru(CellName("decoder", j), 0));
    for (int i = 2; i <= config.dec_depth(); ++i) {
      std::vector<GruWeights> cells;
      for (int j = 1; j <= config.dec_cell_high_depth(); ++j)
        cells.push_back(Gru(CellName("decoder_l" + std::to_string(i), j), j == 1 ? d : 0));
      high_.push_back(std::move(cells));
    }
    ff_state_ = Matrix("decoder_ff_state_W", {c, d}, false);
    ff_state_b_ = weights.Get("decoder_ff_state_b", {d});
    for (int k = 0; k < 3; ++k) {
      const std::string n = std::to_string(k);
      logit_w_[k] = Matrix("decoder_ff_logit_l1_W" + n, {k == 0 ? e : (k == 1 ? d : c), e}, false);
      logit_b_[k] = weights.Get("decoder_ff_logit_l1_b" + n, {e});
    }
  } else {
    fc_w_.push_back(Matrix("decoder_fc1_W0", {d, f}, true));
    fc_w_.push_back(Matrix("decoder_fc1_W1", {c, f}, true));
    fc_b_.push_back(weights.Get("decoder_fc1_b", {f}));
    for (int k = 2; k <= config.fc_depth(); ++k) {
      const std::string p = "decoder_fc" + std::to_string(k);
      fc_w_.push_back(Matrix(p + "_W", {f, f}, true));
      fc_b_.push_back(weights.Get(p + "_b", {f}));
    }
    logit_w_[0] = Matrix("decoder_ff_logit_l1_W", {f, e}, true);
    logit_b_[0] = weights.Get("decoder_ff_logit_l1_b", {e});
  }
  // Devlin's first speed-up: cell1's input products of the first N target embeddings.
  const int64_t n = std::min<int64_t>(options.precomputed_embeddings, tgt_emb_.dim(0));
  if (n > 0 && !tensor_ops()) {
    Arena arena;
    Tensor rz, h;
    Project(base_[0], tgt_emb_.Slice(0, n), arena, &rz, &h);
    emb_table_ = Tensor::Empty({n, 3 * dim_});
    for (int64_t v = 0; v < n; ++v) {
      std::memcpy(emb_table_.f32() + v * 3 * dim_, rz.f32() + v * 2 * dim_,
                  2 * dim_ * sizeof(float));
      std::memcpy(emb_table_.f32() + v * 3 * dim_ + 2 * dim_, h.f32() + v * dim_,
                  dim_ * sizeof(float));
    }
  }
}

RnnModel::~RnnModel() = default;

Tensor RnnModel::Encode(const Tensor& src, const Tensor& src_mask, Arena& arena) const {
  CHECK(src.rank() == 2 && src.dtype() == DType::kInt32) << "src must be int32 (B, S)";
  const int64_t batch = src.dim(0), len = src.dim(1);
  Tensor emb = arena.Alloc({batch, len, src_emb_.dim(1)});
  GatherRows(src_emb_, src.Reshape({batch * len}), emb.Reshape({batch * len, src_emb_.dim(1)}));
  Tensor x = Transpose01(emb, arena);                                      // (Ts, B, e)
  Tensor mask_tb = Transpose01(src_mask.Reshape({batch, len, 1}), arena);  // (Ts, B, 1)
  const RnnCompute how{options_.approx_activations, tensor_ops()};
  std::vector<float> scratch;
  Tensor dirs[2];
  for (int r = 0; r < 2; ++r) {
    const auto& layers = r ? bw_ : fw_;
    Tensor h = x;
    for (size_t i = 0; i < layers.size(); ++i) {
      const std::vector<GruWeights>& cells = layers[i];
      Tensor in_rz, in_h;
      Project(cells[0], h, arena, &in_rz, &in_h);  // (Ts, B, 2d), (Ts, B, d)
      Tensor y = arena.Alloc({len, batch, dim_});
      Tensor s = arena.AllocZeros({batch, dim_});
      for (int64_t k = 0; k < len; ++k) {
        const int64_t t = r == 1 ? len - 1 - k : k;
        auto row = [t](const Tensor& a) { return a.Slice(t, t + 1).Reshape({a.dim(1), a.dim(2)}); };
        s = CellStack(cells.data(), cells.size(), row(in_rz), row(in_h), s,
                      mask_tb.Slice(t, t + 1).Reshape({batch}), how, arena, &scratch);
        Copy(s, row(y));
      }
      if (config_.skip() && i > 0) Add(h, y, y);
      h = y;
    }
    dirs[r] = h;
  }
  // Concatenate: (2, Ts*B, d) -> (Ts*B, 2, d) = (Ts, B, 2d), then batch first.
  Tensor both = arena.Alloc({2, len * batch, dim_});
  Copy(dirs[0], both.Slice(0, 1).Reshape(dirs[0].shape()));
  Copy(dirs[1], both.Slice(1, 2).Reshape(dirs[1].shape()));
  return Transpose01(Transpose01(both, arena).Reshape({len, batch, 2 * dim_}), arena);
}

Tensor RnnModel::ForwardLogits(const Tensor& src, const Tensor& src_mask, const Tensor& tgt_in,
                               Arena& arena) const {
  CHECK(tgt_in.device() == Device::kCpu) << "ForwardLogits: tgt_in must be on the host";
  const int64_t batch = tgt_in.dim(0), len = tgt_in.dim(1), vocab = vocab_size();
  Tensor logits_tb = arena.Alloc({len, batch, vocab});
  std::unique_ptr<DecoderState> decoder = NewDecoder();
  {
    Arena encoder_arena(device());
    decoder->Start(Encode(src, src_mask, encoder_arena), src_mask, 1);
  }
  std::vector<int32_t> prev(batch), parents(batch);
  for (int64_t b = 0; b < batch; ++b) parents[b] = static_cast<int32_t>(b);
  for (int64_t t = 0; t < len; ++t) {
    for (int64_t b = 0; b < batch; ++b) prev[b] = tgt_in.i32()[b * len + t];
    Tensor h = decoder->StepHidden(prev, parents);
    LinearInto(h, output_, out_bias_, logits_tb.Slice(t, t + 1).Reshape({batch, vocab}));
  }
  return Transpose01(logits_tb, arena);
}

}  // namespace tern::inference
