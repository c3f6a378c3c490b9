#include "inference/search/beam_search.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "common/error.h"
#include "inference/layers/layers.h"
#include "inference/search/fused_top_k.h"
#include "inference/tables/clustering.h"
#include "inference/tables/shortlist.h"
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

BeamSearch::BeamSearch(const DecoderModel& model, const BeamSearchOptions& options,
                       const std::vector<const DecoderModel*>& ensemble)
    : model_(model),
      options_(options),
      encoder_arena_(model.device()),
      decoder_(model.NewDecoder()),
      output_(model),
      output_arena_(model.device()),
      cluster_arena_(model.device()) {
  if (model.device() != Device::kCpu) options_.batched_fused = true;
  for (const DecoderModel* m : ensemble) {
    CHECK(m != nullptr);
    if (m->vocab_size() != model.vocab_size()) {
      Fail("ensemble member ", members_.size() + 2, " has a vocabulary of ", m->vocab_size(),
           " tokens, the first model ", model.vocab_size(), "; ensembles need one vocabulary");
    }
    if (m->device() != model.device()) {
      Fail("ensemble member ", members_.size() + 2, " is on ", DeviceName(m->device()),
           ", the first model on ", DeviceName(model.device()),
           "; an ensemble's models decode on one device");
    }
    members_.push_back(std::make_unique<Member>(*m));
  }
  if (options_.shortlist != nullptr && options_.clusters != nullptr) {
    Fail("the lexical shortlist and vocabulary clustering cannot be combined; pick one");
  }
  if (options_.beam_size < 1 || options_.beam_size > kMaxBeamSize) {
    Fail("beam size must be between 1 and ", kMaxBeamSize, " (got ", options_.beam_size, ")");
  }
  if (options_.n_best < 1 || options_.n_best > options_.beam_size) {
    Fail("n-best must be between 1 and the beam size ", options_.beam_size, " (got ",
         options_.n_best, ")");
  }
  // A factor of inf, nan or 1e9 overflowed the limit's int to one word: every translation cut.
  if (!(options_.max_length_factor >= 0 && options_.max_length_factor <= kMaxLengthFactor) ||
      options_.max_length_extra < 0 || options_.max_length_extra > kMaxLengthExtra ||
      options_.max_length_cap < 0) {
    Fail("the output length limit, factor x source length + extra, needs a factor in [0, ",
         kMaxLengthFactor, "] (got ", options_.max_length_factor, ") and an extra in [0, ",
         kMaxLengthExtra, "] (got ", options_.max_length_extra, ")");
  }
  // A NaN would make every normalized score NaN, and the hypotheses' order undefined.
  if (!(options_.length_alpha >= 0 && options_.length_alpha <= kMaxLengthAlpha)) {
    Fail("length normalization (alpha) must be a number in [0, ", kMaxLengthAlpha, "], not ",
         options_.length_alpha);
  }
}

int BeamSearch::LengthLimit(size_t length) const {
  int limit = static_cast<int>(options_.max_length_factor * static_cast<float>(length)) +
              options_.max_length_extra;
  if (options_.max_length_cap > 0) limit = std::min(limit, options_.max_length_cap);
  return std::max(limit, 1);
}

void BeamSearch::SetLimits(const std::vector<std::vector<int32_t>>& sources) {
  max_length_.assign(sources.size(), 1);
  longest_ = 1;
  for (size_t i = 0; i < sources.size(); ++i) {
    max_length_[i] = LengthLimit(sources[i].size());
    longest_ = std::max(longest_, max_length_[i]);
  }
}

