// Batched beam search and greedy decoding over any runtime model (decoder_model.h).
//
// Each sentence keeps `beam_size` live hypotheses. At every step the best 2 * beam_size
// continuations of a sentence's live hypotheses are walked best first: one ending in eos becomes a
// finished hypothesis if it ranks among the best beam_size (as in Marian, fairseq and Hugging
// Face's generate()), any other fills the next beam until it is full. A sentence is done when it
// has beam_size finished hypotheses, or when its hypotheses reach the length limit (they are then
// finished without eos); done sentences leave the batch. Finished hypotheses are ranked by
// score / length^alpha, where length counts the eos. Beam size 1 is greedy decoding. pad and bos
// are never produced (they are no training targets); scores are not renormalized for that.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "inference/layers/decoder_model.h"
#include "inference/layers/layers.h"
#include "inference/search/output_layer.h"
#include "tensor/arena.h"

namespace tern::inference {

class Shortlist;
class VocabClusters;

// The options' ranges (BeamSearch refuses others with a tern::Error).
inline constexpr int kMaxBeamSize = 1024;
inline constexpr float kMaxLengthFactor = 100.f;
inline constexpr int kMaxLengthExtra = 1 << 20;
inline constexpr float kMaxLengthAlpha = 10.f;

struct BeamSearchOptions {
  int beam_size = 4;
  int n_best = 1;                 // hypotheses returned per sentence, at most beam_size
  float length_alpha = 1.f;       // length normalization exponent; 0 = raw log-probability
  float max_length_factor = 2.f;  // output length limit = factor * source length + extra
  int max_length_extra = 10;
  int max_length_cap = 0;  // an absolute limit on top (0 = none)
  // Speed-ups, each on its own switch (see output_layer.h, shortlist.h, clustering.h).
  bool fused_output = false;  // bias + softmax + top-k in one pass over the logits
  // With fused_output at beam 1: false skips the softmax (argmax only); scores are then sums of
  // raw logits, not log-probabilities.
  bool need_scores = true;
  // The GPU's ways, always on for a model on a GPU and a switch on the CPU (for tests; the same
  // hypotheses either way): with fused_output, one batched pass over all rows
  // (inference/search/fused_top_k.h) whose (rows, k) results come back to the host, instead of
  // FusedRowTopK row by row on the host (beams up to kMaxGpuTopK / 2; a GPU copies wider ones'
  // logits to the host); with clusters, each row's nearest centroid by one product and that
  // pass's argmax (SelectClustersOnDevice).
  bool batched_fused = false;
  const Shortlist* shortlist = nullptr;  // per-batch output vocabulary; not owned
  // With a shortlist: each sentence gets its own shortlist (its beam's rows multiply by its own
  // columns) instead of the batch's union, so its translation does not depend on its batch.
  bool shortlist_per_sentence = false;
  const VocabClusters* clusters = nullptr;  // per-step output vocabulary; not owned
  // Called every step with the output layer's input (rows, d), for offline tools (clustering).
  std::function<void(const Tensor&)> observe_states = nullptr;
};

struct Hypothesis {
  std::vector<int32_t> tokens;  // the output, without bos and eos
  float score = 0;              // sum of log-probabilities of the tokens (and of eos if ended)
  float normalized_score = 0;   // score / (tokens + eos)^alpha; hypotheses are sorted by this
  bool ended_with_eos = false;  // false when cut off at the length limit
};

// Holds the decoding arenas, so one per thread; the model it reads may be shared. With a model on
// a GPU (DecoderModel::device) the encoder, decoder and output layer run there and only what the
// search itself needs comes back to the host each step: the k best columns and the log-sum-exp
// per row with fused_output, else the rows' log-probabilities. An ensemble's members run on the
// same device and their mean is made there. So does a shortlist per sentence: each sentence's
// columns are gathered there, and its rows multiplied by them in one batched product a step.
class BeamSearch {
 public:
  // ensemble: further models (same vocabulary, on model's device) decoded in step with `model`;
  // every step scores with the mean of the members' log-probabilities (an ensemble with equal
  // weights), made on that device. With fused_output the top-k pass runs over that mean (each
  // model's bias and softmax come first: the mean needs every model's normalized row). With
  // clusters (built from `model`'s decoder states) the states of `model` choose each step's
  // vocabulary, and every member is restricted to it.
  BeamSearch(const DecoderModel& model, const BeamSearchOptions& options,
             const std::vector<const DecoderModel*>& ensemble = {});
  BeamSearch(const BeamSearch&) = delete;
  BeamSearch& operator=(const BeamSearch&) = delete;

  // sources: one batch of source sentences as token ids, each ending with eos (callers sort
  // sentences by length into batches). Returns, per sentence in input order, up to n_best
  // hypotheses, best first.
  std::vector<std::vector<Hypothesis>> Search(const std::vector<std::vector<int32_t>>& sources);

