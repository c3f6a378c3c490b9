#include "inference/beam_search.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "common/error.h"
#include "inference/clustering.h"
#include "inference/shortlist.h"
#include "tensor/ops.h"

namespace tern::inference {
namespace {

constexpr float kDead = -std::numeric_limits<float>::infinity();

// pad and bos are never training targets, so they are never outputs either.
inline bool Producible(int64_t token) { return token != kPadId && token != kBosId; }

// The most probable producible token of one row of log-probabilities.
int32_t BestToken(const float* log_probs, int64_t vocab) {
  int64_t best = -1;
  for (int64_t v = 0; v < vocab; ++v) {
    if (Producible(v) && (best < 0 || log_probs[v] > log_probs[best])) best = v;
  }
  return static_cast<int32_t>(best);
}

}  // namespace

BeamSearch::BeamSearch(const Transformer& model, const BeamSearchOptions& options)
    : model_(model), options_(options), decoder_(model), output_(model) {
  if (options_.shortlist != nullptr && options_.clusters != nullptr) {
    Fail("the lexical shortlist and vocabulary clustering cannot be combined; pick one");
  }
  if (options_.beam_size < 1) Fail("beam size must be >= 1 (got ", options_.beam_size, ")");
  if (options_.n_best < 1 || options_.n_best > options_.beam_size) {
    Fail("n-best must be between 1 and the beam size ", options_.beam_size, " (got ",
         options_.n_best, ")");
  }
  if (options_.max_length_factor < 0 || options_.max_length_extra < 0 ||
      options_.max_length_cap < 0) {
    Fail("maximum output length settings must not be negative");
  }
}

void BeamSearch::StartBatch(const std::vector<std::vector<int32_t>>& sources, int beam) {
  const int64_t batch = static_cast<int64_t>(sources.size());
  int64_t src_len = 1;
  for (const auto& s : sources) src_len = std::max<int64_t>(src_len, s.size());
  encoder_arena_.Reset();
  Tensor src = encoder_arena_.AllocZeros({batch, src_len}, DType::kInt32);
  Tensor mask = encoder_arena_.AllocZeros({batch, src_len});
  max_length_.assign(batch, 1);
  longest_ = 1;
  for (int64_t i = 0; i < batch; ++i) {
    const auto& s = sources[i];
    for (size_t j = 0; j < s.size(); ++j) {
      if (s[j] < 0 || s[j] >= model_.vocab_size()) {
        Fail("source token id ", s[j], " is outside the model's vocabulary of ",
             model_.vocab_size(), " (wrong vocabulary for this model?)");
      }
      src.i32()[i * src_len + j] = s[j];
      mask.f32()[i * src_len + j] = 1.f;
    }
    int limit = static_cast<int>(options_.max_length_factor * static_cast<float>(s.size())) +
                options_.max_length_extra;
    if (options_.max_length_cap > 0) limit = std::min(limit, options_.max_length_cap);
    max_length_[i] = std::max(limit, 1);
    longest_ = std::max(longest_, max_length_[i]);
  }
  Tensor encoded = model_.Encode(src, mask, encoder_arena_);
  decoder_.Start(encoded, mask, beam);
}

Hypothesis BeamSearch::MakeHypothesis(const int32_t* tokens, int length, float score,
                                      bool eos) const {
  Hypothesis h;
  h.tokens.assign(tokens, tokens + length);
  h.score = score;
  h.ended_with_eos = eos;
  const float len = static_cast<float>(length + (eos ? 1 : 0));
  h.normalized_score = options_.length_alpha == 0.f
                           ? score
                           : score / std::pow(std::max(len, 1.f), options_.length_alpha);
  return h;
}

void BeamSearch::ScoreStep(const Tensor& hidden, int beam) {
  output_arena_.Reset();
  Tensor x = model_.OutputInput(hidden, output_arena_);
  if (options_.observe_states) options_.observe_states(x);
  if (options_.clusters != nullptr) {
    options_.clusters->Select(x, &vocab_ids_);
    output_.Restrict(vocab_ids_);
  }
  const bool fused = options_.fused_output;
  Tensor logits = output_.Logits(x, /*with_bias=*/!fused, output_arena_);
  columns_scored_ += logits.dim(1);
  ++steps_scored_;
  if (!fused) {
    log_probs_ = output_arena_.Alloc(logits.shape());
    LogSoftmax(logits, log_probs_);
    return;
  }
  const int64_t rows = logits.dim(0), columns = logits.dim(1);
  const int k = beam == 1 ? 1 : 2 * beam;
  const bool normalize = beam > 1 || options_.need_scores;
  if (static_cast<int64_t>(row_top_.size()) < rows) row_top_.resize(rows);
  row_lse_.resize(rows);
  for (int64_t r = 0; r < rows; ++r) {
    row_top_[r].clear();
    if (row_scores_[r] == kDead) continue;
    row_lse_[r] = FusedRowTopK(logits.f32() + r * columns, output_.bias(), columns,
                               output_.excluded_columns(), k, normalize, &row_top_[r]);
  }
}

void BeamSearch::TopCandidates(int64_t first, int beam) {
  const size_t keep = static_cast<size_t>(beam == 1 ? 1 : 2 * beam);
  // A min-heap of the best `keep` so far: the front is the worst kept.
  auto worse = [](const Candidate& a, const Candidate& b) { return a.score > b.score; };
  auto offer = [&](float s, int64_t r, int32_t token) {
    if (candidates_.size() < keep) {
      candidates_.push_back({s, static_cast<int32_t>(r), token});
      std::push_heap(candidates_.begin(), candidates_.end(), worse);
    } else if (s > candidates_.front().score) {
      std::pop_heap(candidates_.begin(), candidates_.end(), worse);
      candidates_.back() = {s, static_cast<int32_t>(r), token};
      std::push_heap(candidates_.begin(), candidates_.end(), worse);
    }
  };
  candidates_.clear();
  for (int64_t r = first; r < first + beam; ++r) {
    const float base = row_scores_[r];
    if (base == kDead) continue;
    if (options_.fused_output) {
      const float norm = base - row_lse_[r];
      for (const ColumnScore& c : row_top_[r]) offer(norm + c.logit, r, output_.token(c.column));
      continue;
    }
    const int64_t columns = log_probs_.dim(1);
    const float* lp = log_probs_.f32() + r * columns;
    for (int64_t c = 0; c < columns; ++c) {
      const int32_t token = output_.token(c);
      if (Producible(token)) offer(base + lp[c], r, token);
    }
  }
  std::sort_heap(candidates_.begin(), candidates_.end(), worse);  // best first
}

std::vector<std::vector<Hypothesis>> BeamSearch::Search(
    const std::vector<std::vector<int32_t>>& sources) {
  const int beam = options_.beam_size;
  const int64_t batch = static_cast<int64_t>(sources.size());
  std::vector<std::vector<Hypothesis>> finished(batch);
  if (batch == 0) return finished;
  StartBatch(sources, beam);
  const int width = longest_;
  if (options_.shortlist != nullptr) {
    options_.shortlist->Select(sources, &vocab_ids_);
    output_.Restrict(vocab_ids_);
  } else {
    output_.Unrestrict();
  }

  std::vector<int32_t> active(batch), keep;
  for (int64_t i = 0; i < batch; ++i) active[i] = static_cast<int32_t>(i);
  int64_t rows = batch * beam;
  row_scores_.assign(rows, kDead);
  for (int64_t i = 0; i < batch; ++i) row_scores_[i * beam] = 0.f;  // one live start per sentence
  prev_.assign(rows, kBosId);
  parents_.resize(rows);
  tokens_.assign(rows * width, kPadId);
  next_tokens_.assign(rows * width, kPadId);
  next_scores_.resize(rows);
  candidates_.reserve(2 * beam);

  for (int t = 0; !active.empty(); ++t) {
    ScoreStep(decoder_.StepHidden(prev_, parents_), beam);
    keep.clear();
    int64_t next_rows = 0;
    for (size_t i = 0; i < active.size(); ++i) {
      const int32_t sentence = active[i];
      std::vector<Hypothesis>& done = finished[sentence];
      TopCandidates(static_cast<int64_t>(i) * beam, beam);
      const int64_t base = next_rows;
      int live = 0;
      for (const Candidate& c : candidates_) {
        if (live == beam) break;
        const int32_t* history = &tokens_[c.row * width];
        if (c.token == kEosId) {
          done.push_back(MakeHypothesis(history, t, c.score, /*eos=*/true));
          continue;
        }
        const int64_t r = base + live++;
        int32_t* dst = &next_tokens_[r * width];
        std::copy(history, history + t, dst);
        dst[t] = c.token;
        next_scores_[r] = c.score;
        parents_[r] = c.row;
        prev_[r] = c.token;
      }
      bool sentence_done = live == 0 || static_cast<int>(done.size()) >= beam;
      if (!sentence_done && t + 1 >= max_length_[sentence]) {
        for (int j = 0; j < live; ++j) {
          done.push_back(MakeHypothesis(&next_tokens_[(base + j) * width], t + 1,
                                        next_scores_[base + j], /*eos=*/false));
        }
        sentence_done = true;
      }
      if (sentence_done) continue;
      // Rows without a live hypothesis repeat the first one, scored dead.
      for (int j = live; j < beam; ++j) {
        const int64_t r = base + j;
        std::copy(&next_tokens_[base * width], &next_tokens_[base * width] + t + 1,
                  &next_tokens_[r * width]);
        next_scores_[r] = kDead;
        parents_[r] = parents_[base];
        prev_[r] = prev_[base];
      }
      keep.push_back(static_cast<int32_t>(i));
      next_rows += beam;
    }
    if (keep.size() != active.size()) {
      decoder_.KeepSentences(keep);
      for (size_t j = 0; j < keep.size(); ++j) active[j] = active[keep[j]];
      active.resize(keep.size());
    }
    rows = next_rows;
    prev_.resize(rows);
    parents_.resize(rows);
    std::swap(tokens_, next_tokens_);
    std::copy(next_scores_.begin(), next_scores_.begin() + rows, row_scores_.begin());
    row_scores_.resize(rows);
  }

  for (auto& hyps : finished) {
    std::stable_sort(hyps.begin(), hyps.end(), [](const Hypothesis& a, const Hypothesis& b) {
      return a.normalized_score > b.normalized_score;
    });
    if (static_cast<int>(hyps.size()) > options_.n_best) hyps.resize(options_.n_best);
  }
  return finished;
}

std::vector<Hypothesis> BeamSearch::Greedy(const std::vector<std::vector<int32_t>>& sources) {
  const int64_t batch = static_cast<int64_t>(sources.size());
  std::vector<Hypothesis> results(batch);
  if (batch == 0) return results;
  StartBatch(sources, /*beam=*/1);
  const int64_t vocab = model_.vocab_size();
  const int width = longest_;
  std::vector<int32_t> active(batch), keep;
  for (int64_t i = 0; i < batch; ++i) active[i] = static_cast<int32_t>(i);
  row_scores_.assign(batch, 0.f);
  prev_.assign(batch, kBosId);
  parents_.resize(batch);
  tokens_.assign(batch * width, kPadId);

  for (int t = 0; !active.empty(); ++t) {
    const IncrementalDecoder::StepOutput out = decoder_.Step(prev_, parents_);
    const float* log_probs = out.log_probs.f32();
    keep.clear();
    for (size_t i = 0; i < active.size(); ++i) {
      const int32_t sentence = active[i];
      const float* lp = log_probs + i * vocab;
      const int32_t best = BestToken(lp, vocab);
      // Rows keep their place among the kept ones; row i's history lives at tokens_[sentence].
      int32_t* history = &tokens_[sentence * width];
      const float score = row_scores_[i] + lp[best];
      if (best == kEosId) {
        results[sentence] = MakeHypothesis(history, t, score, /*eos=*/true);
        continue;
      }
      history[t] = best;
      if (t + 1 >= max_length_[sentence]) {
        results[sentence] = MakeHypothesis(history, t + 1, score, /*eos=*/false);
        continue;
      }
      const size_t j = keep.size();
      parents_[j] = static_cast<int32_t>(i);
      prev_[j] = best;
      row_scores_[j] = score;
      keep.push_back(static_cast<int32_t>(i));
    }
    if (keep.size() != active.size()) {
      decoder_.KeepSentences(keep);
      for (size_t j = 0; j < keep.size(); ++j) active[j] = active[keep[j]];
      active.resize(keep.size());
    }
    prev_.resize(active.size());
    parents_.resize(active.size());
    row_scores_.resize(active.size());
  }
  return results;
}

}  // namespace tern::inference
