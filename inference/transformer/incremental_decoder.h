// Step-by-step decoding with the Transformer: the decoder's self-attention keys and values live in
// a KvCache (kv_cache.h), a tree of positions that each step extends by one node per row under
// the row's back-pointer (hypotheses share their common prefix; nothing is copied when beams
// fork); the cross-attention keys and values of the encoder output are computed once per batch.
// Rows are sentence-major: sentence i owns rows [i * beam, (i + 1) * beam). With arch "aan" the
// decoder carries instead, per layer and row, the running sum of its AAN inputs (reordered by the
// parents likewise), so a step costs the same at every position. With top-up batching each row
// has its own position (its sentence's step count), so rows that join late see only their own
// history. The AAN sums are tensors on the model's device, on the CPU as on a GPU: one gather by
// the back-pointers (zeros for a fresh row), one add and one division by the row's count a layer.
//
// With Transformer::tensor_cache() (always on a GPU) the self-attention history is instead a pair
// of device tensors per layer, (rows, H, positions, dk), rebuilt each step by one GatherAppend
// (reorder by the back-pointers, append the new position, drop the positions no row still needs)
// and attended by batched products under a key mask that hides each row's positions before its
// sentence joined. Every tensor of a step is then on the model's device; the host hands over
// only the step's token ids, back-pointers, position ids and mask.
//
// Memory: two step arenas used in turn (a step reads the state of the previous one and resets the
// arena of the one before), two arenas for the cross-attention state (used in turn when sentences
// join, and on a GPU when finished ones are dropped), and the KvCache's buffers. After the first
// batches nothing here calls the general allocator.
#pragma once

#include <cstdint>
#include <vector>

#include "inference/layers/decoder_model.h"
#include "inference/transformer/kv_cache.h"
#include "inference/transformer/transformer.h"
#include "tensor/arena.h"
#include "tensor/tensor.h"

namespace tern::inference {

class IncrementalDecoder : public DecoderState {
 public:
  explicit IncrementalDecoder(const Transformer& model);
  IncrementalDecoder(const IncrementalDecoder&) = delete;
  IncrementalDecoder& operator=(const IncrementalDecoder&) = delete;

  // Starts a batch: encoded (B, S, d) and src_mask (B, S) from Transformer::Encode; each sentence
  // gets `beam` rows. Copies what it needs, so the caller may reset the encoder's arena after.
  void Start(const Tensor& encoded, const Tensor& src_mask, int beam) override;

  // Feeds one token per row. prev_tokens (rows): the tokens of this position (bos at step 0).
  // parents (rows): for each row, the row of the previous step it continues (ignored at step 0).
  // REQUIRES: rows == sentences() * beam(). The outputs are valid until the next-but-one Step.
  StepOutput Step(const std::vector<int32_t>& prev_tokens,
                  const std::vector<int32_t>& parents) override;
  // As Step, but stops before the output layer: returns the last decoder layer's output (rows, d)
  // for an OutputLayer to project (shortlists, fused top-k). Same lifetime as Step's outputs.
  Tensor StepHidden(const std::vector<int32_t>& prev_tokens,
                    const std::vector<int32_t>& parents) override;

  // Keeps only the sentences `keep` (increasing indices among the current sentences); the next
  // Step's parents are rows of the last Step that belong to kept sentences.
  void KeepSentences(const std::vector<int32_t>& keep) override;

  // Top-up batching: appends sentences (encoded (B2, S2, d), src_mask (B2, S2) from Encode) after
  // the current ones, each with `beam` rows that start at position 0 with the next Step (their
  // parents there are ignored; pass 0). Their self-attention sees only their own positions;
  // sources are padded to the longer of the two lengths. REQUIRES: Start.
  void AddSentences(const Tensor& encoded, const Tensor& src_mask) override;

  int64_t steps() const { return steps_; }
  int64_t sentences() const { return sentences_; }
  int beam() const { return beam_; }
  // Times this decoder's arenas asked the device allocator for memory (tests of the hot path).
  int64_t system_allocations() const override;

 private:
  const Transformer& model_;
  Arena step_arenas_[2];
  Arena cross_arenas_[2];
  int cross_current_ = 0;
  int beam_ = 1;
  int64_t sentences_ = 0;
  int64_t prev_rows_ = 0;
  int64_t steps_ = 0;
  // Top-up batching: the step at which each sentence joined (0 for all without top-up).
  std::vector<int64_t> sentence_start_;
  std::vector<uint8_t> fresh_;    // per row of the current step: at its sentence's first position
  std::vector<float> positions_;  // (P, d) position encodings for rows at their own positions
  // Makes position_table_ hold positions [0, count): the model's device table where it reaches,
  // else positions_ grown and copied to the device.
  void GrowPositions(int64_t count);
  // The position encodings (P, d) on the model's device.
  Arena table_arena_;
  Tensor position_table_;
  // A step's ids for the device, in one copy: per row its token, its position, (tensor cache or
  // AAN) its parent row, -1 for a fresh row, then with the tensor cache its parent's row among
  // the cached values (the parent + the previous step's rows; -1), with AAN its count of
  // positions as float bits.
  std::vector<int32_t> step_ids_;
  // step_ids_, key_mask_ and KeepSentences' list to the device.
  StepUploader ids_upload_, mask_upload_, keep_upload_;
  StepUploader cross_upload_;  // AddSentences' map of the current sentences
  const bool tensor_cache_;
  // The tensor cache: per layer (2 rows, H, T, dk), the keys of steps [window_start_, steps_) of
  // each row, then their values, in the arena of the last step (one GatherAppend extends both);
  // host staging for a step's key mask.
  std::vector<Tensor> self_kv_;
  int64_t window_start_ = 0;
  std::vector<float> key_mask_;
  // The self-attention of one layer with the tensor cache: its input (rows, 1, d) -> context
  // (rows, 1, d). ids (2 rows): each row's parent among the cached keys, then among the values.
  Tensor TensorCacheAttend(size_t layer, const Tensor& in, const Tensor& ids, int64_t skip,
                           const Tensor& mask, Arena& arena);
  Tensor src_mask_;                        // (B', S) in the current cross arena
  std::vector<Tensor> cross_k_, cross_v_;  // per layer (B', H, S, dk)
  // Per current sentence, its index among the B' above: on the CPU finished sentences leave
  // their cross-attention state in place until the next AddSentences or Start (KeepSentences
  // only shortens this map); on a GPU it is the identity (KeepSentences gathers).
  std::vector<int32_t> cross_sentence_;
  KvCache cache_;                // self-attention keys and values
  std::vector<Tensor> aan_sum_;  // arch "aan": per layer (rows, d) on the model's device
  // The AAN sublayer of one step: x (rows, 1, d) -> new x; updates aan_sum_[layer]. parent_ids
  // (rows) int32, -1 for a fresh row; counts (rows) float, each row's positions so far.
  Tensor AanStep(size_t layer, const Tensor& x, const Tensor& parent_ids, const Tensor& counts,
                 Arena& arena);
};

}  // namespace tern::inference
