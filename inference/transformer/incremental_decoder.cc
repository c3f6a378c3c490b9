#include "inference/transformer/incremental_decoder.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "inference/layers/layers.h"
#include "tensor/ops.h"

namespace tern::inference {

IncrementalDecoder::IncrementalDecoder(const Transformer& model)
    : model_(model),
      step_arenas_{Arena(model.device()), Arena(model.device())},
      cross_arenas_{Arena(model.device()), Arena(model.device())},
      table_arena_(model.device()),
      tensor_cache_(model.tensor_cache()),
      cache_(static_cast<int>(model.decoder_layers().size()), model.heads(),
             model.dim() / model.heads()) {}

int64_t IncrementalDecoder::system_allocations() const {
  return step_arenas_[0].system_allocations() + step_arenas_[1].system_allocations() +
         cross_arenas_[0].system_allocations() + cross_arenas_[1].system_allocations() +
         table_arena_.system_allocations();
}

void IncrementalDecoder::Start(const Tensor& encoded, const Tensor& src_mask, int beam) {
  CHECK(encoded.rank() == 3 && src_mask.rank() == 2 && encoded.dim(0) == src_mask.dim(0) &&
        encoded.dim(1) == src_mask.dim(1))
      << "Start: encoded " << encoded.shape().ToString() << ", mask "
      << src_mask.shape().ToString();
  CHECK_GE(beam, 1);
  beam_ = beam;
  sentences_ = encoded.dim(0);
  steps_ = 0;
  prev_rows_ = 0;
  cross_current_ = 0;
  sentence_start_.assign(sentences_, 0);
  cache_.Clear(tensor_cache_ ? 0 : sentences_ * beam_);
  self_kv_.assign(model_.decoder_layers().size(), Tensor());
  window_start_ = 0;
  Arena& arena = cross_arenas_[0];
  arena.Reset();
  cross_arenas_[1].Reset();
  step_arenas_[0].Reset();
  step_arenas_[1].Reset();
  src_mask_ = arena.Alloc(src_mask.shape());
  Copy(src_mask, src_mask_);
  cross_sentence_.resize(sentences_);
  std::iota(cross_sentence_.begin(), cross_sentence_.end(), 0);
  const auto& layers = model_.decoder_layers();
  cross_k_.resize(layers.size());
  cross_v_.resize(layers.size());
  aan_sum_.assign(layers.size(), Tensor());
  for (size_t l = 0; l < layers.size(); ++l) {
    model_.ContextKeysValues(layers[l].context, encoded, arena, &cross_k_[l], &cross_v_[l]);
  }
}

void IncrementalDecoder::KeepSentences(const std::vector<int32_t>& keep) {
  if (static_cast<int64_t>(keep.size()) == sentences_) return;
  const int64_t kept = static_cast<int64_t>(keep.size());
  if (model_.device() == Device::kCpu) {
    // On the CPU the cross-attention reads each sentence's state where it is (AttendHeads'
    // kv_sentence): only the map shrinks, nothing is copied.
    for (int64_t i = 0; i < kept; ++i) {
      CHECK(keep[i] >= 0 && keep[i] < sentences_ && (i == 0 || keep[i] > keep[i - 1]))
          << "KeepSentences: bad index list";
      cross_sentence_[i] = cross_sentence_[keep[i]];
      sentence_start_[i] = sentence_start_[keep[i]];
    }
    cross_sentence_.resize(kept);
    sentence_start_.resize(kept);
    sentences_ = kept;
    return;
  }
  Arena& arena = cross_arenas_[1 - cross_current_];
  arena.Reset();
  const SentenceGather gather(keep, sentences_, arena, keep_upload_);
  src_mask_ = gather(src_mask_);
  for (int64_t i = 0; i < kept; ++i) sentence_start_[i] = sentence_start_[keep[i]];
  sentence_start_.resize(kept);
  for (size_t l = 0; l < cross_k_.size(); ++l) {
    cross_k_[l] = gather(cross_k_[l]);
    cross_v_[l] = gather(cross_v_[l]);
  }
  cross_current_ = 1 - cross_current_;
  sentences_ = kept;
}

void IncrementalDecoder::GrowPositions(int64_t count) {
  const Tensor& shared = model_.device_positions();
  if (shared.defined() && count <= shared.dim(0)) {
    position_table_ = shared;
    return;
  }
  const int64_t d = model_.dim();
  const int64_t have = static_cast<int64_t>(positions_.size()) / d;
  if (have >= count) return;
  // Room for twice as many (and 64 at first), so the table is copied to the device (a wait on a
  // GPU) a few times per run at most.
  count = std::max<int64_t>({count, 2 * have, 64});
  positions_.resize(count * d);
  // The sinusoids of AddPositions (inference/layers/layers.cc), computed the same way so that sums
  // agree exactly.
  for (int64_t t = have; t < count; ++t) {
    PositionEncoding(t, d, &positions_[t * d], model_.positions());
  }
  table_arena_.Reset();
  position_table_ = Upload(positions_.data(), {count, d}, table_arena_);
}

void IncrementalDecoder::AddSentences(const Tensor& encoded, const Tensor& src_mask) {
  CHECK(encoded.rank() == 3 && src_mask.rank() == 2 && encoded.dim(0) == src_mask.dim(0) &&
        encoded.dim(1) == src_mask.dim(1))
      << "AddSentences: encoded " << encoded.shape().ToString();
  const int64_t old_b = sentences_, new_b = encoded.dim(0), b = old_b + new_b;
  const int64_t old_s = src_mask_.dim(1), new_s = src_mask.dim(1), s = std::max(old_s, new_s);
  Arena& arena = cross_arenas_[1 - cross_current_];
  arena.Reset();
  // Copies from (n, rest, len, inner) into sentences [at, at + n) of to (b, rest, s, inner),
  // padding each sentence's positions [len, s) with zeros.
  // The current sentences come from where the map says (finished ones left in place on the CPU),
  // the new ones after them.
  const Tensor old_ids = cross_upload_.Put(cross_sentence_.data(), {old_b}, DType::kInt32, arena);
  auto place = [&](const Tensor& from, const Tensor& to, int64_t at) {
    const bool old = at == 0;
    GatherAppend(from, old ? old_ids : Tensor(), 0, Tensor(),
                 to.Slice(at, at + (old ? old_b : from.dim(0))));
  };
  const int64_t held = src_mask_.dim(0);
  Tensor mask = arena.Alloc({b, s});
  place(src_mask_.Reshape({held, 1, old_s, 1}), mask.Reshape({b, 1, s, 1}), 0);
  place(src_mask.Reshape({new_b, 1, new_s, 1}), mask.Reshape({b, 1, s, 1}), old_b);
  const int heads = model_.heads();
  const int64_t dk = model_.dim() / heads;
  const auto& layers = model_.decoder_layers();
  for (size_t l = 0; l < layers.size(); ++l) {
    Tensor k_new, v_new;
    model_.ContextKeysValues(layers[l].context, encoded, arena, &k_new, &v_new);
    Tensor k = arena.Alloc({b, heads, s, dk}), v = arena.Alloc({b, heads, s, dk});
    place(cross_k_[l], k, 0);
    place(k_new, k, old_b);
    place(cross_v_[l], v, 0);
    place(v_new, v, old_b);
    cross_k_[l] = k;
    cross_v_[l] = v;
  }
  src_mask_ = mask;
  cross_current_ = 1 - cross_current_;
  cross_sentence_.resize(b);
  std::iota(cross_sentence_.begin(), cross_sentence_.end(), 0);
  sentence_start_.resize(b, steps_);
  sentences_ = b;
}

Tensor IncrementalDecoder::AanStep(size_t layer, const Tensor& x, const Tensor& parent_ids,
                                   const Tensor& counts, Arena& arena) {
  const AanParams& p = model_.decoder_layers()[layer].aan;
  const int64_t rows = x.dim(0), d = model_.dim();
  Tensor in = model_.SublayerInput(x, p.ln_scale, p.ln_bias, arena);  // (rows, 1, d)
  // sum[r] = sum_old[parents[r]] + in[r], or 0 + in[r] on a row's first step (every row at step
  // 0, the rows of sentences that joined at this step with top-up batching: parent id -1).
  Tensor sum = arena.Alloc({rows, 1, 1, d});
  const Tensor& old = aan_sum_[layer];
  GatherAppend(old.defined() ? old.Reshape({old.dim(0), 1, 1, d}) : Tensor(), parent_ids, 0,
               Tensor(), sum);
  Add(sum, in.Reshape(sum.shape()), sum);
  aan_sum_[layer] = sum.Reshape({rows, d});
  // The average of the row's inputs so far: the sum over its count of positions.
  Tensor avg = arena.Alloc({rows, 1, d});
  Copy(sum.Reshape(avg.shape()), avg);
  DivideRows(avg, counts);
  Tensor g = AverageAttentionBody(p, in, avg, model_.activation(), arena);
  return model_.SublayerOutput(x, g, p.ln_scale, p.ln_bias, arena);
}

Tensor IncrementalDecoder::TensorCacheAttend(size_t layer, const Tensor& in, const Tensor& ids,
                                             int64_t skip, const Tensor& mask, Arena& arena) {
  const AttentionParams& p = model_.decoder_layers()[layer].self;
  const int64_t rows = in.dim(0), d = model_.dim(), heads = model_.heads(), dk = d / heads;
  const int64_t window = mask.dim(1);
  const Tensor in2 = in.Reshape({rows, d});
  // q (rows, d) and the step's keys, then values, (2, rows, d): as one product of the stacked
  // weights where the model made them (a GPU's), else three.
  Tensor q, kv;
  if (p.w_qkv.defined()) {
    Tensor qkv = arena.Alloc({3, rows, d});
    GemmBias(in2, false, p.w_qkv, false, p.b_qkv, qkv, p.wq.inputs);
    q = qkv.Slice(0, 1);
    kv = qkv.Slice(1, 3);
  } else {
    q = Linear(in2, p.wq, p.bq, arena);
    kv = arena.Alloc({2, rows, d});
    LinearInto(in2, p.wk, p.bk, kv.Slice(0, 1).Reshape({rows, d}));
    LinearInto(in2, p.wv, p.bv, kv.Slice(1, 2).Reshape({rows, d}));
  }
  // Keys and values are 2 rows' histories to the cache: (2 rows, d) is (2 rows, H, dk), one
  // position per row.
  Tensor grown = arena.Alloc({2 * rows, heads, window, dk});
  GatherAppend(self_kv_[layer], ids, skip, kv.Reshape({2 * rows, heads, dk}), grown);
  self_kv_[layer] = grown;
  return AttendHeads(q.Reshape({rows, heads, 1, dk}), grown.Slice(0, rows),
                     grown.Slice(rows, 2 * rows), mask, /*causal=*/false, arena)
      .Reshape({rows, 1, d});
}

IncrementalDecoder::StepOutput IncrementalDecoder::Step(const std::vector<int32_t>& prev_tokens,
                                                        const std::vector<int32_t>& parents) {
  Tensor h = StepHidden(prev_tokens, parents);
  Arena& arena = step_arenas_[(steps_ - 1) % 2];
  StepOutput out;
  out.logits = model_.OutputLogits(h, arena);
  out.log_probs = arena.Alloc(out.logits.shape());
  LogSoftmax(out.logits, out.log_probs);
  return out;
}

Tensor IncrementalDecoder::StepHidden(const std::vector<int32_t>& prev_tokens,
                                      const std::vector<int32_t>& parents) {
  const int64_t rows = static_cast<int64_t>(prev_tokens.size());
  CHECK_EQ(rows, sentences_ * beam_) << "Step: rows must be sentences * beam";
  CHECK_EQ(static_cast<int64_t>(parents.size()), rows) << "Step: one parent per row";
  CHECK_GT(rows, 0);
  const int64_t t = steps_, d = model_.dim();
  Arena& arena = step_arenas_[t % 2];
  arena.Reset();
  // Rows at their sentence's first position (all at step 0; with top-up batching, the rows of
  // sentences that joined now) start afresh; the others continue their parents.
  fresh_.resize(rows);
  for (int64_t r = 0; r < rows; ++r) {
    fresh_[r] = sentence_start_[r / beam_] == t;
    if (!fresh_[r]) {
      CHECK(parents[r] >= 0 && parents[r] < prev_rows_) << "Step: parent out of range";
    }
  }
  const bool kv_cache = !model_.aan() && !tensor_cache_;
  if (kv_cache) cache_.Reorder(parents, fresh_);
  const int64_t first_start = *std::min_element(sentence_start_.begin(), sentence_start_.end());

  // Each row's parent (-1 for a fresh row) for the tensor cache's gather and the AAN's sums;
  // with AAN then each row's count of positions (its own position + 1) as float bits, so that
  // the step's ids reach the device in one copy (a copy from the host waits for the GPU).
  const bool gather = tensor_cache_ || model_.aan();
  const bool values_gather = tensor_cache_ && !model_.aan();
  const int64_t id_rows = (gather ? 3 : 2) + (model_.aan() || values_gather ? 1 : 0);
  step_ids_.resize(id_rows * rows);
  std::copy(prev_tokens.begin(), prev_tokens.end(), step_ids_.begin());
  for (int64_t r = 0; r < rows; ++r) {
    step_ids_[rows + r] = static_cast<int32_t>(t - sentence_start_[r / beam_]);
    if (gather) step_ids_[2 * rows + r] = fresh_[r] ? -1 : parents[r];
    if (values_gather) {
      step_ids_[3 * rows + r] = fresh_[r] ? -1 : static_cast<int32_t>(parents[r] + prev_rows_);
    }
    if (model_.aan()) {
      const float count = static_cast<float>(step_ids_[rows + r] + 1);
      std::memcpy(&step_ids_[3 * rows + r], &count, sizeof(count));
    }
  }
  const Tensor all_ids = ids_upload_.Put(step_ids_.data(), {static_cast<int64_t>(step_ids_.size())},
                                         DType::kInt32, arena);
  const Tensor aan_counts = model_.aan() ? Tensor(all_ids.Slice(3 * rows, 4 * rows).raw(),
                                                  Shape{rows}, DType::kFloat32, all_ids.device())
                                         : Tensor();

  // sqrt(d) * embedding + the sinusoid of each row's own position.
  Tensor x = arena.Alloc({rows, 1, d});
  GatherRows(model_.target_embeddings(), all_ids.Slice(0, rows), x.Reshape({rows, d}),
             std::sqrt(static_cast<float>(d)));
  GrowPositions(t - first_start + 1);
  Tensor pe = arena.Alloc({rows, d});
  GatherRows(position_table_, all_ids.Slice(rows, 2 * rows), pe);
  Add(x.Reshape({rows, d}), pe, x.Reshape({rows, d}));

  // The tensor cache keeps steps [first_start, t]: each row's history reordered by its parent
  // (none for a fresh row), under a mask of the steps before its sentence joined.
  Tensor gather_ids = gather ? all_ids.Slice(2 * rows, 3 * rows) : Tensor(), key_mask;
  const Tensor cache_ids = values_gather ? all_ids.Slice(2 * rows, 4 * rows) : Tensor();
  int64_t skip = 0;
  if (tensor_cache_ && !model_.aan()) {
    skip = first_start - window_start_;
    window_start_ = first_start;
    const int64_t window = t - first_start + 1;
    key_mask_.resize(rows * window);
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t start = sentence_start_[r / beam_] - first_start;
      for (int64_t j = 0; j < window; ++j) key_mask_[r * window + j] = j >= start ? 1.f : 0.f;
    }
    key_mask = mask_upload_.Put(key_mask_.data(), {rows, window}, DType::kFloat32, arena);
  }

