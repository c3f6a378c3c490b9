#include "inference/tables/shortlist.h"

#include <algorithm>
#include <cstring>
#include <numeric>

#include "common/error.h"
#include "inference/format/special_ids.h"

namespace tern::inference {
namespace {

std::vector<int32_t> IntVector(const Weights& weights, const char* name) {
  const Tensor& t = weights.Get(name);
  if (t.dtype() != DType::kInt32 || t.rank() != 1) {
    Fail(weights.source(), ": model tensor '", name, "' must be a 1-D int32 tensor (got ",
         DTypeName(t.dtype()), " ", t.shape().ToString(), "); rebuild the shortlist");
  }
  return std::vector<int32_t>(t.i32(), t.i32() + t.numel());
}

Tensor OwnedInts(const std::vector<int32_t>& v) {
  Tensor t = Tensor::Empty({static_cast<int64_t>(v.size())}, DType::kInt32);
  if (!v.empty()) std::memcpy(t.raw(), v.data(), v.size() * sizeof(int32_t));
  return t;
}

}  // namespace

Shortlist::Shortlist(int64_t vocab, std::vector<int32_t> frequent,
                     const std::vector<std::vector<int32_t>>& translations)
    : vocab_(vocab), frequent_(std::move(frequent)) {
  CHECK_EQ(static_cast<int64_t>(translations.size()), vocab);
  offsets_.push_back(0);
  for (const auto& t : translations) {
    ids_.insert(ids_.end(), t.begin(), t.end());
    offsets_.push_back(static_cast<int32_t>(ids_.size()));
  }
}

std::unique_ptr<Shortlist> Shortlist::FromWeights(const Weights& weights, int64_t vocab) {
  const bool any = weights.Has(kShortlistFrequent) || weights.Has(kShortlistOffsets) ||
                   weights.Has(kShortlistIds);
  if (!any) return nullptr;
  std::unique_ptr<Shortlist> s(new Shortlist());
  s->vocab_ = vocab;
  s->frequent_ = IntVector(weights, kShortlistFrequent);
  s->offsets_ = IntVector(weights, kShortlistOffsets);
  s->ids_ = IntVector(weights, kShortlistIds);
  auto bad = [&](const char* what) {
    Fail(weights.source(), ": malformed lexical shortlist: ", what, "; rebuild the shortlist");
  };
  if (static_cast<int64_t>(s->offsets_.size()) != vocab + 1) bad("offsets do not match vocabulary");
  if (s->offsets_.front() != 0 || s->offsets_.back() != static_cast<int32_t>(s->ids_.size())) {
    bad("offsets do not cover the ids");
  }
  for (size_t i = 1; i < s->offsets_.size(); ++i) {
    if (s->offsets_[i] < s->offsets_[i - 1]) bad("offsets decrease");
  }
  for (const auto* v : {&s->frequent_, &s->ids_}) {
    for (int32_t id : *v) {
      if (id < 0 || id >= vocab) bad("token id outside the vocabulary");
    }
  }
  return s;
}

std::vector<NamedTensor> Shortlist::ToTensors() const {
  return {{kShortlistFrequent, OwnedInts(frequent_)},
          {kShortlistOffsets, OwnedInts(offsets_)},
          {kShortlistIds, OwnedInts(ids_)}};
}

void Shortlist::Select(const std::vector<std::vector<int32_t>>& sources,
                       std::vector<int32_t>* ids) const {
  // Scratch of this thread's: the searches of several CPU workers share one shortlist.
  thread_local std::vector<uint8_t> marks;
  marks.assign(vocab_, 0);
  for (int32_t id : frequent_) marks[id] = 1;
  marks[kEosId] = 1;
  for (const auto& sentence : sources) {
    for (int32_t s : sentence) {
      if (s < 0 || s >= vocab_) continue;  // the decoder reports bad ids
      for (int32_t i = offsets_[s]; i < offsets_[s + 1]; ++i) marks[ids_[i]] = 1;
    }
  }
  ids->clear();
  for (int64_t v = 0; v < vocab_; ++v) {
    if (marks[v]) ids->push_back(static_cast<int32_t>(v));
  }
}

Shortlist BuildShortlist(const std::vector<std::vector<int32_t>>& src,
                         const std::vector<std::vector<int32_t>>& tgt, int64_t vocab,
                         const ShortlistBuildOptions& options) {
  CHECK_EQ(src.size(), tgt.size());
  const int64_t v = vocab;
  // Source index v is the NULL word. The tables are dense (source tokens seen x V floats, twice):
  // 2 x 256 MB at 8k tokens, fine offline; a 32k vocabulary would want a sparse table.
  std::vector<int64_t> tgt_count(v, 0);
  std::vector<uint8_t> seen_src(v + 1, 0);
  for (size_t i = 0; i < src.size(); ++i) {
    for (int32_t t : tgt[i]) {
      CHECK(t >= 0 && t < v) << "BuildShortlist: target id " << t;
      ++tgt_count[t];
    }
    for (int32_t s : src[i]) {
      CHECK(s >= 0 && s < v) << "BuildShortlist: source id " << s;
      seen_src[s] = 1;
    }
  }
  seen_src[v] = 1;
  // Compact row index for source tokens that occur (and NULL), so the table is seen x V.
  std::vector<int32_t> row_of(v + 1, -1);
  int32_t rows = 0;
  for (int64_t s = 0; s <= v; ++s) {
    if (seen_src[s]) row_of[s] = rows++;
  }
  std::vector<float> prob(static_cast<size_t>(rows) * v, 1.f / static_cast<float>(v));
  std::vector<float> count(prob.size());
  std::vector<int32_t> row_ids;
  for (int it = 0; it < options.iterations; ++it) {
    std::fill(count.begin(), count.end(), 0.f);
    for (size_t i = 0; i < src.size(); ++i) {
      row_ids.clear();
      for (int32_t s : src[i]) row_ids.push_back(row_of[s]);
      row_ids.push_back(row_of[v]);
      for (int32_t t : tgt[i]) {
        float denom = 0;
        for (int32_t r : row_ids) denom += prob[static_cast<size_t>(r) * v + t];
        if (denom <= 0) continue;
        for (int32_t r : row_ids) {
          count[static_cast<size_t>(r) * v + t] += prob[static_cast<size_t>(r) * v + t] / denom;
        }
      }
    }
    for (int32_t r = 0; r < rows; ++r) {
      float* c = &count[static_cast<size_t>(r) * v];
      const double total = std::accumulate(c, c + v, 0.0);
      float* p = &prob[static_cast<size_t>(r) * v];
      for (int64_t t = 0; t < v; ++t) p[t] = total > 0 ? static_cast<float>(c[t] / total) : 0.f;
    }
  }

  std::vector<int32_t> order(v);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int32_t a, int32_t b) { return tgt_count[a] > tgt_count[b]; });
  std::vector<int32_t> frequent = {kUnkId, kEosId};
  for (int32_t t : order) {
    if (static_cast<int>(frequent.size()) >= options.frequent + 2) break;
    if (tgt_count[t] > 0 && t != kUnkId && t != kEosId) frequent.push_back(t);
  }
  std::vector<std::vector<int32_t>> translations(v);
  for (int64_t s = 0; s < v; ++s) {
    if (row_of[s] < 0) continue;
    const float* p = &prob[static_cast<size_t>(row_of[s]) * v];
    std::vector<int32_t> cand;
    for (int64_t t = 0; t < v; ++t) {
      if (p[t] >= options.min_prob) cand.push_back(static_cast<int32_t>(t));
    }
    std::stable_sort(cand.begin(), cand.end(), [&](int32_t a, int32_t b) { return p[a] > p[b]; });
    if (static_cast<int>(cand.size()) > options.best) cand.resize(options.best);
    translations[s] = std::move(cand);
  }
  return Shortlist(v, std::move(frequent), translations);
}

}  // namespace tern::inference
