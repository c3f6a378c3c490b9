// make-golden: the tools that make tests/golden/'s model files and their expected translations
// (regenerate.sh runs them; README.md says when that is allowed). Three commands:
//
//   make-golden vocab --src F --tgt F --size N --out VOCAB.spm
//       a SentencePiece vocabulary of about N pieces with the identity normalization (no
//       character map in the model: a few KB instead of ~240 KB), for tern-train's data.vocab
//   make-golden v1 --from MODEL_v2_float32.tern --weights float32|int16 --out MODEL_v1_TYPE.tern
//       the same model in format version 1, written here byte by byte from the format's
//       description (the library writes only the newest version): int16 with one scale per
//       matrix, as version 1 stores it
//   make-golden expect --candidates LINES --lines N --out-source SOURCE MODEL.tern...
//       translates the candidate lines with every model, keeps the first N whose translation
//       wins by a comfortable margin in every model (below) and does not loop (a word three
//       times in a row), writes them to SOURCE and each model's translations to MODEL.expected
//
// The margin: a later build whose kernels only round differently must give the same bytes, so
// each kept line's best hypothesis must (1) beat the runner-up of its 4-best list by at least
// kMinScoreGap in normalized score, and (2) stay the same when every float32 tensor of the model is
// multiplied by (1 + e), e uniform in [-kPerturbation, kPerturbation], for kPerturbationSeeds
// seeds: (2) covers the beam's pruning along the way, which (1) cannot see.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "common/checksum.h"
#include "common/error.h"
#include "common/file_io.h"
#include "common/logging.h"
#include "configs/config_io.h"
#include "data/vocab.h"
#include "inference/format/export.h"
#include "inference/format/model_file.h"
#include "inference/format/weights.h"
#include "inference/text_codec.h"
#include "inference/translator.h"
#include "tensor/cpu/int_gemm.h"
#include "tests/golden/golden.h"

namespace tern::golden {
namespace {

constexpr float kMinScoreGap = 0.01f;
constexpr float kPerturbation = 1e-4f;
constexpr int kPerturbationSeeds = 3;

// --name value pairs and the remaining positional arguments.
struct Args {
  std::map<std::string, std::string> flags;
  std::vector<std::string> positional;

