// The output-vocabulary tables of the decoder speed-ups, built offline for a model: a lexical
// shortlist (IBM Model 1 over a line-aligned parallel corpus, inference/tables/shortlist.h) and
// vocabulary clusters (k-means over the model's own decoder states on unlabelled source text,
// inference/tables/clustering.h). tern-export builds them while exporting; tern-vocab-tables adds
// them to a model file that has none.
#pragma once

#include <string>
#include <vector>

#include "configs/tern.pb.h"
#include "inference/format/model_file.h"
#include "inference/format/weights.h"
#include "inference/layers/decoder_model.h"
#include "inference/tables/clustering.h"
#include "inference/tables/shortlist.h"
#include "inference/text_codec.h"

namespace tern::inference {

struct ClusterBuildOptions {
  int clusters = 64;         // K
  int top = 20;              // tokens ranked top-k for a state join its cluster's set
  int iterations = 10;       // k-means (Lloyd) iterations
  int max_states = 100000;   // decoder states kept for k-means
  int batch_sentences = 32;  // decoding batch
  uint32_t seed = 1;         // picks the initial centroids
};

struct VocabTableOptions {
  // Shortlist: both files (raw text, one sentence per line) or neither.
  std::string shortlist_src, shortlist_tgt;
  ShortlistBuildOptions shortlist;
  // Clusters: cluster_src (raw source text) when clusters.clusters > 0.
  std::string cluster_src;
  ClusterBuildOptions clusters{.clusters = 0};
  int cluster_sentences = 3000;  // source lines decoded for the states (0 = all)

  bool wants_shortlist() const { return !shortlist_src.empty() || !shortlist_tgt.empty(); }
  bool wants_clusters() const { return clusters.clusters > 0; }
  bool any() const { return wants_shortlist() || wants_clusters(); }
};

// tern::Error naming the option (as a command-line flag) that is missing or out of range.
void CheckVocabTableOptions(const VocabTableOptions& options);

// The tables' tensors for the Transformer `config` with `weights` (any weight type) and the
// model's vocabulary `codec`. Reads the files; tern::Error naming a file that cannot be read or
// a corpus whose sides differ in length. Clusters need a Transformer (tern::Error otherwise).
std::vector<NamedTensor> BuildVocabTables(const config::ModelConfig& config, const Weights& weights,
                                          const TextCodec& codec, const VocabTableOptions& options);

// Decodes `sources` (token ids ending with eos) greedily with `model`, collecting every step's
// output-layer input and its top tokens, then clusters the states.
VocabClusters BuildVocabClusters(const DecoderModel& model,
                                 const std::vector<std::vector<int32_t>>& sources,
                                 const ClusterBuildOptions& options);

}  // namespace tern::inference
