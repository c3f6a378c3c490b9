// Lexical shortlist (Devlin 2017; Marian's lexical shortlists): the output vocabulary of a batch is
// the union of the most frequent target tokens and the best translations of each of its source
// tokens, so the output layer multiplies by a few hundred embedding rows instead of all of them.
// The translations come from IBM Model 1 (a few EM iterations over the SentencePiece-encoded
// parallel corpus), built offline and stored in the model file as three int32 tensors:
//   shortlist_frequent (F)      the F most frequent target tokens (eos and unk among them)
//   shortlist_offsets  (V + 1)  source token s owns shortlist_ids[offsets[s], offsets[s + 1])
//   shortlist_ids      (total)  target tokens, best first
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "inference/format/model_file.h"
#include "inference/format/weights.h"

namespace tern::inference {

inline constexpr char kShortlistFrequent[] = "shortlist_frequent";
inline constexpr char kShortlistOffsets[] = "shortlist_offsets";
inline constexpr char kShortlistIds[] = "shortlist_ids";

class Shortlist {
 public:
  // frequent: target tokens always in; translations[s]: target tokens for source token s.
  Shortlist(int64_t vocab, std::vector<int32_t> frequent,
            const std::vector<std::vector<int32_t>>& translations);

  // The shortlist stored in `weights`, or null when the model has none; tern::Error naming the
  // tensor when one is malformed.
  static std::unique_ptr<Shortlist> FromWeights(const Weights& weights, int64_t vocab);
  // The three tensors above (owning), for the model file.
  std::vector<NamedTensor> ToTensors() const;

  // Sorted, unique target tokens for a batch of source sentences (token ids).
  void Select(const std::vector<std::vector<int32_t>>& sources, std::vector<int32_t>* ids) const;

  int64_t vocab() const { return vocab_; }
  const std::vector<int32_t>& frequent() const { return frequent_; }

 private:
  Shortlist() = default;
  int64_t vocab_ = 0;
  std::vector<int32_t> frequent_;
  std::vector<int32_t> offsets_;  // (V + 1)
  std::vector<int32_t> ids_;
};

struct ShortlistBuildOptions {
  int frequent = 100;      // most frequent target tokens always in
  int best = 50;           // translations kept per source token
  int iterations = 5;      // IBM Model 1 EM iterations
  float min_prob = 1e-3f;  // translations below this p(t|s) are dropped
};

// IBM Model 1 p(t|s) by EM over a parallel corpus of token ids (sentences without bos/eos), with a
// NULL source word; keeps the `best` most probable t per s. src and tgt: the same sentence count.
Shortlist BuildShortlist(const std::vector<std::vector<int32_t>>& src,
                         const std::vector<std::vector<int32_t>>& tgt, int64_t vocab,
                         const ShortlistBuildOptions& options);

}  // namespace tern::inference
