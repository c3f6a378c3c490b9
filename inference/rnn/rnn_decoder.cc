// The GRU models' step decoder (RnnModel::NewDecoder): per row the recurrent states, per sentence
// the context, its attention projection and the initial state (rnn.h).
#include <algorithm>
#include <cstring>
#include <limits>

#include "common/error.h"
#include "inference/layers/layers.h"
#include "inference/rnn/rnn.h"
#include "inference/rnn/rnn_kernels.h"
#include "tensor/ops.h"

namespace tern::inference {

using namespace rnn_internal;  // NOLINT: this module's own kernels

// ---------------------------------------------------------------------------------------------
// The step decoder.

class RnnDecoder : public DecoderState {
 public:
  explicit RnnDecoder(const RnnModel& model)
      : m_(model),
        how_{model.options_.approx_activations, model.tensor_ops()},
        step_arenas_{Arena(model.device()), Arena(model.device())},
        sentence_arenas_{Arena(model.device()), Arena(model.device())} {}

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
    const SentenceGather gather(keep, sentences_, arena, keep_upload_);
    for (int64_t i = 0; i < kept; ++i) fresh_[i] = fresh_[keep[i]];
    fresh_.resize(kept);
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
      GatherAppend(from.Reshape({n, 1, s, rest}), Tensor(), 0, Tensor(),
                   to.Slice(first, first + n).Reshape({n, 1, len, rest}));
    };
    Tensor context = arena.Alloc({b1 + b2, len, c});
    Tensor mask = arena.Alloc({b1 + b2, len});
    place(context_, context, 0);
    place(encoded, context, b1);
    place(mask_, mask, 0);
    place(src_mask, mask, b1);
    Tensor mapped;
    if (mapped_.defined()) {
      mapped = arena.Alloc({b1 + b2, len, c});
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
    for (int64_t r = 0; r < rows; ++r) {
      CHECK(prev_tokens[r] >= 0 && prev_tokens[r] < m_.vocab_size()) << "token out of range";
    }
    // The step's ids for the device in one copy that the host does not wait for: each
    // row's token, then with tensor ops the row of its state in GatherStates' table (its parent,
    // or past the parents its sentence's).
    step_ids_.assign(prev_tokens.begin(), prev_tokens.end());
    if (how_.tensor_ops) {
      for (int64_t r = 0; r < rows; ++r) {
        const int32_t src = sources_[r];
        step_ids_.push_back(src >= 0 ? src : static_cast<int32_t>(prev_rows_) + (-1 - src));
      }
    }
    const Tensor ids = step_upload_.Put(step_ids_.data(), {static_cast<int64_t>(step_ids_.size())},
                                        DType::kInt32, arena);
    state_ids_ = how_.tensor_ops ? ids.Slice(rows, 2 * rows) : Tensor();
    Tensor s = GatherStates(state_, init_, arena);  // (rows, d)
    Tensor y = arena.Alloc({rows, m_.emb_});
    GatherRows(m_.tgt_emb_, ids.Slice(0, rows), y);
    Tensor in_rz, in_h;
    FirstInput(y, prev_tokens, arena, &in_rz, &in_h);
    // Cell 1, its recurrent products merged over rows that share a previous state.
    const GruWeights& cell1 = m_.base_[0];
    Tensor su_rz, su_h;
    const int32_t* su_row = nullptr;
    Tensor distinct;
    if (m_.options_.merge_states && !how_.tensor_ops) distinct = DistinctStates(s, arena);
    if (distinct.defined()) {
      StateProducts(cell1, distinct, arena, &su_rz, &su_h);
      su_row = distinct_of_row_.data();
    } else {
      StateProducts(cell1, s, arena, &su_rz, &su_h);
    }
    Tensor s1 = arena.Alloc({rows, d});
    if (how_.tensor_ops) {
      GruCell(in_rz, in_h, su_rz, su_h, s, Tensor(), s1);
    } else {
      GruUpdate({in_rz.f32(), 2 * d, in_h.f32(), d, su_rz.f32(), su_h.f32(), su_row}, s.f32(),
                nullptr, rows, d, how_.approx, s1.f32(), &scratch_);
    }
    Tensor c = Attend(s1, arena);  // (rows, 2d)
    Tensor hidden;
    if (m_.s2s_) {
      Tensor rz2, h2;
      Project(m_.base_[1], c, arena, &rz2, &h2);
      Tensor top = CellStack(m_.base_.data() + 1, m_.base_.size() - 1, rz2, h2, s1, Tensor(), how_,
                             arena, &scratch_);
      state_ = top;
      layer_states_.resize(m_.high_.size());
      for (size_t l = 0; l < m_.high_.size(); ++l) {
        Tensor hs = GatherStates(layer_states_[l], Tensor(), arena);
        Tensor rz, h;
        Project(m_.high_[l][0], top, arena, &rz, &h);
        Tensor next = CellStack(m_.high_[l].data(), m_.high_[l].size(), rz, h, hs, Tensor(), how_,
                                arena, &scratch_);
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
      TanhTensor(hidden, how_);
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
      TanhTensor(hidden, how_);
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
    if (how_.tensor_ops) {
      // The mask's row sums (at least 1) by a product with ones, then the masked sums over them.
      Tensor ones = arena.Alloc({len, 1}), count = arena.Alloc({n, 1});
      Fill(ones, 1.f);
      Gemm(mask, false, ones, false, count);
      Clamp(count, 1.f, std::numeric_limits<float>::max());
      Gemm(mask.Reshape({n, 1, len}), false, context, false, mean.Reshape({n, 1, c}));
      DivideRows(mean, count.Reshape({n}));
    } else {
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
    }
    Tensor s = Linear(mean, m_.ff_state_, m_.ff_state_b_, arena);
    TanhTensor(s, how_);
    return s;
  }

  // Per row, its source's state: prev (prev_rows, d) at a parent, or init (B, d) (zeros when
  // undefined) at a sentence's first step.
  Tensor GatherStates(const Tensor& prev, const Tensor& init, Arena& arena) {
    const int64_t rows = static_cast<int64_t>(sources_.size()), d = m_.dim_;
    Tensor s = arena.Alloc({rows, d});
    if (how_.tensor_ops) {
      // One gather (by the step's state_ids_) from a table of the previous step's rows and one
      // row per sentence: init's, or zeros.
      const int64_t p = prev_rows_, b = sentences_;
      Tensor table = arena.Alloc({p + b, d});
      if (p > 0) {
        CHECK(prev.defined() && prev.dim(0) == p) << "RnnDecoder: a state of the wrong rows";
        Copy(prev, table.Slice(0, p));
      }
      if (init.defined()) {
        Copy(init, table.Slice(p, p + b));
      } else {
        Fill(table.Slice(p, p + b), 0.f);
      }
      GatherRows(table, state_ids_, s);
      return s;
    }
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
  // distinct_of_row_ (rows) with each row's index among them. Undefined when every row's source
  // is distinct (then there is nothing to merge).
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
    if (n == rows) return Tensor();  // nothing shared: the plain products, no gather
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
    if (!table.defined() || how_.tensor_ops) {
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
    Tensor q =
        MaybeNorm(Linear(s1, a.w_comb, Tensor(), arena), a.layer_norm, a.q_lns, a.q_lnb, arena);
    // Without Devlin's precomputation the source side is recomputed at every step.
    const Tensor mapped = mapped_.defined() ? mapped_ : MapContext(a, context_, arena);
    if (how_.tensor_ops) {
      // Scores, a softmax over each sentence's unmasked positions, and the weighted sum of its
      // context as one batched product: (B, beam, S) x (B, S, c).
      const int64_t batch = context_.dim(0);
      Tensor scores = arena.Alloc({rows, len}), alpha = arena.Alloc({batch, 1, beam_, len});
      AdditiveAttentionScores(q, mapped, a.u.Reshape({c}), scores);
      Softmax(scores.Reshape({batch, 1, beam_, len}), alpha, mask_);
      Tensor out = arena.Alloc({batch, beam_, c});
      Gemm(alpha.Reshape({batch, beam_, len}), false, context_, false, out);
      return out.Reshape({rows, c});
    }
    Tensor out = arena.Alloc({rows, c});
    scores_.resize(len);
    scratch_.resize(c);
    const float* u = a.u.f32();
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t i = r / beam_;
      AttendRow(q.f32() + r * c, mapped.f32() + i * len * c, context_.f32() + i * len * c,
                mask_.f32() + i * len, u, len, c, how_.approx, scores_.data(), scratch_.data(),
                out.f32() + r * c);
    }
    return out;
  }

  // Devlin's ReLU (clipped to [0, clip_relu] when set), or GELU.
  void Relu(const Tensor& x) const {
    const float clip = m_.config_.clip_relu();
    if (m_.config_.ffn_activation() == "gelu") {
      Unary(kGelu, x, x);
    } else if (clip > 0.f) {
      Clamp(x, 0.f, clip);
    } else {
      Unary(kRelu, x, x);
    }
  }

  const RnnModel& m_;
  const RnnCompute how_;
  Arena step_arenas_[2];
  Arena sentence_arenas_[2];
  int sentence_current_ = 0;
  int beam_ = 1;
  int64_t sentences_ = 0, steps_ = 0, prev_rows_ = 0;
  Tensor context_, mask_, mapped_, init_;  // per sentence: (B, S, c), (B, S), (B, S, c), (B, d)
  std::vector<uint8_t> fresh_;             // per sentence: its first step is next
  Tensor state_;                           // (prev_rows, d): cell 1's input state of the next step
  std::vector<Tensor> layer_states_;       // s2s layers 2..: (prev_rows, d)
  std::vector<int32_t> sources_, slot_, distinct_of_row_, first_rows_, rare_, step_ids_;
  StepUploader step_upload_, keep_upload_;  // step_ids_ and KeepSentences' list to the device
  Tensor state_ids_;  // tensor ops: each row's row in GatherStates' table, on the device
  std::vector<float> scratch_, scores_;
};

std::unique_ptr<DecoderState> RnnModel::NewDecoder() const {
  return std::make_unique<RnnDecoder>(*this);
}

}  // namespace tern::inference