  const auto& layers = model_.decoder_layers();
  for (size_t l = 0; l < layers.size(); ++l) {
    const DecoderLayerParams& layer = layers[l];
    if (model_.aan()) {
      x = AanStep(l, x, gather_ids, aan_counts, arena);
    } else {
      const AttentionParams& self = layer.self;
      Tensor in = model_.SublayerInput(x, self.ln_scale, self.ln_bias, arena);
      Tensor context;
      if (kv_cache) {
        Tensor k = Linear(in, self.wk, self.bk, arena), v = Linear(in, self.wv, self.bv, arena);
        Tensor q = Linear(in, self.wq, self.bq, arena);
        context = arena.Alloc({rows, 1, d});
        cache_.AppendAndAttend(static_cast<int>(l), k.f32(), v.f32(), q.f32(), context.f32());
      } else {
        context = TensorCacheAttend(l, in, cache_ids, skip, key_mask, arena);
      }
      x = model_.SublayerNorm(Linear(context, self.wo, self.bo, arena, x), self.ln_scale,
                              self.ln_bias, arena);
    }
    // Cross-attention: the beam rows of a sentence are its queries, (B, beam, d).
    Tensor xb = x.Reshape({sentences_, beam_, d});
    x = model_
            .ContextBlock(layer.context, xb, cross_k_[l], cross_v_[l], src_mask_, arena,
                          model_.device() == Device::kCpu ? cross_sentence_.data() : nullptr)
            .Reshape({rows, 1, d});
    x = model_.FfnBlock(layer.ffn, x, arena);
  }
  if (kv_cache) cache_.Advance();
  prev_rows_ = rows;
  ++steps_;
  return x.Reshape({rows, d});
}

std::unique_ptr<DecoderState> Transformer::NewDecoder() const {
  return std::make_unique<IncrementalDecoder>(*this);
}

}  // namespace tern::inference
