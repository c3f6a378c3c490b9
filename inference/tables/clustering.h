// Vocabulary projection by clustering (Amer et al.): decoder states are grouped by k-means, and
// each cluster owns the tokens that ranked among the top k for its states. At each step the output
// vocabulary is the union, over the batch's rows, of the token sets of each row's nearest
// centroid. Built offline by decoding unlabelled source text with the model itself; stored in the
// model file (optional per model) as
//   vocab_clusters_centroids (K, d) float32   centroids of output-layer inputs
//   vocab_clusters_offsets   (K + 1) int32    cluster c owns vocab_clusters_ids[offsets[c], ...)
//   vocab_clusters_ids       (total) int32    token ids
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "inference/format/model_file.h"
#include "inference/format/weights.h"
#include "tensor/tensor.h"

namespace tern::inference {

inline constexpr char kClusterCentroids[] = "vocab_clusters_centroids";
inline constexpr char kClusterOffsets[] = "vocab_clusters_offsets";
inline constexpr char kClusterIds[] = "vocab_clusters_ids";

class VocabClusters {
 public:
  // centroids (K * d, row-major); sets[c]: the tokens of cluster c.
  VocabClusters(int64_t vocab, int64_t dim, std::vector<float> centroids,
                const std::vector<std::vector<int32_t>>& sets);

  // The clusters stored in `weights`, or null when the model has none; tern::Error when malformed.
  static std::unique_ptr<VocabClusters> FromWeights(const Weights& weights, int64_t vocab,
                                                    int64_t dim);
  std::vector<NamedTensor> ToTensors() const;

  // The cluster whose centroid is nearest (Euclidean) to state (d).
  int32_t Nearest(const float* state) const;
  // Sorted, unique tokens for states x (rows, d): the union of the nearest clusters' sets, plus
  // eos.
  void Select(const Tensor& x, std::vector<int32_t>* ids) const;
  // The same union from each row's nearest cluster, found elsewhere (on a GPU: beam search).
  void SelectClusters(const int32_t* nearest, int64_t rows, std::vector<int32_t>* ids) const;

  int64_t dim() const { return dim_; }
  const std::vector<float>& centroids() const { return centroids_; }    // (K, d)
  const std::vector<float>& half_norms() const { return half_norms_; }  // (K) |c|^2 / 2

  int64_t clusters() const { return static_cast<int64_t>(offsets_.size()) - 1; }
  // Tokens of cluster c.
  int64_t set_size(int64_t c) const { return offsets_[c + 1] - offsets_[c]; }

 private:
  VocabClusters() = default;
  void ComputeNorms();
  int64_t vocab_ = 0, dim_ = 0;
  std::vector<float> centroids_;   // (K, d)
  std::vector<float> half_norms_;  // (K) |c|^2 / 2
  std::vector<int32_t> offsets_;   // (K + 1)
  std::vector<int32_t> ids_;
};

// Lloyd's k-means over `n` states of dimension `d` (row-major), `iterations` rounds from `k`
// distinct states drawn with `seed`: the centroids (k, d), and each state's cluster in
// `assignment`.
std::vector<float> KMeans(const std::vector<float>& states, int64_t n, int64_t d, int k,
                          int iterations, uint32_t seed, std::vector<int32_t>* assignment);

}  // namespace tern::inference
