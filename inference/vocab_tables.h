// The output-vocabulary tables of the decoder speed-ups, built offline for a model: a lexical
// shortlist (IBM Model 1 over a line-aligned parallel corpus, shortlist.h) and vocabulary
// clusters (k-means over the model's own decoder states on unlabelled source text,
// clustering.h). tern-export builds them while exporting; tern-vocab-tables adds them to a
// model file that has none.
#pragma once

#include <string>
#include <vector>

#include "configs/tern.pb.h"
#include "inference/clustering.h"
#include "inference/model_file.h"
#include "inference/shortlist.h"
#include "inference/text_codec.h"
#include "inference/weights.h"

namespace tern::inference {

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

}  // namespace tern::inference