  // Top-up batching: decodes `sources` (sorted as the caller likes) starting with the first
  // `capacity` of them; whenever half of the batch has finished, the next waiting sentences take
  // the free places (the encoder runs on them; their decoder rows join the running ones). The
  // same hypotheses as Search on any batching, to float tolerance in the scores.
  std::vector<std::vector<Hypothesis>> SearchTopUp(const std::vector<std::vector<int32_t>>& sources,
                                                   int capacity);
  // The stepping API, for continuous batching (inference/serve/): the caller admits sentences at
  // step boundaries, runs one decoder step at a time, and gets each sentence back at the step it
  // finishes. Search and SearchTopUp are loops over it. A sentence is named by the caller's id.
  struct FinishedSentence {
    int64_t id;
    std::vector<Hypothesis> hypotheses;  // up to n_best, best first
  };
  // Admits sentences (token ids, each ending with eos; ids of the caller's choosing) at a step
  // boundary: they are encoded together and start with the next Step, as a fresh batch when
  // nothing runs, else their rows join after the running ones (the top-up path).
  void Admit(std::span<const std::vector<int32_t>> sources, std::span<const int64_t> ids);
  // One decoder step over the running sentences; appends the sentences finished at it to
  // *finished, in batch order, and drops them from the batch. REQUIRES: running() > 0.
  void Step(std::vector<FinishedSentence>* finished);
  // Removes the running sentences whose ids `leaves` says (a cancelled request's) at a step
  // boundary; returns how many left.
  int Remove(const std::function<bool(int64_t id)>& leaves);
  // Sentences in the running batch, and its source tokens padded to the longest (sentences x
  // longest source, as max_batch_tokens counts them).
  int running() const { return static_cast<int>(running_.size()); }
  int64_t running_padded_tokens() const;
  // The room mean_occupancy counts each Step against (Search and SearchTopUp set it).
  void set_batch_room(int sentences) { room_ = sentences; }

  // Mean sentences decoded per step over the room in the batch (its capacity, or the sentence
  // count when smaller) since construction; 1 = always full.
  double mean_occupancy() const {
    return capacity_ == 0 ? 0.0 : static_cast<double>(occupied_) / capacity_;
  }

  // Greedy decoding (argmax at every step), one hypothesis per sentence; the same result as
  // Search with beam_size 1.
  std::vector<Hypothesis> Greedy(const std::vector<std::vector<int32_t>>& sources);

  const BeamSearchOptions& options() const { return options_; }
  // Mean output-layer columns per decoder step since construction (the vocabulary size unless a
  // shortlist or clusters restrict it).
  double mean_output_columns() const {
    return steps_scored_ == 0 ? 0.0 : columns_scored_ / static_cast<double>(steps_scored_);
  }
  // Decoder steps scored since construction (each one output-layer pass over the batch).
  int64_t decoder_steps() const { return steps_scored_; }
  // Times the arenas asked the device allocator for memory: constant once batches repeat in size.
  int64_t system_allocations() const;
  // Models decoded together (1 without an ensemble).
  int ensemble_size() const { return 1 + static_cast<int>(members_.size()); }

 private:
  // One continuation of a row: its hypothesis score, and the row's own value for it (the
  // log-probability, or the fused pass's logit) with its column, which break exact ties.
  struct Candidate {
    float score;
    int32_t row;
    int32_t token;
    float value;
    int32_t column;
  };
  // An ensemble member besides model_, with its own decoder state and output layer.
  struct Member {
    explicit Member(const DecoderModel& m)
        : model(m), encoder_arena(m.device()), decoder(m.NewDecoder()), output(m) {}
    const DecoderModel& model;
    Arena encoder_arena;
    std::unique_ptr<DecoderState> decoder;
    OutputLayer output;
    Tensor encoded;  // the last EncodeSources' output for this member
  };
  // A sentence of the running batch (the stepping API), in row order: sentence i owns rows
  // [i * beam, (i + 1) * beam).
  struct Running {
    int64_t id;
    std::vector<int32_t> source;  // for its shortlist
    int max_length;               // its output length limit
    int position = 0;             // its output position at the next Step
    std::vector<Hypothesis> done;
  };
  // The output length limit of a source of `length` tokens.
  int LengthLimit(size_t length) const;
  // The output length limit of every sentence: fills max_length_ and longest_ (Greedy).
  void SetLimits(const std::vector<std::vector<int32_t>>& sources);
  // Encodes `sources` into encoder_arena_: (count, S, d) and mask (count, S).
  Tensor EncodeSources(std::span<const std::vector<int32_t>> sources, Tensor* mask);
  // SetLimits, then encodes the first `count` sentences and starts the decoder with them.
  void StartBatch(const std::vector<std::vector<int32_t>>& sources, size_t count, int beam);
  // Admit's rows: `count` sentences of fresh rows after the running ones.
  void AddFreshRows(size_t count, bool fresh_batch);
  // Lays the token histories (rows, width_) out at a new width.
  void WidenHistory(int width);
  // Drops the rows of the sentences not in `keep` (increasing indices of running_) from the
  // decoders, the shortlists and the row state, after a Step or between Steps.
  void KeepRunning(const std::vector<int32_t>& keep, bool rows_compacted);
  // The decoder calls, made on every member's decoder too (encoded: EncodeSources' result).
  void StartDecoders(const Tensor& encoded, const Tensor& mask, int beam);
  void AddToDecoders(const Tensor& encoded, const Tensor& mask);
  void KeepInDecoders(const std::vector<int32_t>& keep);
  // first (rows, columns): the first model's log-probabilities of this step, on its device. With
  // members, their mean with every member's (from output_arena_, on that device); else first.
  // greedy: the members' decoders' Step (their own output layers) instead of StepHidden.
  Tensor MeanOverMembers(const Tensor& first, bool greedy);
  // With a shortlist: restricts the output to the union over the active sentences, or per
  // sentence (shortlist_per_sentence). KeepShortlists and AddShortlists follow the sentences
  // leaving and joining the batch when per sentence (a union stays as it is until the next
  // RestrictToShortlist); AddShortlists only then.
  void RestrictToShortlist();
  void KeepShortlists(const std::vector<int32_t>& keep);
  void AddShortlists(size_t first);
  // One shortlist per running sentence from `first` on.
  std::vector<std::vector<int32_t>> SentenceShortlists(size_t first);
  // Search (top_up false: all sentences in one batch) and SearchTopUp, over the stepping API.
  std::vector<std::vector<Hypothesis>> Decode(const std::vector<std::vector<int32_t>>& sources,
                                              size_t capacity, bool top_up);
  // Projects this step's decoder states onto the output vocabulary: log_probs_ (rows, columns)
  // when unfused, else row_top_ and row_lse_ per live row (with members: the top of the mean
  // log-probabilities, lse 0).
  void ScoreStep(const Tensor& hidden, int beam);
  // The best continuations (2 * beam; 1 at beam 1, where only the best counts) of rows
  // [first, first + beam), best first, into candidates_.
  void TopCandidates(int64_t first, int beam);
  Hypothesis MakeHypothesis(const int32_t* tokens, int length, float score, bool eos) const;

