#include "inference/incremental_decoder.h"

#include <cstring>

#include "tensor/ops.h"

namespace tern::inference {

IncrementalDecoder::IncrementalDecoder(const Transformer& model) : model_(model) {}

int64_t IncrementalDecoder::system_allocations() const {
  return step_arenas_[0].system_allocations() + step_arenas_[1].system_allocations() +
         cross_arenas_[0].system_allocations() + cross_arenas_[1].system_allocations();
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
  Arena& arena = cross_arenas_[0];
  arena.Reset();
  cross_arenas_[1].Reset();
  step_arenas_[0].Reset();
  step_arenas_[1].Reset();
  src_mask_ = arena.Alloc(src_mask.shape());
  Copy(src_mask, src_mask_);
  const auto& layers = model_.decoder_layers();
  cross_k_.resize(layers.size());
  cross_v_.resize(layers.size());
  self_k_.assign(layers.size(), Tensor());
  self_v_.assign(layers.size(), Tensor());
  for (size_t l = 0; l < layers.size(); ++l) {
    model_.ContextKeysValues(layers[l].context, encoded, arena, &cross_k_[l], &cross_v_[l]);
  }
}

void IncrementalDecoder::KeepSentences(const std::vector<int32_t>& keep) {
  if (static_cast<int64_t>(keep.size()) == sentences_) return;
  Arena& arena = cross_arenas_[1 - cross_current_];
  arena.Reset();
  const int64_t kept = static_cast<int64_t>(keep.size());
  Tensor ids = arena.Alloc({kept}, DType::kInt32);
  for (int64_t i = 0; i < kept; ++i) {
    CHECK(keep[i] >= 0 && keep[i] < sentences_ && (i == 0 || keep[i] > keep[i - 1]))
        << "KeepSentences: bad index list";
    ids.i32()[i] = keep[i];
  }
  auto gather = [&](const Tensor& t) {
    Shape shape = t.shape();
    shape.set_dim(0, kept);
    Tensor out = arena.Alloc(shape);
    if (kept > 0) {
      GatherRows(t.Reshape({t.dim(0), t.numel() / t.dim(0)}), ids,
                 out.Reshape({kept, out.numel() / kept}));
    }
    return out;
  };
  src_mask_ = gather(src_mask_);
  for (size_t l = 0; l < cross_k_.size(); ++l) {
    cross_k_[l] = gather(cross_k_[l]);
    cross_v_[l] = gather(cross_v_[l]);
  }
  cross_current_ = 1 - cross_current_;
  sentences_ = kept;
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
  CHECK_GT(rows, 0);
  const int64_t t = steps_, d = model_.dim();
  const int heads = model_.heads();
  const int64_t dk = d / heads;
  Arena& arena = step_arenas_[t % 2];
  arena.Reset();

  Tensor ids = arena.Alloc({rows, 1}, DType::kInt32);
  std::memcpy(ids.raw(), prev_tokens.data(), rows * sizeof(int32_t));
  Tensor x = Embed(model_.target_embeddings(), ids, t, arena);  // (rows, 1, d)

  // Cache rows to carry over: new[tau * rows + r] = old[tau * prev_rows + parents[r]].
  Tensor carry;
  if (t > 0) {
    CHECK_EQ(static_cast<int64_t>(parents.size()), rows) << "Step: one parent per row";
    carry = arena.Alloc({t * rows}, DType::kInt32);
    int32_t* c = carry.i32();
    for (int64_t r = 0; r < rows; ++r) {
      CHECK(parents[r] >= 0 && parents[r] < prev_rows_) << "Step: parent out of range";
    }
    for (int64_t tau = 0; tau < t; ++tau) {
      for (int64_t r = 0; r < rows; ++r) {
        c[tau * rows + r] = static_cast<int32_t>(tau * prev_rows_ + parents[r]);
      }
    }
  }
  // Appends this step's keys or values to a reordered copy of the cache, and returns the cache
  // (t + 1, rows, d) plus its per-head view (rows, H, t + 1, dk).
  auto extend = [&](const Tensor& old, const Tensor& in, const Tensor& w, const Tensor& b,
                    Tensor* cache) {
    Tensor fresh = arena.Alloc({t + 1, rows, d});
    if (t > 0) {
      GatherRows(old.Reshape({t * prev_rows_, d}), carry, fresh.Slice(0, t).Reshape({t * rows, d}));
    }
    LinearInto(in, w, b, fresh.Slice(t, t + 1));
    *cache = fresh;
    Tensor heads_view = arena.Alloc({1, rows * heads, t + 1, dk});
    Permute0213(fresh.Reshape({1, t + 1, rows * heads, dk}), heads_view);
    return heads_view.Reshape({rows, heads, t + 1, dk});
  };

  const auto& layers = model_.decoder_layers();
  for (size_t l = 0; l < layers.size(); ++l) {
    const DecoderLayerParams& layer = layers[l];
    const AttentionParams& self = layer.self;
    Tensor in = model_.SublayerInput(x, self.ln_scale, self.ln_bias, arena);
    Tensor k = extend(self_k_[l], in, self.wk, self.bk, &self_k_[l]);
    Tensor v = extend(self_v_[l], in, self.wv, self.bv, &self_v_[l]);
    // One query per row: (rows, 1, d) is already (rows, H, 1, dk) in memory.
    Tensor q = Linear(in, self.wq, self.bq, arena).Reshape({rows, heads, 1, dk});
    Tensor context = AttendHeads(q, k, v, Tensor(), /*causal=*/false, arena);
    x = model_.SublayerOutput(x, Linear(context, self.wo, self.bo, arena), self.ln_scale,
                              self.ln_bias, arena);
    // Cross-attention: the beam rows of a sentence are its queries, (B, beam, d).
    Tensor xb = x.Reshape({sentences_, beam_, d});
    x = model_.ContextBlock(layer.context, xb, cross_k_[l], cross_v_[l], src_mask_, arena)
            .Reshape({rows, 1, d});
    x = model_.FfnBlock(layer.ffn, x, arena);
  }
  prev_rows_ = rows;
  ++steps_;
  return x.Reshape({rows, d});
}

}  // namespace tern::inference
