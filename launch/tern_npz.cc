// tern-npz: moves Transformer models between Tern's .tern files and Marian's .npz files (names,
// shapes and options in inference/marian/names.h). Links no MPI.
//
//   tern-npz export --model F.tern --out F.npz [--vocab-out V.spm]
//   tern-npz import --npz F.npz (--vocab V.spm | --marian-vocab M.spm) --out F.tern
#include <cstdio>
#include <map>
#include <string>

#include "common/error.h"
#include "common/file_io.h"
#include "common/logging.h"
#include "data/vocab.h"
#include "inference/format/model_file.h"
#include "inference/marian/model.h"
#include "inference/marian/npz.h"
#include "inference/marian/vocab.h"

namespace tern {
namespace {

constexpr char kUsage[] =
    "usage: tern-npz export --model F.tern --out F.npz [--vocab-out V.spm]\n"
    "       tern-npz import --npz F.npz (--vocab V.spm | --marian-vocab M.spm) --out F.tern\n"
    "Converts Transformer models between Tern (.tern) and Marian (.npz, with special:model.yml).\n"
    "  export   writes the model's parameters under Marian's names and its options as Marian's\n"
    "           model.yml; --vocab-out also writes the embedded SentencePiece vocabulary\n"
    "  import   reads a Marian Transformer .npz. --vocab: the SentencePiece model to embed, with\n"
    "           Tern's special ids (pad 0, unk 1, bos 2, eos 3) and the model's rows in its "
    "order;\n"
    "           --marian-vocab: the model's Marian SentencePiece vocabulary (eos 0, unk 1), which\n"
    "           is rebuilt with Tern's ids, the embedding rows moved to match\n";

// "--flag value" and "--flag=value" pairs after the command; every flag takes a value.
std::map<std::string, std::string> ParseFlags(int argc, char** argv, int first) {
  std::map<std::string, std::string> flags;
  for (int i = first; i < argc; ++i) {
    std::string flag = argv[i], value;
    if (flag.rfind("--", 0) != 0) Fail("unexpected argument '", flag, "' (see --help)");
    if (size_t eq = flag.find('='); eq != std::string::npos) {
      value = flag.substr(eq + 1);
      flag = flag.substr(0, eq);
    } else if (i + 1 < argc) {
      value = argv[++i];
    } else {
      Fail(flag, " needs a value (see --help)");
    }
    flags[flag.substr(2)] = value;
  }
  return flags;
}

std::string Take(std::map<std::string, std::string>& flags, const std::string& name,
                 bool required) {
  auto it = flags.find(name);
  if (it == flags.end()) {
    if (required) Fail("--", name, " is required (see --help)");
    return "";
  }
  std::string value = it->second;
  flags.erase(it);
  return value;
}

void NoMoreFlags(const std::map<std::string, std::string>& flags) {
  if (!flags.empty()) Fail("unknown option '--", flags.begin()->first, "' (see --help)");
}

int Export(std::map<std::string, std::string> flags) {
  const std::string model_path = Take(flags, "model", true);
  const std::string out = Take(flags, "out", true);
  const std::string vocab_out = Take(flags, "vocab-out", false);
  NoMoreFlags(flags);
  std::unique_ptr<inference::ModelFile> file = inference::ModelFile::Open(model_path);
  if (file->arch() != "transformer") {
    Fail(model_path, ": architecture '", file->arch(),
         "' has no Marian .npz form (transformer "
         "only)");
  }
  const std::vector<inference::NpyArray> arrays =
      inference::ToMarianArrays(file->config().model(), file->weights());
  inference::WriteNpz(out, arrays);
  if (!vocab_out.empty()) WriteFileAtomic(vocab_out, file->vocab());
  std::fprintf(stderr, "tern-npz: wrote %zu arrays to %s\n", arrays.size(), out.c_str());
  return 0;
}

int Import(std::map<std::string, std::string> flags) {
  const std::string npz = Take(flags, "npz", true);
  const std::string tern_vocab = Take(flags, "vocab", false);
  const std::string marian_vocab = Take(flags, "marian-vocab", false);
  const std::string out = Take(flags, "out", true);
  NoMoreFlags(flags);
  if (tern_vocab.empty() == marian_vocab.empty()) {
    Fail("give one of --vocab (a Tern vocabulary) or --marian-vocab (see --help)");
  }
  inference::ImportedModel model = inference::FromMarianArrays(inference::ReadNpz(npz), npz);
  std::string vocab_bytes;
  std::string vocab_path = tern_vocab;
  if (!marian_vocab.empty()) {
    const inference::MarianVocabRemap remap =
        inference::TernVocabFromMarian(ReadFile(marian_vocab), marian_vocab);
    inference::RemapToTernIds(remap, npz, &model);
    vocab_bytes = remap.tern_vocab;
    vocab_path = marian_vocab + " (rebuilt with Tern's special ids)";
  } else {
    vocab_bytes = ReadFile(tern_vocab);
  }
  const data::Vocab vocab = data::Vocab::FromSerialized(vocab_bytes, vocab_path);
  if (vocab.size() != model.vocab_size) {
    Fail(vocab_path, ": vocabulary of ", vocab.size(), " pieces, but ", npz, " has ",
         model.vocab_size, " embedding rows; give the vocabulary the model was trained with");
  }
  config::TrainConfig config;
  *config.mutable_model() = model.model;
  config.mutable_data()->set_vocab_size(static_cast<int32_t>(model.vocab_size));
  inference::WriteModelFile(out, config, vocab.serialized(), model.tensors);
  std::fprintf(stderr, "tern-npz: wrote %s (%zu tensors)\n", out.c_str(), model.tensors.size());
  return 0;
}

int Run(int argc, char** argv) {
  const std::string command = argc > 1 ? argv[1] : "";
  if (command == "--help" || command == "-h" || command == "help") {
    std::fputs(kUsage, stdout);
    return 0;
  }
  if (command == "export") return Export(ParseFlags(argc, argv, 2));
  if (command == "import") return Import(ParseFlags(argc, argv, 2));
  Fail(command.empty() ? "no command" : "unknown command '" + command + "'",
       "; use 'tern-npz export' or 'tern-npz import' (see --help)");
}

}  // namespace
}  // namespace tern

int main(int argc, char** argv) {
  tern::InitLogging(argv[0]);
  return tern::RunMain("tern-npz", [&] { return tern::Run(argc, argv); });
}
