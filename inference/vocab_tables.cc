// Building the output-vocabulary tables (see vocab_tables.h).
#include "inference/vocab_tables.h"

#include <glog/logging.h>

#include <fstream>

#include "common/error.h"
#include "common/timer.h"
#include "inference/transformer.h"

namespace tern::inference {
namespace {

std::vector<std::vector<int32_t>> EncodeFile(const TextCodec& codec, const std::string& path,
                                             int max_lines) {
  std::ifstream in(path);
  if (!in) Fail("cannot open ", path);
  std::vector<std::vector<int32_t>> out;
  for (std::string line; std::getline(in, line);) {
    if (max_lines > 0 && static_cast<int>(out.size()) >= max_lines) break;
    out.push_back(codec.Encode(line));
  }
  if (in.bad()) Fail("reading ", path, " failed");
  return out;
}

}  // namespace

void CheckVocabTableOptions(const VocabTableOptions& o) {
  if (o.wants_shortlist() && (o.shortlist_src.empty() || o.shortlist_tgt.empty())) {
    Fail("the shortlist needs both --shortlist-src and --shortlist-tgt");
  }
  if (o.shortlist.frequent < 0 || o.shortlist.best < 0 || o.shortlist.iterations < 1) {
    Fail("--shortlist-frequent and --shortlist-best must be >= 0, --shortlist-iterations >= 1");
  }
  if (o.clusters.clusters < 0) Fail("--clusters must be >= 0");
  if (o.wants_clusters() && o.cluster_src.empty()) Fail("--clusters needs --cluster-src");
  if (!o.wants_clusters() && !o.cluster_src.empty()) Fail("--cluster-src needs --clusters K");
  if (o.clusters.top < 1 || o.clusters.iterations < 1 || o.clusters.max_states < 1 ||
      o.cluster_sentences < 0) {
    Fail("--cluster-top, --cluster-iterations and --cluster-states must be >= 1, ",
         "--cluster-sentences >= 0");
  }
}

std::vector<NamedTensor> BuildVocabTables(const config::ModelConfig& config, const Weights& weights,
                                          const TextCodec& codec,
                                          const VocabTableOptions& options) {
  CheckVocabTableOptions(options);
  const std::unique_ptr<DecoderModel> loaded = LoadDecoderModel(config, weights);
  const DecoderModel& model = *loaded;
  std::vector<NamedTensor> tables;
  if (options.wants_shortlist()) {
    Timer timer;
    const auto src = EncodeFile(codec, options.shortlist_src, 0);
    const auto tgt = EncodeFile(codec, options.shortlist_tgt, 0);
    if (src.size() != tgt.size()) {
      Fail(options.shortlist_src, " has ", src.size(), " lines but ", options.shortlist_tgt,
           " has ", tgt.size(), "; the shortlist needs a line-aligned parallel corpus");
    }
    const Shortlist list = BuildShortlist(src, tgt, model.vocab_size(), options.shortlist);
    for (auto& t : list.ToTensors()) tables.push_back(std::move(t));
    LOG(INFO) << "shortlist from " << src.size() << " sentence pairs in " << timer.Seconds()
              << " s";
  }
  if (options.wants_clusters()) {
    Timer timer;
    auto sources = EncodeFile(codec, options.cluster_src, options.cluster_sentences);
    std::erase_if(sources, [](const std::vector<int32_t>& s) { return s.empty(); });
    if (sources.empty()) Fail(options.cluster_src, ": no non-empty lines to cluster states of");
    for (auto& s : sources) s.push_back(kEosId);
    const VocabClusters clusters = BuildVocabClusters(model, sources, options.clusters);
    int64_t total = 0;
    for (int64_t c = 0; c < clusters.clusters(); ++c) total += clusters.set_size(c);
    LOG(INFO) << clusters.clusters() << " vocabulary clusters from " << sources.size()
              << " sentences in " << timer.Seconds() << " s; mean set size "
              << total / clusters.clusters();
    for (auto& t : clusters.ToTensors()) tables.push_back(std::move(t));
  }
  return tables;
}

}  // namespace tern::inference
