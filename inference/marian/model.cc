#include "inference/marian/model.h"

#include <cstdlib>
#include <cstring>
#include <map>

#include "common/error.h"
#include "inference/marian/names.h"

namespace tern::inference {
namespace {

// "float64 ('<f8')" for messages.
std::string DescrName(const std::string& descr) {
  const char kind = descr.size() > 1 ? descr[1] : '?';
  const std::string bits = descr.size() > 2 ? std::to_string(8 * std::atoi(descr.c_str() + 2)) : "";
  const char* base = kind == 'f' ? "float" : kind == 'i' ? "int" : kind == 'u' ? "uint" : "";
  return (*base ? base + bits + " " : std::string()) + "('" + descr + "')";
}

std::string YamlText(const NpyArray& a, const std::string& source) {
  if (a.item_size() != 1 || a.shape.size() > 1 || a.descr[1] == 'f') {
    Fail(source, ": '", kMarianConfigEntry, "' is ", DescrName(a.descr), " of shape ",
         ShapeString(a.shape), "; Marian stores it as a 1-D array of bytes");
  }
  std::string text = a.data;
  while (!text.empty() && text.back() == '\0') text.pop_back();
  return text;
}

}  // namespace

std::vector<NpyArray> ToMarianArrays(const config::ModelConfig& config, const Weights& weights) {
  const int64_t vocab = weights.Get("decoder_ff_logit_out_b").dim(0);
  std::vector<NpyArray> arrays;
  for (const MarianParameter& p : MarianParameters(config, vocab)) {
    const Tensor& t = weights.Get(p.tern_name, p.shape);
    CHECK(t.dtype() == DType::kFloat32 && t.device() == Device::kCpu) << p.tern_name;
    arrays.push_back(NpyArray::Float32(p.marian_name, p.marian_shape, t.f32()));
  }
  const std::string yaml = MarianModelYaml(config, vocab);
  NpyArray meta{kMarianConfigEntry, "|i1", {static_cast<int64_t>(yaml.size()) + 1}, yaml};
  meta.data.push_back('\0');  // Marian reads it as a C string
  arrays.push_back(std::move(meta));
  return arrays;
}

ImportedModel FromMarianArrays(const std::vector<NpyArray>& arrays, const std::string& source) {
  std::map<std::string, const NpyArray*> by_name;
  for (const NpyArray& a : arrays) by_name[a.name] = &a;
  auto meta = by_name.find(kMarianConfigEntry);
  if (meta == by_name.end()) {
    Fail(source, ": no '", kMarianConfigEntry, "' array, so the model's options are unknown; ",
         "export it with Marian (or tern-npz), which stores them");
  }
  ImportedModel model;
  model.model =
      ModelConfigFromMarianYaml(YamlText(*meta->second, source), source, &model.vocab_size);
  if (model.vocab_size == 0) {
    auto bias = by_name.find("decoder_ff_logit_out_b");
    if (bias == by_name.end()) {
      Fail(source,
           ": parameter 'decoder_ff_logit_out_b' is missing (and model.yml has no "
           "dim-vocabs)");
    }
    model.vocab_size = bias->second->numel();
  }
  by_name.erase(meta);
  for (const MarianParameter& p : MarianParameters(model.model, model.vocab_size)) {
    auto it = by_name.find(p.marian_name);
    if (it == by_name.end()) {
      Fail(source, ": parameter '", p.marian_name, "' is missing; the model.yml (",
           model.model.pre_norm() ? "pre-norm" : "post-norm",
           model.model.tied_embeddings() ? ", tied-embeddings-all" : "", ") needs it");
    }
    const NpyArray& a = *it->second;
    if (a.descr != "<f4") {
      Fail(source, ": parameter '", a.name, "' is ", DescrName(a.descr),
           "; Tern imports float32 parameters only");
    }
    if (a.shape != p.marian_shape && a.shape != p.shape.dims()) {
      Fail(source, ": parameter '", a.name, "' has shape ", ShapeString(a.shape), ", expected ",
           ShapeString(p.marian_shape), " for the options in model.yml");
    }
    Tensor t = Tensor::Empty(p.shape);
    std::memcpy(t.raw(), a.data.data(), t.bytes());
    model.tensors.push_back({p.tern_name, t});
    by_name.erase(it);
  }
  if (!by_name.empty()) {
    Fail(source, ": array '", by_name.begin()->first, "' (", by_name.size(),
         " in all) has no place in Tern's Transformer for the options in model.yml");
  }
  return model;
}

}  // namespace tern::inference
