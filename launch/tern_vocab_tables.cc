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

#include <set>
#include <string>
#include <vector>

#include "common/error.h"
#include "common/logging.h"
#include "inference/format/model_file.h"
#include "inference/text_codec.h"
#include "inference/vocab_tables.h"
#include "launch/vocab_table_flags.h"
#include "tensor/threads.h"

DEFINE_string(model, "", "input model file (.tern)");
DEFINE_string(out, "", "output model file (.tern); may not be --model");
DEFINE_int32(threads, 0, "compute threads (0 = the cores, up to 8)");

namespace tern {
namespace {

int Run() {
  if (FLAGS_model.empty() || FLAGS_out.empty()) Fail("--model and --out are required");
  if (FLAGS_model == FLAGS_out) Fail("--out must differ from --model (the input is mapped)");
  const inference::VocabTableOptions options = VocabTableOptionsFromFlags();
  inference::CheckVocabTableOptions(options);
  if (!options.any()) {
    Fail("nothing to add: give --shortlist-src/--shortlist-tgt and/or --clusters/--cluster-src");
  }
  if (FLAGS_threads > 0) SetComputeThreads(FLAGS_threads);
  std::unique_ptr<inference::ModelFile> file = inference::ModelFile::Open(FLAGS_model);
  std::unique_ptr<inference::TextCodec> codec = inference::MakeVocabCodec(file->vocab());
  std::vector<inference::NamedTensor> added =
      inference::BuildVocabTables(file->config().model(), file->weights(), *codec, options);

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
  tern::UseTheCpusBlasKernels(argv);  // first: it may run the program again
  gflags::SetUsageMessage(
      std::string("tern-vocab-tables --model IN.tern --out OUT.tern [table options]\n") +
      tern::kVocabTableFlagsHelp);
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  tern::InitLogging(argv[0]);
  return tern::RunMain("tern-vocab-tables", tern::Run);
}
