// tern-export: turns a tern-train model directory's latest checkpoint into a .tern model file,
// with float32, int16 or int8 weights (inference/export.h). Links no MPI: the checkpoint reader is
// its own library (tern_checkpoint) and the parameter layout comes from models/.
//
//   tern-export --checkpoint work/bible-small --out model-int8.tern --weights int8
#include <cstdio>
#include <string>

#include "common/error.h"
#include "common/logging.h"
#include "configs/config_io.h"
#include "data/vocab.h"
#include "graph/params.h"
#include "inference/export.h"
#include "inference/model_file.h"
#include "models/model.h"
#include "trainer/checkpoint.h"

namespace tern {
namespace {

constexpr char kUsage[] =
    "usage: tern-export --checkpoint DIR --out FILE.tern [--weights float32|int16|int8]\n"
    "Writes DIR's latest checkpoint (a tern-train model directory) as a model file for\n"
    "tern-translate.\n"
    "  --checkpoint DIR   the model directory (the one with checkpoint.latest)\n"
    "  --out FILE         the model file to write (atomically)\n"
    "  --weights TYPE     float32 (default), int16 or int8: the linear layers' weight\n"
    "                     matrices are quantized with a per-tensor scale; embeddings, biases\n"
    "                     and layer norms stay float32\n"
    "  --help             this text\n";

struct Args {
  std::string checkpoint, out, weights = "float32";
  bool help = false;
};

Args ParseArgs(int argc, char** argv) {
  Args args;
  for (int i = 1; i < argc; ++i) {
    std::string flag = argv[i], value;
    bool has_value = false;
    if (size_t eq = flag.find('='); eq != std::string::npos) {
      value = flag.substr(eq + 1);
      flag = flag.substr(0, eq);
      has_value = true;
    }
    auto next = [&]() -> std::string {
      if (has_value) return value;
      if (i + 1 >= argc) Fail(flag, " needs a value (see --help)");
      return argv[++i];
    };
    if (flag == "--checkpoint") {
      args.checkpoint = next();
    } else if (flag == "--out") {
      args.out = next();
    } else if (flag == "--weights") {
      args.weights = next();
    } else if (flag == "--help" || flag == "-h") {
      args.help = true;
    } else {
      Fail("unknown option '", argv[i], "' (see --help)");
    }
  }
  return args;
}

int Run(int argc, char** argv) {
  const Args args = ParseArgs(argc, argv);
  if (args.help) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  if (args.checkpoint.empty()) Fail("--checkpoint DIR is required (see --help)");
  if (args.out.empty()) Fail("--out FILE is required (see --help)");
  const inference::WeightType type = inference::ParseWeightType(args.weights);

  std::optional<trainer::Checkpoint> checkpoint = trainer::LoadLatestCheckpoint(args.checkpoint);
  if (!checkpoint) {
    Fail(args.checkpoint, ": no checkpoint (no checkpoint.latest); train with tern-train first");
  }
  config::TrainConfig config;
  std::string error;
  if (!config::ParseTrainConfig(checkpoint->config_text, args.checkpoint + " (checkpoint config)",
                                &config, &error)) {
    Fail(error);
  }
  const data::Vocab vocab =
      data::Vocab::FromSerialized(checkpoint->vocab_bytes, args.checkpoint + " (vocabulary)");

  // The names, shapes and offsets of the flat parameter buffer, as training laid it out.
  graph::ParamStore layout;
  models::CreateModel(config.model(), vocab.size())->AddParams(&layout);
  const Tensor& params = checkpoint->params;
  if (layout.total_size() != params.numel()) {
    Fail(args.checkpoint, ": the checkpoint holds ", params.numel(), " parameters but its config ",
         "describes ", layout.total_size(), "; was it written by another version of tern-train?");
  }
  std::vector<inference::NamedTensor> tensors;
  for (int i = 0; i < layout.size(); ++i) {
    const graph::ParamInfo& p = layout.info(i);
    tensors.push_back(
        {p.name, params.Slice(p.offset, p.offset + p.shape.numel()).Reshape(p.shape)});
  }
  inference::WriteModelFile(args.out, config, vocab.serialized(),
                            inference::ConvertWeights(tensors, type));
  LOG(INFO) << "tern-export: wrote " << args.out << " (" << args.weights << " weights, update "
            << checkpoint->state.update << ")";
  return 0;
}

}  // namespace
}  // namespace tern

int main(int argc, char** argv) {
  tern::InitLogging(argv[0]);
  return tern::RunMain("tern-export", [&] { return tern::Run(argc, argv); });
}
