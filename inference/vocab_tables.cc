// Building the output-vocabulary tables (see vocab_tables.h).
#include "inference/vocab_tables.h"

#include <glog/logging.h>

#include <algorithm>
#include <fstream>

#include "common/error.h"
#include "common/file_io.h"
#include "common/timer.h"
#include "inference/load_model.h"
#include "inference/search/beam_search.h"
#include "inference/search/output_layer.h"
#include "tensor/arena.h"

namespace tern::inference {
namespace {

// Table sizes past any vocabulary Tern trains (data.vocab_size is at most 2^20).
constexpr int64_t kMaxTableCount = int64_t{1} << 20;

std::vector<std::vector<int32_t>> EncodeFile(const TextCodec& codec, const std::string& path,
                                             int max_lines) {
  RefuseDirectory(path);
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
  // A shortlist without translations holds eos and unk (and the frequent tokens) alone: every
  // translation came out empty.
  auto range = [](const char* flag, int64_t value, int64_t lo, int64_t hi) {
    if (value < lo || value > hi) Fail(flag, " must be between ", lo, " and ", hi, ", not ", value);
  };
  range("--shortlist-frequent", o.shortlist.frequent, 0, kMaxTableCount);
  range("--shortlist-best", o.shortlist.best, 1, kMaxTableCount);
  range("--shortlist-iterations", o.shortlist.iterations, 1, 1000);
  if (!(o.shortlist.min_prob >= 0 && o.shortlist.min_prob < 1)) {
    Fail("--shortlist-min-prob must be a number in [0, 1), not ", o.shortlist.min_prob);
  }
  range("--clusters", o.clusters.clusters, 0, kMaxTableCount);
  range("--cluster-top", o.clusters.top, 1, kMaxTableCount);
  range("--cluster-iterations", o.clusters.iterations, 1, 1000);
  range("--cluster-states", o.clusters.max_states, 1, int64_t{1} << 30);
  range("--cluster-sentences", o.cluster_sentences, 0, int64_t{1} << 30);
  if (o.wants_clusters() && o.cluster_src.empty()) Fail("--clusters needs --cluster-src");
  if (!o.wants_clusters() && !o.cluster_src.empty()) Fail("--cluster-src needs --clusters K");
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

VocabClusters BuildVocabClusters(const DecoderModel& model,
                                 const std::vector<std::vector<int32_t>>& sources,
                                 const ClusterBuildOptions& options) {
  const int64_t d = model.output_embeddings().dim(1), vocab = model.vocab_size();
  std::vector<float> states;
  std::vector<int32_t> tops;  // (states, top)
  int64_t n = 0;
  OutputLayer output(model);
  Arena arena;
  std::vector<ColumnScore> top;
  const int32_t excluded[2] = {kPadId, kBosId};
  BeamSearchOptions search_options{.beam_size = 1, .n_best = 1};
  search_options.observe_states = [&](const Tensor& x) {
    arena.Reset();
    Tensor logits = output.Logits(x, /*with_bias=*/false, arena);
    for (int64_t r = 0; r < x.rows() && n < options.max_states; ++r, ++n) {
      states.insert(states.end(), x.f32() + r * d, x.f32() + (r + 1) * d);
      FusedRowTopK(logits.f32() + r * vocab, output.bias(), vocab, excluded, options.top,
                   /*normalize=*/false, &top);
      for (int i = 0; i < options.top; ++i) {
        tops.push_back(i < static_cast<int>(top.size()) ? top[i].column : kEosId);
      }
    }
  };
  BeamSearch search(model, search_options);
  for (size_t b = 0; b < sources.size() && n < options.max_states; b += options.batch_sentences) {
    const size_t e = std::min(sources.size(), b + options.batch_sentences);
    search.Search(std::vector<std::vector<int32_t>>(sources.begin() + b, sources.begin() + e));
  }
  const int k = static_cast<int>(std::min<int64_t>(options.clusters, n));
  if (k < 1) Fail("vocabulary clustering: no decoder states collected (empty input?)");
  std::vector<int32_t> assignment;
  std::vector<float> centroids =
      KMeans(states, n, d, k, options.iterations, options.seed, &assignment);
  std::vector<std::vector<uint8_t>> member(k, std::vector<uint8_t>(vocab, 0));
  for (int64_t i = 0; i < n; ++i) {
    for (int j = 0; j < options.top; ++j) member[assignment[i]][tops[i * options.top + j]] = 1;
  }
  std::vector<std::vector<int32_t>> sets(k);
  for (int c = 0; c < k; ++c) {
    for (int64_t v = 0; v < vocab; ++v) {
      if (member[c][v]) sets[c].push_back(static_cast<int32_t>(v));
    }
  }
  return VocabClusters(vocab, d, std::move(centroids), sets);
}

}  // namespace tern::inference