Tensor BeamSearch::EncodeSources(std::span<const std::vector<int32_t>> sources, Tensor* mask) {
  const int64_t batch = static_cast<int64_t>(sources.size());
  int64_t src_len = 1;
  for (const auto& s : sources) src_len = std::max<int64_t>(src_len, s.size());
  encoder_arena_.Reset();
  src_ids_.assign(batch * src_len, 0);
  src_mask_.assign(batch * src_len, 0.f);
  for (int64_t i = 0; i < batch; ++i) {
    const auto& s = sources[i];
    for (size_t j = 0; j < s.size(); ++j) {
      if (s[j] < 0 || s[j] >= model_.vocab_size()) {
        Fail("source token id ", s[j], " is outside the model's vocabulary of ",
             model_.vocab_size(), " (wrong vocabulary for this model?)");
      }
      src_ids_[i * src_len + j] = s[j];
      src_mask_[i * src_len + j] = 1.f;
    }
  }
  // On the model's device (copies to the GPU the host does not wait for, or within the host).
  Tensor src = src_upload_.Put(src_ids_.data(), {batch, src_len}, DType::kInt32, encoder_arena_);
  *mask = mask_upload_.Put(src_mask_.data(), {batch, src_len}, DType::kFloat32, encoder_arena_);
  for (auto& m : members_) {
    m->encoder_arena.Reset();
    m->encoded = m->model.Encode(src, *mask, m->encoder_arena);
  }
  return model_.Encode(src, *mask, encoder_arena_);
}

void BeamSearch::StartDecoders(const Tensor& encoded, const Tensor& mask, int beam) {
  decoder_->Start(encoded, mask, beam);
  for (auto& m : members_) m->decoder->Start(m->encoded, mask, beam);
}

void BeamSearch::AddToDecoders(const Tensor& encoded, const Tensor& mask) {
  decoder_->AddSentences(encoded, mask);
  for (auto& m : members_) m->decoder->AddSentences(m->encoded, mask);
}

void BeamSearch::KeepInDecoders(const std::vector<int32_t>& keep) {
  decoder_->KeepSentences(keep);
  for (auto& m : members_) m->decoder->KeepSentences(keep);
}

Tensor BeamSearch::MeanOverMembers(const Tensor& first, bool greedy) {
  if (members_.empty()) return first;
  // (first + m1 + m2 ...) / n in that order, each sum a pass on the models' device.
  Tensor mean = output_arena_.Alloc(first.shape());
  for (size_t i = 0; i < members_.size(); ++i) {
    Member& m = *members_[i];
    Tensor member_lp;
    if (greedy) {
      member_lp = m.decoder->Step(prev_, parents_).log_probs;
    } else {
      Tensor x = m.model.OutputInput(m.decoder->StepHidden(prev_, parents_), output_arena_);
      Tensor logits = m.output.Logits(x, /*with_bias=*/true, output_arena_);
      member_lp = output_arena_.Alloc(logits.shape());
      LogSoftmax(logits, member_lp);
    }
    CHECK(member_lp.shape() == first.shape());
    Add(i == 0 ? first : mean, member_lp, mean);
  }
  Scale(mean, 1.f / static_cast<float>(ensemble_size()));
  return mean;
}

int64_t BeamSearch::system_allocations() const {
  int64_t n = encoder_arena_.system_allocations() + decoder_->system_allocations();
  for (const auto& m : members_) {
    n += m->encoder_arena.system_allocations() + m->decoder->system_allocations();
  }
  return n;
}

void BeamSearch::StartBatch(const std::vector<std::vector<int32_t>>& sources, size_t count,
                            int beam) {
  SetLimits(sources);
  Tensor mask;
  Tensor encoded = EncodeSources({sources.data(), count}, &mask);
  StartDecoders(encoded, mask, beam);
}

std::vector<std::vector<int32_t>> BeamSearch::SentenceShortlists(size_t first) {
  std::vector<std::vector<int32_t>> lists(running_.size() - first);
  for (size_t j = first; j < running_.size(); ++j) {
    batch_sources_.assign(1, running_[j].source);
    options_.shortlist->Select(batch_sources_, &lists[j - first]);
  }
  return lists;
}

void BeamSearch::KeepShortlists(const std::vector<int32_t>& keep) {
  if (!output_.grouped()) return;
  output_.KeepGroups(keep);
  for (auto& m : members_) m->output.KeepGroups(keep);
}

void BeamSearch::AddShortlists(size_t first) {
  const std::vector<std::vector<int32_t>> lists = SentenceShortlists(first);
  output_.AddGroups(lists);
  for (auto& m : members_) m->output.AddGroups(lists);
}

