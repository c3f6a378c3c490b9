// The output-vocabulary table flags (see vocab_table_flags.h).
#include "launch/vocab_table_flags.h"

#include <gflags/gflags.h>

DEFINE_string(shortlist_src, "", "source side of the parallel corpus (raw text) for the shortlist");
DEFINE_string(shortlist_tgt, "", "target side of the parallel corpus (raw text)");
DEFINE_int32(shortlist_frequent, 100, "most frequent target tokens always in the shortlist");
DEFINE_int32(shortlist_best, 50, "translations kept per source token");
DEFINE_int32(shortlist_iterations, 5, "IBM Model 1 EM iterations");
DEFINE_double(shortlist_min_prob, 1e-3, "translations with p(t|s) below this are dropped");
DEFINE_int32(clusters, 0, "vocabulary clusters K (0 = no clustering)");
DEFINE_string(cluster_src, "", "unlabelled source text decoded to collect decoder states");
DEFINE_int32(cluster_top, 20, "tokens ranked top-k for a state join its cluster's set");
DEFINE_int32(cluster_sentences, 3000, "source lines decoded for the states (0 = all)");
DEFINE_int32(cluster_states, 100000, "decoder states kept for k-means");
DEFINE_int32(cluster_iterations, 10, "k-means iterations");

namespace tern {

const char kVocabTableFlagsHelp[] =
    "Output-vocabulary tables (tern-translate --shortlist / --clusters):\n"
    "  --shortlist-src F --shortlist-tgt F  a line-aligned parallel corpus (raw text): a\n"
    "      lexical shortlist from IBM Model 1 (--shortlist-frequent 100, --shortlist-best 50,\n"
    "      --shortlist-iterations 5, --shortlist-min-prob 0.001)\n"
    "  --clusters K --cluster-src F  vocabulary clusters: k-means over the decoder states of\n"
    "      F's first --cluster-sentences lines (3000) (--cluster-top 20, --cluster-states\n"
    "      100000, --cluster-iterations 10)\n";

inference::VocabTableOptions VocabTableOptionsFromFlags() {
  inference::VocabTableOptions o;
  o.shortlist_src = FLAGS_shortlist_src;
  o.shortlist_tgt = FLAGS_shortlist_tgt;
  o.shortlist = {.frequent = FLAGS_shortlist_frequent,
                 .best = FLAGS_shortlist_best,
                 .iterations = FLAGS_shortlist_iterations,
                 .min_prob = static_cast<float>(FLAGS_shortlist_min_prob)};
  o.cluster_src = FLAGS_cluster_src;
  o.clusters.clusters = FLAGS_clusters;
  o.clusters.top = FLAGS_cluster_top;
  o.clusters.iterations = FLAGS_cluster_iterations;
  o.clusters.max_states = FLAGS_cluster_states;
  o.cluster_sentences = FLAGS_cluster_sentences;
  return o;
}

}  // namespace tern
