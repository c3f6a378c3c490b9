// tern-export: turns a tern-train model directory's latest checkpoint into a .tern model file,
// with float32, int16 or int8 weights (inference/format/export.h), and optionally the
// output-vocabulary tables of the decoder speed-ups (inference/vocab_tables.h). Links no MPI: the
// checkpoint reader is its own library (tern_checkpoint) and the parameter layout comes from
// models/.
//
//   tern-export --checkpoint work/bible-small --out model-int8.tern --weights int8
//       --shortlist-src corpus/bible/train.es --shortlist-tgt corpus/bible/train.en
#include <gflags/gflags.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "common/error.h"
#include "common/logging.h"
#include "data/vocab.h"
#include "graph/params.h"
#include "inference/format/export.h"
#include "inference/format/model_file.h"
#include "inference/format/weights.h"
#include "inference/rnn/rnn.h"
#include "inference/text_codec.h"
#include "inference/vocab_tables.h"
#include "launch/vocab_table_flags.h"
#include "models/model.h"
#include "tensor/threads.h"
#include "trainer/checkpoint.h"

DEFINE_string(checkpoint, "", "the model directory (the one with checkpoint.latest)");
DEFINE_string(out, "", "the model file to write (atomically)");
DEFINE_string(weights, "float32", "float32, int16 or int8");
DEFINE_int32(threads, 0, "compute threads (0 = the cores, up to 8)");
DEFINE_bool(unsmoothed, false, "the trained parameters instead of their exponential average");

namespace tern {
namespace {

constexpr char kUsage[] =
    "usage: tern-export --checkpoint DIR --out FILE.tern [--weights float32|int16|int8]\n"
    "                   [table options]\n"
    "Writes DIR's latest checkpoint (a tern-train model directory) as a model file for\n"
    "tern-translate.\n"
    "  --checkpoint DIR   the model directory (the one with checkpoint.latest)\n"
    "  --out FILE         the model file to write (atomically)\n"
    "  --weights TYPE     float32 (default), int16 or int8: the linear layers' weight\n"
    "                     matrices are quantized with a scale per column; embeddings, biases\n"
    "                     and layer norms stay float32\n"
    "  --threads N        compute threads for building the clusters (0 = the cores, up to 8)\n"
    "  --unsmoothed       a run with optim.exponential_smoothing: the trained parameters\n"
    "                     instead of their average (the default, as model.tern holds)\n"
    "  --help             this text\n";

int Run() {
  if (FLAGS_checkpoint.empty()) Fail("--checkpoint DIR is required (see --help)");
  if (FLAGS_out.empty()) Fail("--out FILE is required (see --help)");
  const inference::WeightType type = inference::ParseWeightType(FLAGS_weights);
  const inference::VocabTableOptions tables = VocabTableOptionsFromFlags();
  inference::CheckVocabTableOptions(tables);
  CheckComputeThreads("--threads", FLAGS_threads);
  if (FLAGS_threads > 0) SetComputeThreads(FLAGS_threads);

  std::optional<trainer::Checkpoint> checkpoint = trainer::LoadLatestCheckpoint(FLAGS_checkpoint);
  if (!checkpoint) {
    Fail(FLAGS_checkpoint, ": no checkpoint (no checkpoint.latest); train with tern-train first");
  }
  const config::TrainConfig& config = checkpoint->config;
  const data::Vocab vocab =
      data::Vocab::FromSerialized(checkpoint->vocab_bytes, FLAGS_checkpoint + " (vocabulary)");

  // The names, shapes and offsets of the flat parameter buffer, as training laid it out.
  graph::ParamStore layout;
  models::CreateModel(config.model(), vocab.size())->AddParams(&layout);
  const bool smoothed = checkpoint->smoothed.defined() && !FLAGS_unsmoothed;
  const Tensor& params = smoothed ? checkpoint->smoothed : checkpoint->params;
  if (layout.total_size() != params.numel()) {
    Fail(FLAGS_checkpoint, ": the checkpoint holds ", params.numel(), " parameters but its config ",
         "describes ", layout.total_size(), "; was it written by another version of tern-train?");
  }
  std::vector<inference::NamedTensor> tensors;
  for (int i = 0; i < layout.size(); ++i) {
    const graph::ParamInfo& p = layout.info(i);
    tensors.push_back(
        {p.name, params.Slice(p.offset, p.offset + p.shape.numel()).Reshape(p.shape)});
  }
  // Devlin's clipped matrices are quantized as the network used them, clipped.
  std::vector<inference::NamedTensor> out = inference::ConvertWeights(
      type == inference::WeightType::kFloat32 ? tensors
                                              : inference::ClipForExport(config.model(), tensors),
      type);
  if (tables.any()) {
    // Built on the float32 parameters (the clusters from the float model's decoder states),
    // whatever the weight type written.
    inference::Weights weights(FLAGS_checkpoint + " (checkpoint)");
    for (const inference::NamedTensor& t : tensors) weights.Add(t.name, t.tensor);
    const std::unique_ptr<inference::TextCodec> codec =
        inference::MakeVocabCodec(vocab.serialized());
    for (auto& t : inference::BuildVocabTables(config.model(), weights, *codec, tables)) {
      out.push_back(std::move(t));
    }
  }
  inference::WriteModelFile(FLAGS_out, config, vocab.serialized(), out);
  LOG(INFO) << "tern-export: wrote " << FLAGS_out << " (" << FLAGS_weights << " weights, update "
            << checkpoint->state.update << (smoothed ? ", exponential average" : "") << ")";
  return 0;
}

}  // namespace
}  // namespace tern

int main(int argc, char** argv) {
  tern::UseTheCpusBlasKernels(argv);  // first: it may run the program again
  // Our own help text: gflags' --help would list every linked library's flags.
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--help" || arg == "-h" || arg == "-help") {
      std::printf("%s%s", tern::kUsage, tern::kVocabTableFlagsHelp);
      return 0;
    }
  }
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  tern::InitLogging(argv[0]);
  if (argc > 1) {
    std::fprintf(stderr, "tern-export: unexpected argument '%s' (see --help)\n", argv[1]);
    return 1;
  }
  return tern::RunMain("tern-export", tern::Run);
}
