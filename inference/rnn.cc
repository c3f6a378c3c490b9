#include "inference/rnn.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "common/error.h"
#include "inference/layers.h"
#include "tensor/cpu/cpu_kernels.h"
#include "tensor/ops.h"

namespace tern::inference {
namespace {

// tanh(x) = x P(x^2) / Q(x^2) on [-7.9, 7.9] (saturated beyond): a minimax rational fit, the form
// Eigen and XLA use for float tanh. Branch-free, so the loops over it vectorize.
inline float RationalTanh(float x) {
  constexpr float kClamp = 7.90531110763549805f;
  x = std::min(kClamp, std::max(-kClamp, x));
  const float x2 = x * x;
  float p = -2.76076847742355e-16f;
  p = p * x2 + 2.00018790482477e-13f;
  p = p * x2 - 8.60467152213735e-11f;
  p = p * x2 + 5.12229709037114e-08f;
  p = p * x2 + 1.48572235717979e-05f;
  p = p * x2 + 6.37261928875436e-04f;
  p = p * x2 + 4.89352455891786e-03f;
  float q = 1.19825839466702e-06f;
  q = q * x2 + 1.18534705686654e-04f;
  q = q * x2 + 2.26843463243900e-03f;
  q = q * x2 + 4.89352518554385e-03f;
  return x * p / q;
}

inline void TanhRange(float* x, int64_t n, bool approx) {
  if (approx) {
    for (int64_t i = 0; i < n; ++i) x[i] = RationalTanh(x[i]);
  } else {
    for (int64_t i = 0; i < n; ++i) x[i] = std::tanh(x[i]);
  }
}

inline void SigmoidRange(float* x, int64_t n, bool approx) {
  if (approx) {
    for (int64_t i = 0; i < n; ++i) x[i] = 0.5f + 0.5f * RationalTanh(0.5f * x[i]);
  } else {
    for (int64_t i = 0; i < n; ++i) x[i] = 1.f / (1.f + std::exp(-x[i]));
  }
}

Tensor Transposed(const Tensor& w) {  // (a, b) float -> owning (b, a)
  const int64_t a = w.dim(0), b = w.dim(1);
  Tensor t = Tensor::Empty({b, a});
  for (int64_t i = 0; i < a; ++i)
    for (int64_t j = 0; j < b; ++j) t.f32()[j * a + i] = w.f32()[i * b + j];
  return t;
}

Tensor Clipped(const Tensor& w, float clip) {  // owning copy
  Tensor t = Tensor::Empty(w.shape());
  for (int64_t i = 0; i < w.numel(); ++i) t.f32()[i] = std::min(clip, std::max(-clip, w.f32()[i]));
  return t;
}

Tensor MaybeNorm(const Tensor& x, bool on, const Tensor& s, const Tensor& b, Arena& arena) {
  return on ? LayerNormalize(x, s, b, arena) : x;
}

// The input side of a GRU with input, x (n, in) -> rz (n, 2d) and h (n, d) with their biases:
// Nematus' LN(x W) + b with layer normalization, x W + b without.
void Project(const GruWeights& g, const Tensor& x, Arena& arena, Tensor* rz, Tensor* h) {
  if (!g.layer_norm) {
    *rz = Linear(x, g.w, g.b, arena);
    *h = Linear(x, g.wx, g.bx, arena);
    return;
  }
  *rz = LayerNormalize(Linear(x, g.w, Tensor(), arena), g.w_lns, g.w_lnb, arena);
  AddBias(rz->Flatten2D(), g.b);
  *h = LayerNormalize(Linear(x, g.wx, Tensor(), arena), g.wx_lns, g.wx_lnb, arena);
  AddBias(h->Flatten2D(), g.bx);
}

// The recurrent side, s (n, d) -> LN(s U) (n, 2d), LN(s Ux) (n, d).
void StateProducts(const GruWeights& g, const Tensor& s, Arena& arena, Tensor* rz, Tensor* h) {
  *rz = MaybeNorm(Linear(s, g.u, Tensor(), arena), g.layer_norm, g.u_lns, g.u_lnb, arena);
  *h = MaybeNorm(Linear(s, g.ux, Tensor(), arena), g.layer_norm, g.ux_lns, g.ux_lnb, arena);
}

// The GRU update of models/rnn_layers.h for rows of width d:
//   r, z = sigmoid(in_rz + su_rz);  h = tanh(in_h + r * su_h);  s' = h + z (s - h)
// and with a row mask m, s + m (s' - s). in_rz/in_h advance by their strides per row (0: one
// bias row for a transition cell). su_rz/su_h rows are found through su_row (null: row i).
struct GruInputs {
  const float* in_rz;
  int64_t rz_stride;
  const float* in_h;
  int64_t h_stride;
  const float* su_rz;
  const float* su_h;
  const int32_t* su_row;
};
TERN_MULTIVERSION void GruUpdate(const GruInputs& in, const float* s, const float* row_mask, int64_t rows, int64_t d,
               bool approx, float* out, std::vector<float>* scratch) {
  scratch->resize(3 * d);
  float* rz = scratch->data();
  float* h = rz + 2 * d;
  for (int64_t i = 0; i < rows; ++i) {
    const int64_t k = in.su_row ? in.su_row[i] : i;
    const float* a = in.in_rz + i * in.rz_stride;
    const float* u = in.su_rz + k * 2 * d;
    for (int64_t j = 0; j < 2 * d; ++j) rz[j] = a[j] + u[j];
    SigmoidRange(rz, 2 * d, approx);
    const float* ah = in.in_h + i * in.h_stride;
    const float* uh = in.su_h + k * d;
    for (int64_t j = 0; j < d; ++j) h[j] = ah[j] + rz[j] * uh[j];
    TanhRange(h, d, approx);
    const float* si = s + i * d;
    float* o = out + i * d;
    const float* z = rz + d;
    for (int64_t j = 0; j < d; ++j) o[j] = h[j] + z[j] * (si[j] - h[j]);
    if (row_mask != nullptr && row_mask[i] != 1.f) {
      const float m = row_mask[i];
      for (int64_t j = 0; j < d; ++j) o[j] = si[j] + m * (o[j] - si[j]);
    }
  }
}

// One step of a stack of cells (the first with input projections in_rz, in_h) from states s.
Tensor CellStack(const GruWeights* cells, size_t count, const Tensor& in_rz, const Tensor& in_h,
                 const Tensor& s, const float* row_mask, bool approx, Arena& arena,
                 std::vector<float>* scratch) {
  const int64_t rows = s.dim(0), d = s.dim(1);
  Tensor state = s;
  for (size_t j = 0; j < count; ++j) {
    const GruWeights& g = cells[j];
    Tensor su_rz, su_h;
    StateProducts(g, state, arena, &su_rz, &su_h);
    Tensor next = arena.Alloc({rows, d});
    GruInputs in{};
    if (j == 0) {
      in = {in_rz.f32(), 2 * d, in_h.f32(), d, su_rz.f32(), su_h.f32(), nullptr};
    } else {
      in = {g.b.f32(), 0, g.bx.f32(), 0, su_rz.f32(), su_h.f32(), nullptr};
    }
    GruUpdate(in, state.f32(), row_mask, rows, d, approx, next.f32(), scratch);
    state = next;
  }
  return state;
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

// The context side of the attention, context (n, S, c) -> LN(context Wc) + b.
Tensor MapContext(const RnnAttentionWeights& a, const Tensor& context, Arena& arena) {
  Tensor m = MaybeNorm(Linear(context, a.wc, Tensor(), arena), a.layer_norm, a.c_lns, a.c_lnb,
                       arena);
  AddBias(m.Flatten2D(), a.b);
  return m;
}

// One row of the MLP attention: scores tanh(mapped_t + q) . u over the unmasked t, softmax,
// out = sum_t alpha_t context_t.
TERN_MULTIVERSION void AttendRow(const float* q, const float* mapped, const float* context,
                                 const float* mask, const float* u, int64_t len, int64_t c,
                                 bool approx, float* scores, float* e, float* out) {
  float best = -std::numeric_limits<float>::infinity();
  for (int64_t t = 0; t < len; ++t) {
    if (mask[t] == 0.f) continue;
    const float* mt = mapped + t * c;
    for (int64_t j = 0; j < c; ++j) e[j] = mt[j] + q[j];
    TanhRange(e, c, approx);
    float score = 0;
    for (int64_t j = 0; j < c; ++j) score += e[j] * u[j];
    scores[t] = score;
    best = std::max(best, score);
  }
  float sum = 0;
  for (int64_t t = 0; t < len; ++t) {
    scores[t] = mask[t] == 0.f ? 0.f : std::exp(scores[t] - best);
    sum += scores[t];
  }
  std::fill(out, out + c, 0.f);
  if (sum == 0.f) return;
  const float inv = 1.f / sum;
  for (int64_t t = 0; t < len; ++t) {
    if (scores[t] == 0.f) continue;
    const float w = scores[t] * inv;
    const float* ct = context + t * c;
    for (int64_t j = 0; j < c; ++j) out[j] += w * ct[j];
  }
}

}  // namespace

TERN_MULTIVERSION void TanhInPlace(float* x, int64_t n, bool approx) { TanhRange(x, n, approx); }

TERN_MULTIVERSION void SigmoidInPlace(float* x, int64_t n, bool approx) {
  SigmoidRange(x, n, approx);
}

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

LinearWeights RnnModel::Matrix(const std::string& name, bool clipped) {
  const Tensor& t = weights_.Get(name);
  if (t.rank() != 2) Fail(weights_.source(), ": parameter '", name, "' must be a matrix");
  const float clip = config_.clip_weights();
  if (clipped && clip > 0.f && t.dtype() == DType::kFloat32) {
    owned_.push_back(Clipped(t, clip));
    return MakeLinearWeights(owned_.back(), 1.f, linear_);
  }
  return MakeLinearWeights(t, weights_.Scale(name), linear_);
}

GruWeights RnnModel::Gru(const std::string& p, bool has_input) {
  const Weights& w = weights_;
  GruWeights g;
  g.has_input = has_input;
  if (has_input) {
    g.w = Matrix(p + "_W", false);
    g.wx = Matrix(p + "_Wx", false);
  }
  g.b = w.Get(p + "_b");
  g.bx = w.Get(p + "_bx");
  g.u = Matrix(p + "_U", false);
  g.ux = Matrix(p + "_Ux", false);
  g.layer_norm = config_.layer_normalization();
  if (g.layer_norm) {
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
  const bool tied = config.tied_embeddings();
  src_emb_ = weights.Get(tied ? "Wemb" : "encoder_Wemb");
  tgt_emb_ = weights.Get(tied ? "Wemb" : "decoder_Wemb");
  out_bias_ = weights.Get("decoder_ff_logit_l2_b");
  const float clip = s2s_ ? 0.f : config.clip_weights();
  if (tied) {
    out_emb_ = tgt_emb_;
  } else {
    const Tensor& l2 = weights.Get("decoder_ff_logit_l2_W");
    if (l2.dtype() != DType::kFloat32) Fail(weights.source(), ": decoder_ff_logit_l2_W must be float32");
    owned_.push_back(Transposed(l2));
    out_emb_ = owned_.back();
  }
  if (clip > 0.f) {
    owned_.push_back(Clipped(out_emb_, clip));
    out_emb_ = owned_.back();
  }
  if (out_emb_.dim(0) != out_bias_.dim(0)) Fail(weights.source(), ": output layer and bias differ");

  for (bool reverse : {false, true}) {
    auto& layers = reverse ? bw_ : fw_;
    for (int i = 1; i <= config.enc_depth(); ++i) {
      std::string base = reverse ? "encoder_bi_r" : "encoder_bi";
      if (i > 1) base += "_l" + std::to_string(i);
      std::vector<GruWeights> cells;
      for (int j = 1; j <= config.enc_cell_depth(); ++j)
        cells.push_back(Gru(i > 1 || j > 1 ? CellName(base, j) : base, j == 1));
      layers.push_back(std::move(cells));
    }
  }
  base_.push_back(Gru("decoder_cell1", true));
  att_.w_comb = Matrix("decoder_att_W_comb_att", false);
  att_.wc = Matrix("decoder_att_Wc_att", false);
  att_.b = weights.Get("decoder_att_b_att");
  att_.u = weights.Get("decoder_att_U_att");
  att_.layer_norm = config.layer_normalization();
  if (att_.layer_norm) {
    att_.q_lns = weights.Get("decoder_att_W_comb_att_lns");
    att_.q_lnb = weights.Get("decoder_att_W_comb_att_lnb");
    att_.c_lns = weights.Get("decoder_att_Wc_att_lns");
    att_.c_lnb = weights.Get("decoder_att_Wc_att_lnb");
  }
  if (s2s_) {
    base_.push_back(Gru("decoder_cell2", true));
    for (int j = 3; j <= config.dec_cell_base_depth(); ++j)
      base_.push_back(Gru(CellName("decoder", j), false));
    for (int i = 2; i <= config.dec_depth(); ++i) {
      std::vector<GruWeights> cells;
      for (int j = 1; j <= config.dec_cell_high_depth(); ++j)
        cells.push_back(Gru(CellName("decoder_l" + std::to_string(i), j), j == 1));
      high_.push_back(std::move(cells));
    }
    ff_state_ = Matrix("decoder_ff_state_W", false);
    ff_state_b_ = weights.Get("decoder_ff_state_b");
    for (int k = 0; k < 3; ++k) {
      const std::string n = std::to_string(k);
      logit_w_[k] = Matrix("decoder_ff_logit_l1_W" + n, false);
      logit_b_[k] = weights.Get("decoder_ff_logit_l1_b" + n);
    }
  } else {
    fc_w_.push_back(Matrix("decoder_fc1_W0", true));
    fc_w_.push_back(Matrix("decoder_fc1_W1", true));
    fc_b_.push_back(weights.Get("decoder_fc1_b"));
    for (int k = 2; k <= config.fc_depth(); ++k) {
      const std::string p = "decoder_fc" + std::to_string(k);
      fc_w_.push_back(Matrix(p + "_W", true));
      fc_b_.push_back(weights.Get(p + "_b"));
    }
    logit_w_[0] = Matrix("decoder_ff_logit_l1_W", true);
    logit_b_[0] = weights.Get("decoder_ff_logit_l1_b");
  }
  // Devlin's first speed-up: cell1's input products of the first N target embeddings.
  const int64_t n = std::min<int64_t>(options.precomputed_embeddings, tgt_emb_.dim(0));
  if (n > 0) {
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
  Tensor x = Transpose01(emb, arena);  // (Ts, B, e)
  Tensor mask_tb = Transpose01(src_mask.Reshape({batch, len, 1}), arena);  // (Ts, B, 1)
  const bool approx = options_.approx_activations;
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
        s = CellStack(cells.data(), cells.size(), row(in_rz), row(in_h), s, mask_tb.f32() + t * batch, approx, arena,
                      &scratch);
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

// ---------------------------------------------------------------------------------------------
// The step decoder.

class RnnDecoder : public DecoderState {
 public:
  explicit RnnDecoder(const RnnModel& model) : m_(model) {}

  void Start(const Tensor& encoded, const Tensor& src_mask, int beam) override {
    CHECK_GE(beam, 1);
    beam_ = beam;
    steps_ = 0;
    prev_rows_ = 0;
    Arena& arena = sentence_arenas_[sentence_current_];
    arena.Reset();
    context_ = arena.Alloc(encoded.shape());
    Copy(encoded, context_);
    mask_ = arena.Alloc(src_mask.shape());
    Copy(src_mask, mask_);
    mapped_ = m_.options_.precomputed_attention ? MapContext(m_.att_, context_, arena) : Tensor();
    init_ = InitialState(context_, mask_, arena);
    sentences_ = encoded.dim(0);
    fresh_.assign(sentences_, 1);
  }

  void KeepSentences(const std::vector<int32_t>& keep) override {
    if (static_cast<int64_t>(keep.size()) == sentences_) return;
    const int64_t kept = static_cast<int64_t>(keep.size());
    Arena& arena = sentence_arenas_[1 - sentence_current_];
    arena.Reset();
    Tensor ids = arena.Alloc({kept}, DType::kInt32);
    for (int64_t i = 0; i < kept; ++i) {
      CHECK(keep[i] >= 0 && keep[i] < sentences_ && (i == 0 || keep[i] > keep[i - 1]))
          << "KeepSentences: bad index list";
      ids.i32()[i] = keep[i];
      fresh_[i] = fresh_[keep[i]];
    }
    fresh_.resize(kept);
    auto gather = [&](const Tensor& t) {
      if (!t.defined()) return t;
      Shape shape = t.shape();
      shape.set_dim(0, kept);
      Tensor out = arena.Alloc(shape);
      if (kept > 0) {
        GatherRows(t.Reshape({t.dim(0), t.numel() / t.dim(0)}), ids,
                   out.Reshape({kept, out.numel() / kept}));
      }
      return out;
    };
    context_ = gather(context_);
    mask_ = gather(mask_);
    mapped_ = gather(mapped_);
    init_ = gather(init_);
    sentence_current_ = 1 - sentence_current_;
    sentences_ = kept;
  }

  void AddSentences(const Tensor& encoded, const Tensor& src_mask) override {
    const int64_t b1 = sentences_, b2 = encoded.dim(0), c = encoded.dim(2);
    const int64_t s1 = context_.dim(1), s2 = encoded.dim(1), len = std::max(s1, s2);
    Arena& arena = sentence_arenas_[1 - sentence_current_];
    arena.Reset();
    // Rows of a (n, s, rest) into (first.., len, rest) of out, zero-padded.
    auto place = [&](const Tensor& from, const Tensor& to, int64_t first) {
      const int64_t n = from.dim(0), s = from.dim(1), rest = from.numel() / (n * s);
      for (int64_t i = 0; i < n; ++i) {
        std::memcpy(to.f32() + (first + i) * len * rest, from.f32() + i * s * rest,
                    s * rest * sizeof(float));
      }
    };
    Tensor context = arena.AllocZeros({b1 + b2, len, c});
    Tensor mask = arena.AllocZeros({b1 + b2, len});
    place(context_, context, 0);
    place(encoded, context, b1);
    place(mask_, mask, 0);
    place(src_mask, mask, b1);
    Tensor mapped;
    if (mapped_.defined()) {
      mapped = arena.AllocZeros({b1 + b2, len, c});
      place(mapped_, mapped, 0);
      place(MapContext(m_.att_, encoded, arena), mapped, b1);
    }
    Tensor added = InitialState(encoded, src_mask, arena);
    Tensor init = arena.Alloc({b1 + b2, m_.dim_});
    Copy(init_, init.Slice(0, b1));
    Copy(added, init.Slice(b1, b1 + b2));
    context_ = context;
    mask_ = mask;
    mapped_ = mapped;
    init_ = init;
    sentence_current_ = 1 - sentence_current_;
    sentences_ = b1 + b2;
    fresh_.resize(sentences_, 1);
  }

  StepOutput Step(const std::vector<int32_t>& prev_tokens,
                  const std::vector<int32_t>& parents) override {
    Tensor h = StepHidden(prev_tokens, parents);
    Arena& arena = step_arenas_[(steps_ - 1) % 2];
    StepOutput out;
    out.logits = arena.Alloc({h.dim(0), m_.vocab_size()});
    Gemm(h, false, m_.out_emb_, true, out.logits);
    AddBias(out.logits, m_.out_bias_);
    out.log_probs = arena.Alloc(out.logits.shape());
    LogSoftmax(out.logits, out.log_probs);
    return out;
  }

  Tensor StepHidden(const std::vector<int32_t>& prev_tokens,
                    const std::vector<int32_t>& parents) override {
    const int64_t rows = static_cast<int64_t>(prev_tokens.size()), d = m_.dim_;
    CHECK_EQ(rows, sentences_ * beam_) << "RnnDecoder: rows must be sentences x beam";
    CHECK_EQ(parents.size(), prev_tokens.size());
    Arena& arena = step_arenas_[steps_ % 2];
    arena.Reset();
    ++steps_;
    const bool approx = m_.options_.approx_activations;
    // Each row's source of state: a parent row, or (-1 - sentence) at a sentence's first step.
    sources_.resize(rows);
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t i = r / beam_;
      if (fresh_[i]) {
        sources_[r] = -1 - static_cast<int32_t>(i);
      } else {
        CHECK(parents[r] >= 0 && parents[r] < prev_rows_) << "RnnDecoder: parent out of range";
        sources_[r] = parents[r];
      }
    }
    Tensor s = GatherStates(state_, init_, arena);  // (rows, d)
    Tensor y = arena.Alloc({rows, m_.emb_});
    Tensor tokens = arena.Alloc({rows}, DType::kInt32);
    for (int64_t r = 0; r < rows; ++r) {
      CHECK(prev_tokens[r] >= 0 && prev_tokens[r] < m_.vocab_size()) << "token out of range";
      tokens.i32()[r] = prev_tokens[r];
    }
    GatherRows(m_.tgt_emb_, tokens, y);
    Tensor in_rz, in_h;
    FirstInput(y, prev_tokens, arena, &in_rz, &in_h);
    // Cell 1, its recurrent products merged over rows that share a previous state.
    const GruWeights& cell1 = m_.base_[0];
    Tensor su_rz, su_h;
    const int32_t* su_row = nullptr;
    if (m_.options_.merge_states) {
      Tensor distinct = DistinctStates(s, arena);
      StateProducts(cell1, distinct, arena, &su_rz, &su_h);
      su_row = distinct_of_row_.data();
    } else {
      StateProducts(cell1, s, arena, &su_rz, &su_h);
    }
    Tensor s1 = arena.Alloc({rows, d});
    GruUpdate({in_rz.f32(), 2 * d, in_h.f32(), d, su_rz.f32(), su_h.f32(), su_row}, s.f32(),
              nullptr, rows, d, approx, s1.f32(), &scratch_);
    Tensor c = Attend(s1, arena);  // (rows, 2d)
    Tensor hidden;
    if (m_.s2s_) {
      Tensor rz2, h2;
      Project(m_.base_[1], c, arena, &rz2, &h2);
      Tensor top = CellStack(m_.base_.data() + 1, m_.base_.size() - 1, rz2, h2, s1, nullptr, approx,
                             arena, &scratch_);
      state_ = top;
      layer_states_.resize(m_.high_.size());
      for (size_t l = 0; l < m_.high_.size(); ++l) {
        Tensor hs = GatherStates(layer_states_[l], Tensor(), arena);
        Tensor rz, h;
        Project(m_.high_[l][0], top, arena, &rz, &h);
        Tensor next = CellStack(m_.high_[l].data(), m_.high_[l].size(), rz, h, hs, nullptr, approx, arena, &scratch_);
        layer_states_[l] = next;
        if (m_.config_.skip()) {
          Tensor sum = arena.Alloc(next.shape());
          Add(top, next, sum);
          next = sum;
        }
        top = next;
      }
      // Deep output: tanh(y W0 + b0 + top W1 + b1 + c W2 + b2).
      hidden = Linear(y, m_.logit_w_[0], m_.logit_b_[0], arena);
      Add(hidden, Linear(top, m_.logit_w_[1], m_.logit_b_[1], arena), hidden);
      Add(hidden, Linear(c, m_.logit_w_[2], m_.logit_b_[2], arena), hidden);
      TanhInPlace(hidden.f32(), hidden.numel(), approx);
    } else {
      state_ = s1;
      Tensor x = Linear(s1, m_.fc_w_[0], Tensor(), arena);
      Add(x, Linear(c, m_.fc_w_[1], m_.fc_b_[0], arena), x);
      Relu(x);
      Tensor pair = x;
      for (size_t k = 2; k < m_.fc_w_.size(); ++k) {  // layers fc2.. (fc_w_[k] is fc{k}_W)
        x = Linear(x, m_.fc_w_[k], m_.fc_b_[k - 1], arena);
        Relu(x);
        if (k % 2 == 1) {
          Add(x, pair, x);
          pair = x;
        }
      }
      hidden = Linear(x, m_.logit_w_[0], m_.logit_b_[0], arena);
      TanhInPlace(hidden.f32(), hidden.numel(), approx);
    }
    std::fill(fresh_.begin(), fresh_.end(), 0);
    prev_rows_ = rows;
    return hidden;
  }

  int64_t system_allocations() const override {
    return step_arenas_[0].system_allocations() + step_arenas_[1].system_allocations() +
           sentence_arenas_[0].system_allocations() + sentence_arenas_[1].system_allocations();
  }

 private:
  // s2s: tanh(masked mean of the context W + b); devlin: zeros. (n, d) from context (n, S, c).
  Tensor InitialState(const Tensor& context, const Tensor& mask, Arena& arena) const {
    const int64_t n = context.dim(0), len = context.dim(1), c = context.dim(2);
    if (!m_.s2s_) return arena.AllocZeros({n, m_.dim_});
    Tensor mean = arena.AllocZeros({n, c});
    for (int64_t i = 0; i < n; ++i) {
      float count = 0;
      for (int64_t t = 0; t < len; ++t) count += mask.f32()[i * len + t];
      for (int64_t t = 0; t < len; ++t) {
        const float w = mask.f32()[i * len + t] / std::max(count, 1.f);
        if (w == 0.f) continue;
        const float* ctx = context.f32() + (i * len + t) * c;
        for (int64_t j = 0; j < c; ++j) mean.f32()[i * c + j] += w * ctx[j];
      }
    }
    Tensor s = Linear(mean, m_.ff_state_, m_.ff_state_b_, arena);
    TanhInPlace(s.f32(), s.numel(), m_.options_.approx_activations);
    return s;
  }

  // Per row, its source's state: prev (prev_rows, d) at a parent, or init (B, d) (zeros when
  // undefined) at a sentence's first step.
  Tensor GatherStates(const Tensor& prev, const Tensor& init, Arena& arena) const {
    const int64_t rows = static_cast<int64_t>(sources_.size()), d = m_.dim_;
    Tensor s = arena.Alloc({rows, d});
    for (int64_t r = 0; r < rows; ++r) {
      float* dst = s.f32() + r * d;
      const int32_t src = sources_[r];
      if (src >= 0) {
        std::memcpy(dst, prev.f32() + src * d, d * sizeof(float));
      } else if (init.defined()) {
        std::memcpy(dst, init.f32() + (-1 - src) * d, d * sizeof(float));
      } else {
        std::fill(dst, dst + d, 0.f);
      }
    }
    return s;
  }

  // Devlin's merged recurrent states: the rows of s with distinct sources (n, d); fills
  // distinct_of_row_ (rows) with each row's index among them.
  Tensor DistinctStates(const Tensor& s, Arena& arena) {
    const int64_t rows = s.dim(0), d = s.dim(1);
    slot_.assign(prev_rows_ + sentences_, -1);
    distinct_of_row_.resize(rows);
    first_rows_.clear();
    for (int64_t r = 0; r < rows; ++r) {
      const int32_t src = sources_[r];
      int32_t& slot = slot_[src >= 0 ? src : prev_rows_ + (-1 - src)];
      if (slot < 0) {
        slot = static_cast<int32_t>(first_rows_.size());
        first_rows_.push_back(static_cast<int32_t>(r));
      }
      distinct_of_row_[r] = slot;
    }
    const int64_t n = static_cast<int64_t>(first_rows_.size());
    Tensor out = arena.Alloc({n, d});
    for (int64_t k = 0; k < n; ++k)
      std::memcpy(out.f32() + k * d, s.f32() + first_rows_[k] * d, d * sizeof(float));
    return out;
  }

  // Cell 1's input projections of the previous tokens' embeddings y (rows, e): from the
  // precomputed table for ids below its size, by products for the rest.
  void FirstInput(const Tensor& y, const std::vector<int32_t>& tokens, Arena& arena, Tensor* rz,
                  Tensor* h) {
    const GruWeights& cell1 = m_.base_[0];
    const Tensor& table = m_.emb_table_;
    if (!table.defined()) {
      Project(cell1, y, arena, rz, h);
      return;
    }
    const int64_t rows = y.dim(0), d = m_.dim_, e = y.dim(1), n = table.dim(0);
    *rz = arena.Alloc({rows, 2 * d});
    *h = arena.Alloc({rows, d});
    rare_.clear();
    for (int64_t r = 0; r < rows; ++r) {
      if (tokens[r] < n) {
        const float* t = table.f32() + tokens[r] * 3 * d;
        std::memcpy(rz->f32() + r * 2 * d, t, 2 * d * sizeof(float));
        std::memcpy(h->f32() + r * d, t + 2 * d, d * sizeof(float));
      } else {
        rare_.push_back(static_cast<int32_t>(r));
      }
    }
    if (rare_.empty()) return;
    const int64_t k = static_cast<int64_t>(rare_.size());
    Tensor x = arena.Alloc({k, e});
    for (int64_t i = 0; i < k; ++i)
      std::memcpy(x.f32() + i * e, y.f32() + rare_[i] * e, e * sizeof(float));
    Tensor prz, ph;
    Project(cell1, x, arena, &prz, &ph);
    for (int64_t i = 0; i < k; ++i) {
      std::memcpy(rz->f32() + rare_[i] * 2 * d, prz.f32() + i * 2 * d, 2 * d * sizeof(float));
      std::memcpy(h->f32() + rare_[i] * d, ph.f32() + i * d, d * sizeof(float));
    }
  }

  // The MLP attention of rows s1 (rows, d) over their sentences' context -> (rows, c).
  Tensor Attend(const Tensor& s1, Arena& arena) {
    const RnnAttentionWeights& a = m_.att_;
    const int64_t rows = s1.dim(0), len = context_.dim(1), c = context_.dim(2);
    Tensor q = MaybeNorm(Linear(s1, a.w_comb, Tensor(), arena), a.layer_norm, a.q_lns, a.q_lnb,
                         arena);
    // Without Devlin's precomputation the source side is recomputed at every step.
    const Tensor mapped = mapped_.defined() ? mapped_ : MapContext(a, context_, arena);
    Tensor out = arena.Alloc({rows, c});
    scores_.resize(len);
    scratch_.resize(c);
    const float* u = a.u.f32();
    const bool approx = m_.options_.approx_activations;
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t i = r / beam_;
      AttendRow(q.f32() + r * c, mapped.f32() + i * len * c, context_.f32() + i * len * c,
                mask_.f32() + i * len, u, len, c, approx, scores_.data(), scratch_.data(),
                out.f32() + r * c);
    }
    return out;
  }

  // Devlin's ReLU (clipped to [0, clip_relu] when set), or GELU.
  void Relu(const Tensor& x) const {
    if (m_.config_.ffn_activation() == "gelu") {
      Unary(kGelu, x, x);
      return;
    }
    const float clip = m_.config_.clip_relu();
    float* p = x.f32();
    const int64_t n = x.numel();
    if (clip > 0.f) {
      for (int64_t i = 0; i < n; ++i) p[i] = std::min(clip, std::max(0.f, p[i]));
    } else {
      for (int64_t i = 0; i < n; ++i) p[i] = std::max(0.f, p[i]);
    }
  }

  const RnnModel& m_;
  Arena step_arenas_[2];
  Arena sentence_arenas_[2];
  int sentence_current_ = 0;
  int beam_ = 1;
  int64_t sentences_ = 0, steps_ = 0, prev_rows_ = 0;
  Tensor context_, mask_, mapped_, init_;  // per sentence: (B, S, c), (B, S), (B, S, c), (B, d)
  std::vector<uint8_t> fresh_;             // per sentence: its first step is next
  Tensor state_;                           // (prev_rows, d): cell 1's input state of the next step
  std::vector<Tensor> layer_states_;       // s2s layers 2..: (prev_rows, d)
  std::vector<int32_t> sources_, slot_, distinct_of_row_, first_rows_, rare_;
  std::vector<float> scratch_, scores_;
};

std::unique_ptr<DecoderState> RnnModel::NewDecoder() const {
  return std::make_unique<RnnDecoder>(*this);
}

Tensor RnnModel::ForwardLogits(const Tensor& src, const Tensor& src_mask, const Tensor& tgt_in,
                               Arena& arena) const {
  const int64_t batch = tgt_in.dim(0), len = tgt_in.dim(1), vocab = vocab_size();
  Tensor logits = arena.Alloc({batch, len, vocab});
  RnnDecoder decoder(*this);
  {
    Arena encoder_arena;
    decoder.Start(Encode(src, src_mask, encoder_arena), src_mask, 1);
  }
  std::vector<int32_t> prev(batch), parents(batch);
  for (int64_t b = 0; b < batch; ++b) parents[b] = static_cast<int32_t>(b);
  Tensor step_logits = arena.Alloc({batch, vocab});
  for (int64_t t = 0; t < len; ++t) {
    for (int64_t b = 0; b < batch; ++b) prev[b] = tgt_in.i32()[b * len + t];
    Tensor h = decoder.StepHidden(prev, parents);
    Gemm(h, false, out_emb_, true, step_logits);
    AddBias(step_logits, out_bias_);
    for (int64_t b = 0; b < batch; ++b) {
      std::memcpy(logits.f32() + (b * len + t) * vocab, step_logits.f32() + b * vocab,
                  vocab * sizeof(float));
    }
  }
  return logits;
}

}  // namespace tern::inference
