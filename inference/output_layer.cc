#include "inference/output_layer.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "common/error.h"
#include "tensor/ops.h"

namespace tern::inference {

float FusedRowTopK(const float* logits, const float* bias, int64_t n, const int32_t excluded[2],
                   int k, bool normalize, std::vector<ColumnScore>* top) {
  top->clear();
  // top is kept sorted best first; `floor` is its worst logit once it holds k entries.
  float floor = -std::numeric_limits<float>::infinity();
  float max = -std::numeric_limits<float>::infinity();
  float sum = 0.f;
  for (int64_t c = 0; c < n; ++c) {
    const float x = logits[c] + bias[c];
    if (normalize) {
      if (x > max) {
        sum = sum * std::exp(max - x) + 1.f;
        max = x;
      } else {
        sum += std::exp(x - max);
      }
    }
    if ((static_cast<int>(top->size()) == k && x <= floor) || c == excluded[0] ||
        c == excluded[1]) {
      continue;
    }
    if (static_cast<int>(top->size()) == k) top->pop_back();
    auto at = std::upper_bound(top->begin(), top->end(), x,
                               [](float v, const ColumnScore& s) { return v > s.logit; });
    top->insert(at, {x, static_cast<int32_t>(c)});
    if (static_cast<int>(top->size()) == k) floor = top->back().logit;
  }
  return normalize ? max + std::log(sum) : 0.f;
}

OutputLayer::OutputLayer(const DecoderModel& model) : model_(model), vocab_(model.vocab_size()) {
  Unrestrict();
}

void OutputLayer::Unrestrict() {
  restricted_ = false;
  excluded_[0] = kPadId;
  excluded_[1] = kBosId;
}

void OutputLayer::Restrict(const std::vector<int32_t>& ids) {
  marks_.assign(vocab_, 0);
  for (int32_t id : ids) {
    CHECK(id >= 0 && id < vocab_) << "Restrict: token " << id << " outside the vocabulary";
    marks_[id] = 1;
  }
  // pad and bos stay as columns, never kept, so that the softmax sums over what the full
  // vocabulary's does whenever the restriction holds every other token.
  marks_[kPadId] = marks_[kBosId] = 1;
  ids_.clear();
  for (int64_t v = 0; v < vocab_; ++v) {
    if (marks_[v]) {
      if (v == kPadId) excluded_[0] = static_cast<int32_t>(ids_.size());
      if (v == kBosId) excluded_[1] = static_cast<int32_t>(ids_.size());
      ids_.push_back(static_cast<int32_t>(v));
    }
  }
  CHECK_GT(ids_.size(), 2u) << "Restrict: no producible token";
  restricted_ = true;
  const int64_t n = static_cast<int64_t>(ids_.size()), d = model_.output_embeddings().dim(1);
  table_arena_.Reset();
  Tensor ids_t = table_arena_.Alloc({n}, DType::kInt32);
  std::memcpy(ids_t.raw(), ids_.data(), n * sizeof(int32_t));
  emb_ = table_arena_.Alloc({n, d});
  GatherRows(model_.output_embeddings(), ids_t, emb_);
  bias_ = table_arena_.Alloc({n});
  const float* full_bias = model_.output_bias().f32();
  for (int64_t c = 0; c < n; ++c) bias_.f32()[c] = full_bias[ids_[c]];
  restricted_integer_ = LinearWeights();
  if (const LinearWeights* full = model_.integer_output()) {
    full->packed->GatherColumns(ids_, &packed_);
    // A non-owning pointer: packed_ outlives restricted_integer_'s use and is regathered in place.
    restricted_integer_.packed = std::shared_ptr<const cpu::PackedIntMatrix>(
        std::shared_ptr<const cpu::PackedIntMatrix>(), packed_.get());
    if (full->tuner) {
      if (!restricted_tuner_) restricted_tuner_ = std::make_shared<ProductTuner>();
      restricted_integer_.w = emb_;
      restricted_integer_.transposed = true;
      restricted_integer_.tuner = restricted_tuner_;
    }
  }
}

Tensor OutputLayer::Logits(const Tensor& x, bool with_bias, Arena& arena) const {
  const Tensor x2 = x.Flatten2D();
  const Tensor& table = restricted_ ? emb_ : model_.output_embeddings();
  Tensor logits = arena.Alloc({x2.rows(), columns()});
  const LinearWeights* integer = restricted_ ? &restricted_integer_ : model_.integer_output();
  if (integer != nullptr && integer->packed) {
    LinearInto(x2, *integer, with_bias ? (restricted_ ? bias_ : model_.output_bias()) : Tensor(),
               logits);
    return logits;
  }
  Gemm(x2, false, table, true, logits);
  if (with_bias) AddBias(logits, restricted_ ? bias_ : model_.output_bias());
  return logits;
}

}  // namespace tern::inference