  // The fused output pass of a step over all rows at once (options_.batched_fused or a GPU), its
  // results copied into row_top_ and row_lse_. bias: the output layer's, or none (an ensemble's
  // mean log-probabilities, or biased logits). The pass keeps k + extra columns a row and the host
  // the k best of them that are the row's own producible columns (grouped rows on a GPU, whose
  // pad, bos and padding columns the pass cannot tell: extra 2).
  void BatchedTopK(const Tensor& logits, const Tensor& bias, int k, int extra, bool normalize);
  // The same pass row by row on the host (a beam too wide for the GPU's kernel, grouped rows on
  // the CPU, or the CPU without batched_fused); with_bias false: scores already include it (an
  // ensemble, or a GPU's grouped rows).
  void HostTopK(const Tensor& scores, bool with_bias, int k, bool normalize);
  // With clusters on a device: each row's nearest centroid found there (one product with the
  // centroids, then the fused pass's argmax with -|c|^2/2 as the bias); only the cluster ids come
  // back for the union.
  void SelectClustersOnDevice(const Tensor& x);

  const DecoderModel& model_;
  BeamSearchOptions options_;
  Arena encoder_arena_;
  std::unique_ptr<DecoderState> decoder_;
  OutputLayer output_;
  std::vector<std::unique_ptr<Member>> members_;
  Arena output_arena_;   // reset every step
  Arena host_arena_;     // the host's copies of a step's device results; reset every step
  Arena cluster_arena_;  // the centroids on the model's device, when needed
  Tensor cluster_centroids_, cluster_bias_;  // (K, d) and (K) = -|c|^2 / 2
  std::vector<int32_t> src_ids_;             // EncodeSources' staging (B, S) on the host
  std::vector<float> src_mask_;
  StepUploader src_upload_, mask_upload_;          // src_ids_ and src_mask_ to the model's device
  Tensor log_probs_;                               // (rows, columns) unfused
  std::vector<std::vector<ColumnScore>> row_top_;  // fused: per row, best first
  std::vector<float> row_lse_;                     // fused: per row, log-sum-exp
  std::vector<int32_t> vocab_ids_;
  double columns_scored_ = 0;
  int64_t steps_scored_ = 0;
  int64_t occupied_ = 0, capacity_ = 0;  // sentence-steps decoded and available
  int room_ = 0;                         // the batch's room in sentences, for mean_occupancy
  std::vector<Running> running_;         // the stepping API's batch, in row order
  std::vector<std::vector<int32_t>> batch_sources_;
  // Host-side state, reused across steps and batches.
  std::vector<int> max_length_;  // per sentence of the batch (Greedy)
  int longest_ = 0;              // max of max_length_
  int width_ = 0;                // of the token histories: the running sentences' longest limit
  std::vector<float> row_scores_, next_scores_;
  std::vector<int32_t> tokens_, next_tokens_;  // (rows, width_); Greedy: (sentences, longest_)
  std::vector<int32_t> prev_, parents_;
  std::vector<int32_t> keep_;  // Step's kept sentences
  std::vector<Candidate> candidates_;
};

}  // namespace tern::inference
