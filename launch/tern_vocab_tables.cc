// tern-vocab-tables: adds the output-vocabulary tables of the decoder speed-ups to an exported
// model (.tern): a lexical shortlist (IBM Model 1 over a parallel corpus) and/or vocabulary
// clusters (k-means over the model's own decoder states on unlabelled source text). Writes a new
// model file with every tensor of the input plus the tables (replacing tables already there).
// Works on a model of any weight type (float32, int16, int8). Links no MPI:
//
//   tern-vocab-tables --model m.tern --out m.lex.tern
//       --shortlist-src corpus/bible/train.es --shortlist-tgt corpus/bible/train.en
//       --clusters 64 --cluster-src corpus/bible/train.es      (one command line)
#include <gflags/gflags.h>
#include <glog/logging.h>

#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "common/error.h"
#include "common/logging.h"
#include "tensor/threads.h"
#include "common/timer.h"
#include "inference/clustering.h"
#include "inference/model_file.h"
#include "inference/shortlist.h"
#include "inference/text_codec.h"
#include "inference/transformer.h"

DEFINE_string(model, "", "input model file (.tern)");
DEFINE_string(out, "", "output model file (.tern); may not be --model");
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
DEFINE_int32(threads, 0, "compute threads (0 = all cores)");

namespace tern {
namespace {

std::vector<std::vector<int32_t>> EncodeFile(const inference::TextCodec& codec,
                                             const std::string& path, int max_lines) {
  std::ifstream in(path);
  if (!in) Fail("cannot open ", path);
  std::vector<std::vector<int32_t>> out;
  for (std::string line; std::getline(in, line);) {
    if (max_lines > 0 && static_cast<int>(out.size()) >= max_lines) break;
    out.push_back(codec.Encode(line));
  }
  return out;
}

int Run() {
  if (FLAGS_model.empty() || FLAGS_out.empty()) Fail("--model and --out are required");
  if (FLAGS_model == FLAGS_out) Fail("--out must differ from --model (the input is mapped)");
  const bool shortlist = !FLAGS_shortlist_src.empty() || !FLAGS_shortlist_tgt.empty();
  if (shortlist && (FLAGS_shortlist_src.empty() || FLAGS_shortlist_tgt.empty())) {
    Fail("the shortlist needs both --shortlist-src and --shortlist-tgt");
  }
  if (FLAGS_clusters < 0) Fail("--clusters must be >= 0");
  if (FLAGS_clusters > 0 && FLAGS_cluster_src.empty()) Fail("--clusters needs --cluster-src");
  if (!shortlist && FLAGS_clusters == 0) {
    Fail("nothing to add: give --shortlist-src/--shortlist-tgt and/or --clusters/--cluster-src");
  }
  if (FLAGS_threads > 0) SetComputeThreads(FLAGS_threads);
  std::unique_ptr<inference::ModelFile> file = inference::ModelFile::Open(FLAGS_model);
  std::unique_ptr<inference::TextCodec> codec = inference::MakeVocabCodec(file->vocab());
  inference::Transformer model(file->config().model(), file->weights());

  std::vector<inference::NamedTensor> added;
  if (shortlist) {
    Timer timer;
    auto src = EncodeFile(*codec, FLAGS_shortlist_src, 0);
    auto tgt = EncodeFile(*codec, FLAGS_shortlist_tgt, 0);
    if (src.size() != tgt.size()) {
      Fail(FLAGS_shortlist_src, " has ", src.size(), " lines but ", FLAGS_shortlist_tgt, " has ",
           tgt.size(), "; the shortlist needs a line-aligned parallel corpus");
    }
    inference::Shortlist list =
        inference::BuildShortlist(src, tgt, model.vocab_size(),
                                  {.frequent = FLAGS_shortlist_frequent,
                                   .best = FLAGS_shortlist_best,
                                   .iterations = FLAGS_shortlist_iterations,
                                   .min_prob = static_cast<float>(FLAGS_shortlist_min_prob)});
    for (auto& t : list.ToTensors()) added.push_back(std::move(t));
    LOG(INFO) << "shortlist from " << src.size() << " sentence pairs in " << timer.Seconds()
              << " s";
  }
  if (FLAGS_clusters > 0) {
    Timer timer;
    auto sources = EncodeFile(*codec, FLAGS_cluster_src, FLAGS_cluster_sentences);
    std::erase_if(sources, [](const std::vector<int32_t>& s) { return s.empty(); });
    for (auto& s : sources) s.push_back(inference::kEosId);
    inference::VocabClusters clusters =
        inference::BuildVocabClusters(model, sources,
                                      {.clusters = FLAGS_clusters,
                                       .top = FLAGS_cluster_top,
                                       .iterations = FLAGS_cluster_iterations,
                                       .max_states = FLAGS_cluster_states});
    int64_t total = 0;
    for (int64_t c = 0; c < clusters.clusters(); ++c) total += clusters.set_size(c);
    LOG(INFO) << clusters.clusters() << " vocabulary clusters from " << sources.size()
              << " sentences in " << timer.Seconds() << " s; mean set size "
              << total / clusters.clusters();
    for (auto& t : clusters.ToTensors()) added.push_back(std::move(t));
  }

  std::set<std::string> replaced;
  for (const auto& t : added) replaced.insert(t.name);
  std::vector<inference::NamedTensor> tensors;
  for (const inference::TensorEntry& e : file->table()) {
    if (replaced.count(e.name)) continue;
    // Quantized matrices keep their scale, so tables go onto a model of any weight type.
    tensors.push_back({e.name, file->weights().Get(e.name), file->weights().Scale(e.name)});
  }
  for (auto& t : added) tensors.push_back(std::move(t));
  std::string vocab(file->vocab());
  inference::WriteModelFile(FLAGS_out, file->config(), vocab, tensors);
  LOG(INFO) << "wrote " << FLAGS_out;
  return 0;
}

}  // namespace
}  // namespace tern

int main(int argc, char** argv) {
  gflags::SetUsageMessage("tern-vocab-tables --model IN.tern --out OUT.tern [table options]");
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  tern::InitLogging(argv[0]);
  return tern::RunMain("tern-vocab-tables", tern::Run);
}