  const std::string& Get(const std::string& name) const {
    auto it = flags.find(name);
    if (it == flags.end()) Fail("--", name, " is required (see the top of make_golden.cc)");
    return it->second;
  }
};

Args ParseArgs(int argc, char** argv, int first) {
  Args args;
  for (int i = first; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg.rfind("--", 0) == 0) {
      if (i + 1 >= argc) Fail(arg, " needs a value");
      args.flags[arg.substr(2)] = argv[++i];
    } else {
      args.positional.push_back(arg);
    }
  }
  return args;
}

std::vector<std::string> ReadLines(const std::string& path) {
  std::ifstream in(path);
  if (!in) Fail(path, ": cannot read");
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

int MakeVocab(const Args& args) {
  std::vector<std::string> sentences = ReadLines(args.Get("src"));
  for (std::string& line : ReadLines(args.Get("tgt"))) sentences.push_back(std::move(line));
  data::VocabTrainOptions options;
  options.vocab_size = std::stoi(args.Get("size"));
  options.normalization_rule = "identity";
  options.num_threads = 1;
  const data::Vocab vocab = data::Vocab::TrainFromSentences(sentences, options);
  WriteFileAtomic(args.Get("out"), vocab.serialized());
  std::printf("make-golden: %s: %d pieces, %zu bytes\n", args.Get("out").c_str(), vocab.size(),
              vocab.serialized().size());
  return 0;
}

// --- format version 1 ---

template <typename T>
void Put(std::string* out, T value) {
  out->append(reinterpret_cast<const char*>(&value), sizeof(T));
}

void PadTo64(std::string* out) { out->resize((out->size() + 63) / 64 * 64, '\0'); }

struct V1Tensor {
  std::string name;
  uint8_t dtype;  // 0 float32, 1 int16
  Shape shape;
  float scale;
  std::string bytes;
};

// The file as version 1 lays it out: the header, the tensor table, each tensor's data at the next
// multiple of 64, the CRC-32 of everything before it.
std::string SerializeV1(const std::string& arch, uint32_t revision, const std::string& config,
                        std::string_view vocab, const std::vector<V1Tensor>& tensors) {
  std::string header;
  header += "TERNMODL";
  Put<uint32_t>(&header, 1);  // format version
  Put<uint32_t>(&header, 0);  // reserved
  Put<uint64_t>(&header, 0);  // file size, filled in at the end
  Put<uint32_t>(&header, static_cast<uint32_t>(arch.size()));
  header += arch;
  Put<uint32_t>(&header, revision);
  Put<uint64_t>(&header, config.size());
  header += config;
  Put<uint64_t>(&header, vocab.size());
  header += vocab;
  Put<uint32_t>(&header, static_cast<uint32_t>(tensors.size()));
  size_t table_bytes = 0;
  for (const V1Tensor& t : tensors) table_bytes += 4 + t.name.size() + 4 + 8 * t.shape.rank() + 20;
  uint64_t offset = (header.size() + table_bytes + 63) / 64 * 64;
  std::string out = header;
  for (const V1Tensor& t : tensors) {
    Put<uint32_t>(&out, static_cast<uint32_t>(t.name.size()));
    out += t.name;
    Put<uint8_t>(&out, t.dtype);
    Put<uint8_t>(&out, static_cast<uint8_t>(t.shape.rank()));
    Put<uint16_t>(&out, 0);
    for (int d = 0; d < t.shape.rank(); ++d) Put<int64_t>(&out, t.shape[d]);
    Put<float>(&out, t.scale);
    Put<uint64_t>(&out, offset);
    Put<uint64_t>(&out, t.bytes.size());
    offset = (offset + t.bytes.size() + 63) / 64 * 64;
  }
  for (const V1Tensor& t : tensors) {
    PadTo64(&out);
    out += t.bytes;
  }
  const uint64_t file_size = out.size() + 4;
  std::memcpy(out.data() + 16, &file_size, 8);
  Put<uint32_t>(&out, Crc32(out.data(), out.size()));
  return out;
}

int MakeV1(const Args& args) {
  const std::unique_ptr<inference::ModelFile> from = inference::ModelFile::Open(args.Get("from"));
  const std::string& weights = args.Get("weights");
  if (weights != "float32" && weights != "int16") Fail("--weights must be float32 or int16");
  // Devlin's clipped matrices would need inference::ClipForExport before quantizing.
  if (from->arch() == "devlin") Fail("v1: devlin models are not supported here");
  std::vector<V1Tensor> tensors;
  for (const inference::TensorEntry& e : from->table()) {
    const Tensor& t = from->weights().Get(e.name);
    if (e.dtype != inference::FileDType::kFloat32) {
      Fail(args.Get("from"), ": tensor '", e.name, "' is not float32; pass a float32 model");
    }
    const bool quantize =
        weights == "int16" && inference::IsLinearWeightName(e.name) && t.rank() == 2;
    if (!quantize) {
      tensors.push_back(
          {e.name, 0, t.shape(), 1.f, std::string(static_cast<const char*>(t.raw()), t.bytes())});
      continue;
    }
    std::string q(t.numel() * 2, '\0');
    const float scale =
        cpu::QuantizeWeightMatrix(cpu::IntType::kInt16, t.f32(), t.dim(0), t.numel(), q.data());
    tensors.push_back({e.name, 1, t.shape(), scale, std::move(q)});
  }
  WriteFileAtomic(args.Get("out"),
                  SerializeV1(from->arch(), from->arch_revision(), config::ToText(from->config()),
                              from->vocab(), tensors));
  std::printf("make-golden: wrote %s (format 1, %s)\n", args.Get("out").c_str(), weights.c_str());
  return 0;
}

// --- expected translations ---

// The model's weights with every float32 tensor multiplied by (1 + e), e uniform in
// [-kPerturbation, kPerturbation]; the others (integer matrices, id tables) as they are.
inference::Weights Perturbed(const inference::Weights& weights, uint32_t seed,
                             std::vector<Tensor>* storage) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> e(-kPerturbation, kPerturbation);
  inference::Weights out("perturbed");
  for (const std::string& name : weights.Names()) {
    const Tensor& t = weights.Get(name);
    if (t.dtype() != DType::kFloat32) {
      out.Add(name, t, weights.Scale(name));
      continue;
    }
    Tensor copy = Tensor::Empty(t.shape());
    for (int64_t i = 0; i < t.numel(); ++i) copy.f32()[i] = t.f32()[i] * (1.f + e(rng));
    storage->push_back(copy);
    out.Add(name, copy);
  }
  return out;
}

struct Checked {
  std::vector<inference::Translation> best;  // per candidate line
  std::vector<float> gap;                    // best minus runner-up, normalized score
  std::vector<bool> robust;                  // unchanged under every perturbation
};

Checked CheckModel(const std::string& path, const std::vector<std::string>& lines) {
  Checked c;
  const std::unique_ptr<inference::ModelFile> file = inference::ModelFile::Open(path);
  inference::TranslatorOptions options = GoldenTranslatorOptions();
  for (const auto& t : inference::Translator::FromModelFile(path, options)->Translate(lines)) {
    c.best.push_back(t.at(0));
  }
  options.search.n_best = options.search.beam_size;
  const auto nbest = inference::Translator::FromModelFile(path, options)->Translate(lines);
  for (size_t i = 0; i < lines.size(); ++i) {
    CHECK_EQ(nbest[i][0].text, c.best[i].text) << path << " line " << i;
    c.gap.push_back(nbest[i].size() < 2
                        ? INFINITY
                        : nbest[i][0].normalized_score - nbest[i][1].normalized_score);
  }
  c.robust.assign(lines.size(), true);
  for (int seed = 1; seed <= kPerturbationSeeds; ++seed) {
    std::vector<Tensor> storage;
    const inference::Weights weights = Perturbed(file->weights(), seed, &storage);
    inference::Translator perturbed(file->config().model(), weights,
                                    inference::MakeVocabCodec(file->vocab()),
                                    GoldenTranslatorOptions());
    const auto out = perturbed.Translate(lines);
    for (size_t i = 0; i < lines.size(); ++i) {
      if (out[i][0].text != c.best[i].text) c.robust[i] = false;
    }
  }
  return c;
}

// A word three times in a row: the tiny models' way of running into the length limit, which
// says little about the model and makes a poor golden line.
bool Loops(const std::string& text) {
  std::istringstream words(text);
  std::string a, b, c;
  while (words >> c) {
    if (c == a && c == b) return true;
    a = b;
    b = c;
  }
  return false;
}

int MakeExpected(const Args& args) {
  const std::vector<std::string> candidates = ReadLines(args.Get("candidates"));
  const size_t wanted = std::stoul(args.Get("lines"));
  if (args.positional.empty()) Fail("expect: name the model files");
  std::vector<Checked> checked;
  for (const std::string& model : args.positional) checked.push_back(CheckModel(model, candidates));

  std::vector<std::string> source;
  std::vector<size_t> kept;
  for (size_t i = 0; i < candidates.size() && source.size() < wanted; ++i) {
    bool ok = !candidates[i].empty();
    for (size_t m = 0; m < checked.size() && ok; ++m) {
      const inference::Translation& t = checked[m].best[i];
      ok = !t.text.empty() && !Loops(t.text) && checked[m].gap[i] >= kMinScoreGap &&
           checked[m].robust[i];
    }
    if (!ok) continue;
    source.push_back(candidates[i]);
    kept.push_back(i);
  }
  if (source.size() < wanted) {
    Fail("only ", source.size(), " of ", candidates.size(),
         " candidate lines win by the margin in ", "every model; ", wanted,
         " wanted: give more candidates");
  }
  std::string source_text;
  for (const std::string& line : source) source_text += line + "\n";
  WriteFileAtomic(args.Get("out-source"), source_text);

  // What the test does: the kept lines as one call. They must translate as they did among the
  // candidates (the batches differ).
  for (size_t m = 0; m < args.positional.size(); ++m) {
    const std::string& model = args.positional[m];
    const auto out =
        inference::Translator::FromModelFile(model, GoldenTranslatorOptions())->Translate(source);
    std::vector<ExpectedLine> expected;
    for (size_t j = 0; j < source.size(); ++j) {
      const size_t i = kept[j];
      if (out[j][0].text != checked[m].best[i].text) {
        Fail(model, ": line '", source[j], "' translates differently in another batch");
      }
      expected.push_back(
          {out[j][0].text, out[j][0].score, out[j][0].normalized_score, checked[m].gap[i]});
    }
    const std::string path = ExpectedPath(model);
    WriteFileAtomic(path, FormatExpected(expected));
    float min_gap = INFINITY;
    for (const ExpectedLine& e : expected) min_gap = std::min(min_gap, e.gap);
    std::printf("make-golden: wrote %s (%zu lines, smallest gap %.4f)\n", path.c_str(),
                expected.size(), min_gap);
  }
  return 0;
}

int Main(int argc, char** argv) {
  if (argc < 2) Fail("usage: make-golden vocab|v1|expect ... (see make_golden.cc)");
  const std::string command = argv[1];
  const Args args = ParseArgs(argc, argv, 2);
  if (command == "vocab") return MakeVocab(args);
  if (command == "v1") return MakeV1(args);
  if (command == "expect") return MakeExpected(args);
  Fail("unknown command '", command, "' (vocab, v1 or expect)");
}

}  // namespace
}  // namespace tern::golden

int main(int argc, char** argv) {
  tern::InitLogging(argv[0]);
  return tern::RunMain("make-golden", [&] { return tern::golden::Main(argc, argv); });
}
