// Writes the binary seed corpora of the model-file and npz fuzzers: small valid files of every
// architecture and weight type, so mutations start from what the readers accept. Run it after a
// format change and check in what it writes:
//   build/bin/fuzz_make_seeds tests/fuzz/seeds
#include <cstdio>
#include <string>
#include <vector>

#include "common/file_io.h"
#include "configs/config_io.h"
#include "graph/params.h"
#include "inference/format/export.h"
#include "inference/format/model_file.h"
#include "inference/marian/model.h"
#include "inference/marian/npz.h"
#include "models/model.h"
#include "tests/inference/tiny_model.h"

namespace tern {
namespace {

// A placeholder, not a SentencePiece model: the harness never reads the vocabulary, and a real
// one would make each seed kilobytes larger.
constexpr char kVocab[] = "vocab";

std::vector<inference::NamedTensor> Tensors(const graph::ParamStore& params) {
  std::vector<inference::NamedTensor> out;
  for (int i = 0; i < params.size(); ++i) out.push_back({params.info(i).name, params.value(i)});
  return out;
}

config::TrainConfig Rnn(const char* arch, bool deep) {
  config::TrainConfig c;
  config::ModelConfig& m = *c.mutable_model();
  m.set_arch(arch);
  m.set_emb_dim(6);
  m.set_rnn_dim(5);
  m.set_ffn_dim(7);
  m.set_fc_depth(2);
  m.set_enc_depth(deep ? 2 : 1);
  m.set_dec_depth(deep ? 2 : 1);
  m.set_dec_cell_base_depth(2);
  m.set_tied_embeddings(!deep);
  m.set_layer_normalization(deep);
  m.set_skip(deep);
  config::FillDefaults(&c);
  return c;
}

void Write(const std::string& path, const std::string& bytes) {
  WriteFileAtomic(path, bytes);
  std::printf("%s: %zu bytes\n", path.c_str(), bytes.size());
}

// A Transformer of a few kilobytes.
inference::testing::TinyModelSpec Small() {
  inference::testing::TinyModelSpec spec;
  spec.vocab = 12;
  spec.dim = 8;
  spec.heads = 2;
  spec.ffn = 8;
  spec.enc_depth = spec.dec_depth = 1;
  return spec;
}

void ModelFiles(const std::string& dir) {
  const inference::testing::TinyModelSpec small = Small();
  for (const auto& [name, spec] :
       std::vector<std::pair<std::string, inference::testing::TinyModelSpec>>{
           {"transformer", small},
           {"transformer_untied_prenorm",
            [&] {
              auto s = small;
              s.tied = false;
              s.pre_norm = true;
              return s;
            }()},
           {"aan", [&] {
              auto s = small;
              s.aan = true;
              return s;
            }()}}) {
    const inference::testing::TinyModel m = inference::testing::MakeTinyModel(spec);
    Write(dir + "/" + name + ".tern", inference::SerializeModelFile(m.config, kVocab, m.tensors));
    if (name == "transformer") {
      Write(dir + "/transformer_int8.tern",
            inference::SerializeModelFile(
                m.config, kVocab,
                inference::ConvertWeights(m.tensors, inference::WeightType::kInt8)));
    }
  }
  for (const auto& [name, config] :
       {std::pair{"s2s", Rnn("s2s", false)}, std::pair{"devlin_deep", Rnn("devlin", true)}}) {
    graph::ParamStore params;
    models::CreateModel(config.model(), 12)->AddParams(&params);
    params.Finalize(Device::kCpu, 3);
    Write(dir + "/" + name + ".tern",
          inference::SerializeModelFile(config, kVocab, Tensors(params)));
  }
}

void NpzFiles(const std::string& dir) {
  inference::testing::TinyModelSpec spec = Small();
  for (bool pre_norm : {false, true}) {
    spec.pre_norm = pre_norm;
    const inference::testing::TinyModel m = inference::testing::MakeTinyModel(spec);
    Write(dir + (pre_norm ? "/prenorm.npz" : "/postnorm.npz"),
          inference::SerializeNpz(inference::ToMarianArrays(m.config.model(), m.weights)));
    if (!pre_norm) {
      const auto arrays = inference::ToMarianArrays(m.config.model(), m.weights);
      Write(dir + "/model_yml.txt", "Y" + arrays.back().data);
    }
  }
}

}  // namespace
}  // namespace tern

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: fuzz_make_seeds tests/fuzz/seeds\n");
    return 1;
  }
  const std::string seeds = argv[1];
  tern::MakeDirs(seeds + "/model_file");
  tern::MakeDirs(seeds + "/npz");
  tern::ModelFiles(seeds + "/model_file");
  tern::NpzFiles(seeds + "/npz");
  return 0;
}