void BeamSearch::RestrictToShortlist() {
  if (options_.shortlist == nullptr) return;
  if (options_.shortlist_per_sentence) {
    const std::vector<std::vector<int32_t>> lists = SentenceShortlists(0);
    output_.RestrictGroups(lists, options_.beam_size);
    for (auto& m : members_) m->output.RestrictGroups(lists, options_.beam_size);
    return;
  }
  batch_sources_.clear();
  for (const Running& s : running_) batch_sources_.push_back(s.source);
  options_.shortlist->Select(batch_sources_, &vocab_ids_);
  output_.Restrict(vocab_ids_);
  for (auto& m : members_) m->output.Restrict(vocab_ids_);
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

void BeamSearch::BatchedTopK(const Tensor& logits, const Tensor& bias, int k, int extra,
                             bool normalize) {
  const int64_t rows = logits.dim(0);
  const Device device = logits.device();
  const int wide = k + extra;  // the columns the pass keeps per row
  // values (rows, wide), columns (rows, wide) and lse (rows) in one block: on a GPU one copy
  // brings them down, and the host waits for the GPU once a step.
  Tensor block = output_arena_.Alloc({rows * (2 * wide + 1)});
  auto part = [&](const Tensor& b, int64_t begin, const Shape& shape, DType dtype) {
    return Tensor(b.Slice(begin, begin + shape.numel()).raw(), shape, dtype, b.device());
  };
  auto parts = [&](const Tensor& b, Tensor* v, Tensor* c, Tensor* l) {
    *v = part(b, 0, {rows, wide}, DType::kFloat32);
    *c = part(b, rows * wide, {rows, wide}, DType::kInt32);
    *l = part(b, 2 * rows * wide, {rows}, DType::kFloat32);
  };
  Tensor values, columns, lse;
  parts(block, &values, &columns, &lse);
  // Grouped rows exclude their own pad and bos columns below, the rest the layer's.
  const int32_t none[2] = {-1, -1};
  FusedTopK(logits, bias, wide, normalize, output_.grouped() ? none : output_.excluded_columns(),
            values, columns, lse);
  if (device != Device::kCpu) parts(OnHost(block, host_arena_), &values, &columns, &lse);
  for (int64_t r = 0; r < rows; ++r) {
    row_top_[r].clear();
    if (row_scores_[r] == kDead) continue;
    row_lse_[r] = lse.f32()[r];
    const int64_t own = output_.row_columns(r);
    const int32_t* excluded = output_.row_excluded_columns(r);
    for (int j = 0; j < wide && static_cast<int>(row_top_[r].size()) < k; ++j) {
      const int32_t column = columns.i32()[r * wide + j];
      if (column < 0 || column >= own || column == excluded[0] || column == excluded[1]) continue;
      row_top_[r].push_back({values.f32()[r * wide + j], column});
    }
  }
}

void BeamSearch::SelectClustersOnDevice(const Tensor& x) {
  const VocabClusters& clusters = *options_.clusters;
  const int64_t k = clusters.clusters(), rows = x.dim(0);
  if (!cluster_centroids_.defined()) {
    cluster_centroids_ = Upload(clusters.centroids().data(), {k, clusters.dim()}, cluster_arena_);
    std::vector<float> bias(clusters.half_norms());
    for (float& b : bias) b = -b;
    cluster_bias_ = Upload(bias.data(), {k}, cluster_arena_);
  }
  Tensor dots = output_arena_.Alloc({rows, k});
  Gemm(x, false, cluster_centroids_, true, dots);
  Tensor best = output_arena_.Alloc({rows, 1}),
         nearest = output_arena_.Alloc({rows, 1}, DType::kInt32);
  Tensor unused = output_arena_.Alloc({rows});
  const int32_t none[2] = {-1, -1};
  FusedTopK(dots, cluster_bias_, 1, /*normalize=*/false, none, best, nearest, unused);
  clusters.SelectClusters(OnHost(nearest, host_arena_).i32(), rows, &vocab_ids_);
}

void BeamSearch::ScoreStep(const Tensor& hidden, int beam) {
  output_arena_.Reset();
  host_arena_.Reset();
  Tensor x = model_.OutputInput(hidden, output_arena_);
  if (options_.observe_states) options_.observe_states(OnHost(x, host_arena_));
  if (options_.clusters != nullptr) {
    if (x.device() == Device::kCpu && !options_.batched_fused) {
      options_.clusters->Select(x, &vocab_ids_);
    } else {
      SelectClustersOnDevice(x);
    }
    // An ensemble's step vocabulary is the one the first model's states choose.
    output_.Restrict(vocab_ids_);
    for (auto& m : members_) m->output.Restrict(vocab_ids_);
  }
  // An ensemble's fused pass picks from the mean log-probabilities: every model's bias and
  // softmax come first. A single model's pass sums the softmax itself (single_pass), and adds the
  // bias there too, except for a GPU's shortlists per sentence, whose biases differ by row.
  const bool fused = options_.fused_output, single_pass = fused && members_.empty();
  const bool on_device = x.device() != Device::kCpu;
  const bool device_groups = on_device && output_.grouped();
  const bool fuse_bias = single_pass && !device_groups;
  Tensor logits = output_.Logits(x, /*with_bias=*/!fuse_bias, output_arena_);
  columns_scored_ += output_.mean_row_columns(logits.dim(0));
  ++steps_scored_;
  if (!single_pass) {
    log_probs_ = output_arena_.Alloc(logits.shape());
    LogSoftmax(logits, log_probs_);
    log_probs_ = MeanOverMembers(log_probs_, /*greedy=*/false);
    if (!fused) {
      log_probs_ = OnHost(log_probs_, host_arena_);
      return;
    }
  }
  const Tensor& scores = single_pass ? logits : log_probs_;
  const int64_t rows = scores.dim(0);
  const int k = beam == 1 ? 1 : 2 * beam;
  const bool normalize = single_pass && (beam > 1 || options_.need_scores);
  if (static_cast<int64_t>(row_top_.size()) < rows) row_top_.resize(rows);
  row_lse_.resize(rows);
  // A GPU's groups: the kernel keeps two more per row (one group's pad and bos are not another's
  // columns), and the host drops those and the padding.
  const int extra = device_groups ? 2 : 0;
  if (options_.batched_fused && (!output_.grouped() || on_device) &&
      (!on_device || k + extra <= kMaxGpuTopK)) {
    BatchedTopK(scores, fuse_bias ? output_.bias_tensor() : Tensor(), k, extra, normalize);
    return;
  }
  HostTopK(scores, fuse_bias, k, normalize);
}

void BeamSearch::HostTopK(const Tensor& scores, bool with_bias, int k, bool normalize) {
  // A beam too wide for the GPU's kernel copies the scores back.
  const Tensor host_scores = OnHost(scores, host_arena_);
  const Tensor host_bias =
      with_bias && !output_.grouped() ? OnHost(output_.bias_tensor(), host_arena_) : Tensor();
  const int64_t columns = scores.dim(1);
  for (int64_t r = 0; r < scores.dim(0); ++r) {
    row_top_[r].clear();
    if (row_scores_[r] == kDead) continue;
    const float* bias = !with_bias          ? nullptr
                        : output_.grouped() ? output_.row_bias(r)
                                            : host_bias.f32();
    row_lse_[r] = FusedRowTopK(host_scores.f32() + r * columns, bias, output_.row_columns(r),
                               output_.row_excluded_columns(r), k, normalize, &row_top_[r]);
  }
}

void BeamSearch::TopCandidates(int64_t first, int beam) {
  const size_t keep = static_cast<size_t>(beam == 1 ? 1 : 2 * beam);
  // A total order, so the unfused pass (every column offered) and the fused one (each row's best,
  // ties to the lower column) keep and rank the same candidates: score, then the earlier row,
  // then within the row its own order, which the score follows there.
  auto better = [](const Candidate& a, const Candidate& b) {
    if (a.score != b.score) return a.score > b.score;
    if (a.row != b.row) return a.row < b.row;
    if (a.value != b.value) return a.value > b.value;
    return a.column < b.column;
  };
  // A heap of the best `keep` so far: the front is the worst kept.
  auto offer = [&](float s, int64_t r, int32_t token, float value, int32_t column) {
    const Candidate c{s, static_cast<int32_t>(r), token, value, column};
    if (candidates_.size() < keep) {
      candidates_.push_back(c);
      std::push_heap(candidates_.begin(), candidates_.end(), better);
    } else if (better(c, candidates_.front())) {
      std::pop_heap(candidates_.begin(), candidates_.end(), better);
      candidates_.back() = c;
      std::push_heap(candidates_.begin(), candidates_.end(), better);
    }
  };
  candidates_.clear();
  for (int64_t r = first; r < first + beam; ++r) {
    const float base = row_scores_[r];
    if (base == kDead) continue;
    if (options_.fused_output) {
      const float norm = base - row_lse_[r];
      for (const ColumnScore& c : row_top_[r]) {
        offer(norm + c.logit, r, output_.row_token(r, c.column), c.logit, c.column);
      }
      continue;
    }
    const int64_t columns = log_probs_.dim(1);
    const float* lp = log_probs_.f32() + r * columns;
    // A score below the worst kept one is never better (better() compares scores first): most
    // columns end at this one comparison.
    float floor = candidates_.size() == keep ? candidates_.front().score
                                             : -std::numeric_limits<float>::infinity();
    for (int64_t c = 0; c < columns; ++c) {
      if (base + lp[c] < floor) continue;
      const int32_t token = output_.row_token(r, c);
      if (!Producible(token)) continue;
      offer(base + lp[c], r, token, lp[c], static_cast<int32_t>(c));
      if (candidates_.size() == keep) floor = candidates_.front().score;
    }
  }
  std::sort_heap(candidates_.begin(), candidates_.end(), better);  // best first
}

std::vector<std::vector<Hypothesis>> BeamSearch::Search(
    const std::vector<std::vector<int32_t>>& sources) {
  return Decode(sources, sources.size(), /*top_up=*/false);
}

std::vector<std::vector<Hypothesis>> BeamSearch::SearchTopUp(
    const std::vector<std::vector<int32_t>>& sources, int capacity) {
  if (capacity < 1) Fail("top-up batching needs a batch of at least one sentence");
  return Decode(sources, static_cast<size_t>(capacity), /*top_up=*/true);
}

std::vector<std::vector<Hypothesis>> BeamSearch::Decode(
    const std::vector<std::vector<int32_t>>& sources, size_t capacity, bool top_up) {
  const size_t n = sources.size();
  std::vector<std::vector<Hypothesis>> results(n);
  if (n == 0) return results;
  CHECK(running_.empty()) << "Search while the stepping API has sentences running";
  std::vector<int64_t> ids(n);
  for (size_t i = 0; i < n; ++i) ids[i] = static_cast<int64_t>(i);
  auto admit = [&](size_t first, size_t count) {
    Admit({sources.data() + first, count}, {ids.data() + first, count});
  };
  set_batch_room(static_cast<int>(std::min(capacity, n)));
  size_t next = std::min(capacity, n);  // the first sentence not yet started
  admit(0, next);
  std::vector<FinishedSentence> finished;
  while (!running_.empty()) {
    finished.clear();
    Step(&finished);
    for (FinishedSentence& f : finished) results[f.id] = std::move(f.hypotheses);
    // Top-up: once half the batch has finished, waiting sentences take the free places.
    const size_t active = running_.size();
    if (top_up && active > 0 && next < n && 2 * active <= capacity) {
      const size_t count = std::min(capacity - active, n - next);
      admit(next, count);
      next += count;
    }
    // Nothing left running but sentences waiting: a fresh batch.
    if (running_.empty() && next < n) {
      const size_t count = std::min(capacity, n - next);
      admit(next, count);
      next += count;
    }
  }
  return results;
}

int64_t BeamSearch::running_padded_tokens() const {
  size_t longest = 0;
  for (const Running& s : running_) longest = std::max(longest, s.source.size());
  return static_cast<int64_t>(longest * running_.size());
}

void BeamSearch::Admit(std::span<const std::vector<int32_t>> sources,
                       std::span<const int64_t> ids) {
  CHECK_EQ(sources.size(), ids.size());
  if (sources.empty()) return;
  const bool fresh_batch = running_.empty();
  Tensor mask;
  Tensor encoded = EncodeSources(sources, &mask);  // checks the ids before anything changes
  int width = fresh_batch ? 1 : width_;
  const size_t first = running_.size();
  for (size_t i = 0; i < sources.size(); ++i) {
    const int limit = LengthLimit(sources[i].size());
    width = std::max(width, limit);
    running_.push_back(
        Running{.id = ids[i], .source = sources[i], .max_length = limit, .done = {}});
  }
  if (fresh_batch) {
    width_ = width;
    StartDecoders(encoded, mask, options_.beam_size);
  } else {
    if (width > width_) WidenHistory(width);
    AddToDecoders(encoded, mask);
  }
  AddFreshRows(sources.size(), fresh_batch);
  if (fresh_batch) {
    output_.Unrestrict();
    for (auto& m : members_) m->output.Unrestrict();
    RestrictToShortlist();
  } else if (output_.grouped()) {
    AddShortlists(first);
  } else {
    RestrictToShortlist();
  }
}

void BeamSearch::AddFreshRows(size_t count, bool fresh_batch) {
  const int beam = options_.beam_size;
  if (fresh_batch) {
    row_scores_.clear();
    prev_.clear();
    parents_.clear();
  }
  // One live start per sentence; the new rows see no earlier position, so their parents are
  // ignored.
  for (size_t i = 0; i < count; ++i) {
    for (int b = 0; b < beam; ++b) {
      row_scores_.push_back(b == 0 ? 0.f : kDead);
      prev_.push_back(kBosId);
      parents_.push_back(0);
    }
  }
  const size_t cells = row_scores_.size() * static_cast<size_t>(width_);
  if (fresh_batch) {
    tokens_.assign(cells, kPadId);
  } else if (tokens_.size() < cells) {
    tokens_.resize(cells, kPadId);
  }
  if (next_tokens_.size() < cells) next_tokens_.resize(cells, kPadId);
  if (next_scores_.size() < row_scores_.size()) next_scores_.resize(row_scores_.size());
  candidates_.reserve(2 * beam);
}

void BeamSearch::WidenHistory(int width) {
  const size_t rows = row_scores_.size();
  std::vector<int32_t> wider(rows * width, kPadId);
  for (size_t r = 0; r < rows; ++r) {
    std::copy(&tokens_[r * width_], &tokens_[r * width_] + width_, &wider[r * width]);
  }
  tokens_ = std::move(wider);
  next_tokens_.assign(tokens_.size(), kPadId);
  width_ = width;
}

void BeamSearch::Step(std::vector<FinishedSentence>* finished) {
  CHECK(!running_.empty()) << "Step with no sentence running";
  const int beam = options_.beam_size;
  const int width = width_;
  ScoreStep(decoder_->StepHidden(prev_, parents_), beam);
  occupied_ += static_cast<int64_t>(running_.size());
  capacity_ += room_;
  std::vector<int32_t>& keep = keep_;
  keep.clear();
  int64_t next_rows = 0;
  for (size_t i = 0; i < running_.size(); ++i) {
    Running& sentence = running_[i];
    const int step = sentence.position;  // this sentence's output position
    std::vector<Hypothesis>& done = sentence.done;
    TopCandidates(static_cast<int64_t>(i) * beam, beam);
    const int64_t base = next_rows;
    int live = 0;
    for (size_t rank = 0; rank < candidates_.size(); ++rank) {
      const Candidate& c = candidates_[rank];
      if (live == beam) break;
      const int32_t* history = &tokens_[c.row * width];
      if (c.token == kEosId) {
        // Only among the best beam_size continuations, as Marian, fairseq and Hugging Face
        // count them: a lower-ranked eos is not a hypothesis the beam would keep.
        if (rank < static_cast<size_t>(beam)) {
          done.push_back(MakeHypothesis(history, step, c.score, /*eos=*/true));
        }
        continue;
      }
      const int64_t r = base + live++;
      int32_t* dst = &next_tokens_[r * width];
      std::copy(history, history + step, dst);
      dst[step] = c.token;
      next_scores_[r] = c.score;
      parents_[r] = c.row;
      prev_[r] = c.token;
    }
    bool sentence_done = live == 0 || static_cast<int>(done.size()) >= beam;
    if (!sentence_done && step + 1 >= sentence.max_length) {
      for (int j = 0; j < live; ++j) {
        done.push_back(MakeHypothesis(&next_tokens_[(base + j) * width], step + 1,
                                      next_scores_[base + j], /*eos=*/false));
      }
      sentence_done = true;
    }
    if (sentence_done) {
      std::stable_sort(done.begin(), done.end(), [](const Hypothesis& a, const Hypothesis& b) {
        return a.normalized_score > b.normalized_score;
      });
      if (static_cast<int>(done.size()) > options_.n_best) done.resize(options_.n_best);
      finished->push_back({sentence.id, std::move(done)});
      continue;
    }
    // Rows without a live hypothesis repeat the first one, scored dead.
    for (int j = live; j < beam; ++j) {
      const int64_t r = base + j;
      std::copy(&next_tokens_[base * width], &next_tokens_[base * width] + step + 1,
                &next_tokens_[r * width]);
      next_scores_[r] = kDead;
      parents_[r] = parents_[base];
      prev_[r] = prev_[base];
    }
    ++sentence.position;
    keep.push_back(static_cast<int32_t>(i));
    next_rows += beam;
  }
  std::swap(tokens_, next_tokens_);
  row_scores_.assign(next_scores_.begin(), next_scores_.begin() + next_rows);
  prev_.resize(next_rows);
  parents_.resize(next_rows);
  KeepRunning(keep, /*rows_compacted=*/true);
}

int BeamSearch::Remove(const std::function<bool(int64_t id)>& leaves) {
  std::vector<int32_t> keep;
  for (size_t i = 0; i < running_.size(); ++i) {
    if (!leaves(running_[i].id)) keep.push_back(static_cast<int32_t>(i));
  }
  const int removed = static_cast<int>(running_.size() - keep.size());
  KeepRunning(keep, /*rows_compacted=*/false);
  return removed;
}

void BeamSearch::KeepRunning(const std::vector<int32_t>& keep, bool rows_compacted) {
  if (keep.size() == running_.size()) return;
  const int beam = options_.beam_size;
  KeepInDecoders(keep);
  KeepShortlists(keep);
  for (size_t j = 0; j < keep.size(); ++j) {
    if (static_cast<size_t>(keep[j]) != j) running_[j] = std::move(running_[keep[j]]);
    if (rows_compacted) continue;
    // The kept rows move up; their parents still index the rows of the last Step.
    for (int b = 0; b < beam; ++b) {
      const size_t from = static_cast<size_t>(keep[j]) * beam + b, to = j * beam + b;
      if (from == to) continue;
      std::copy(&tokens_[from * width_], &tokens_[from * width_] + width_, &tokens_[to * width_]);
      row_scores_[to] = row_scores_[from];
      prev_[to] = prev_[from];
      parents_[to] = parents_[from];
    }
  }
  running_.resize(keep.size());
  if (!rows_compacted) {
    const size_t rows = keep.size() * beam;
    row_scores_.resize(rows);
    prev_.resize(rows);
    parents_.resize(rows);
  }
}

std::vector<Hypothesis> BeamSearch::Greedy(const std::vector<std::vector<int32_t>>& sources) {
  const int64_t batch = static_cast<int64_t>(sources.size());
  std::vector<Hypothesis> results(batch);
  if (batch == 0) return results;
  CHECK(running_.empty()) << "Greedy while the stepping API has sentences running";
  StartBatch(sources, sources.size(), /*beam=*/1);
  const int64_t vocab = model_.vocab_size();
  const int width = longest_;
  std::vector<int32_t> active(batch), keep;
  for (int64_t i = 0; i < batch; ++i) active[i] = static_cast<int32_t>(i);
  row_scores_.assign(batch, 0.f);
  prev_.assign(batch, kBosId);
  parents_.resize(batch);
  tokens_.assign(batch * width, kPadId);

  for (int t = 0; !active.empty(); ++t) {
    const DecoderState::StepOutput out = decoder_->Step(prev_, parents_);
    host_arena_.Reset();
    output_arena_.Reset();
    const float* log_probs =
        OnHost(MeanOverMembers(out.log_probs, /*greedy=*/true), host_arena_).f32();
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
      KeepInDecoders(keep);
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
