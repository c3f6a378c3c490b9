#include "inference/marian/model.h"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <utility>

#include "common/error.h"
#include "configs/config_io.h"
#include "configs/model_size.h"
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

// Marian's model.yml is a few kilobytes.
constexpr int64_t kMaxYamlBytes = 1 << 20;

std::string YamlText(std::string text) {
  while (!text.empty() && text.back() == '\0') text.pop_back();
  return text;
}

}  // namespace

std::vector<NpyArray> ToMarianArrays(const config::ModelConfig& config, const Weights& weights) {
  const int64_t vocab = weights.Get("decoder_ff_logit_out_b").dim(0);
  // Marian computes its positions and layer norms one way only.
  if (config.positions() == "vaswani") {
    Fail(weights.source(), ": model.positions vaswani has no Marian form (Marian's sinusoids use ",
         "the timescales of model.positions marian)");
  }
  if (config.has_layer_norm_eps() && config.layer_norm_eps() != config::kDefaultLayerNormEps) {
    Fail(weights.source(), ": model.layer_norm_eps ", config.layer_norm_eps(),
         " has no Marian form (Marian's layer norms use 1e-6)");
  }
  std::vector<NpyArray> arrays;
  for (const MarianParameter& p : MarianParameters(config, vocab)) {
    const Tensor& t = weights.GetMatrix(p.tern_name, p.shape);
    if (t.dtype() != DType::kFloat32) {
      Fail(weights.source(), ": parameter '", p.tern_name, "' is ", DTypeName(t.dtype()),
           "; a Marian .npz holds float32 parameters: convert the float32 model (the training's ",
           "model.tern, or tern-export --weights float32)");
    }
    CHECK(t.device() == Device::kCpu) << p.tern_name;
    arrays.push_back(NpyArray::Float32(p.marian_name, p.marian_shape, t.f32()));
  }
  const std::string yaml = MarianModelYaml(config, vocab);
  NpyArray meta{kMarianConfigEntry, "|i1", {static_cast<int64_t>(yaml.size()) + 1}, yaml};
  meta.data.push_back('\0');  // Marian reads it as a C string
  arrays.push_back(std::move(meta));
  return arrays;
}

namespace {

// The import, on arrays known first by their headers; read(i) gives array i's data. Every name,
// type and shape is checked before read is called for any parameter, so a small archive claiming
// huge arrays is refused before it is inflated.
ImportedModel Import(const std::vector<NpzMember>& arrays,
                     const std::function<std::string(size_t)>& read, const std::string& source) {
  std::map<std::string, size_t> by_name;
  for (size_t i = 0; i < arrays.size(); ++i) by_name[arrays[i].name] = i;
  auto meta = by_name.find(kMarianConfigEntry);
  if (meta == by_name.end()) {
    Fail(source, ": no '", kMarianConfigEntry, "' array, so the model's options are unknown; ",
         "export it with Marian (or tern-npz), which stores them");
  }
  const NpzMember& yaml = arrays[meta->second];
  const NpyArray typed{"", yaml.descr, yaml.shape, {}};
  if (typed.item_size() != 1 || yaml.shape.size() > 1 || yaml.descr[1] == 'f' ||
      typed.numel() > kMaxYamlBytes) {
    Fail(source, ": '", kMarianConfigEntry, "' is ", DescrName(yaml.descr), " of shape ",
         ShapeString(yaml.shape), "; Marian stores it as a 1-D array of bytes (at most ",
         kMaxYamlBytes, ")");
  }
  ImportedModel model;
  model.model = ModelConfigFromMarianYaml(YamlText(read(meta->second)), source, &model.vocab_size);
  if (model.vocab_size == 0) {
    auto bias = by_name.find("decoder_ff_logit_out_b");
    if (bias == by_name.end()) {
      Fail(source,
           ": parameter 'decoder_ff_logit_out_b' is missing (and model.yml has no "
           "dim-vocabs)");
    }
    model.vocab_size = NpyArray{"", "<f4", arrays[bias->second].shape, {}}.numel();
  }
  // The sizes a Tern model may have, before the shapes they imply are trusted.
  std::string error;
  config::TrainConfig sized;
  *sized.mutable_model() = model.model;
  config::FillDefaults(&sized);
  if (!config::ValidateModel(sized.model(), &error) ||
      !config::CheckModelSize(sized, model.vocab_size, 0, &error)) {
    Fail(source, ": model.yml: ", error);
  }
  by_name.erase(meta);
  std::vector<std::pair<MarianParameter, size_t>> wanted;
  for (const MarianParameter& p : MarianParameters(model.model, model.vocab_size)) {
    auto it = by_name.find(p.marian_name);
    if (it == by_name.end()) {
      Fail(source, ": parameter '", p.marian_name, "' is missing; the model.yml (",
           model.model.pre_norm() ? "pre-norm" : "post-norm",
           model.model.tied_embeddings() ? ", tied-embeddings-all" : "", ") needs it");
    }
    const NpzMember& a = arrays[it->second];
    if (a.descr != "<f4") {
      Fail(source, ": parameter '", a.name, "' is ", DescrName(a.descr),
           "; Tern imports float32 parameters only");
    }
    if (a.shape != p.marian_shape && a.shape != p.shape.dims()) {
      Fail(source, ": parameter '", a.name, "' has shape ", ShapeString(a.shape), ", expected ",
           ShapeString(p.marian_shape), " for the options in model.yml");
    }
    wanted.emplace_back(p, it->second);
    by_name.erase(it);
  }
  if (!by_name.empty()) {
    Fail(source, ": array '", by_name.begin()->first, "' (", by_name.size(),
         " in all) has no place in Tern's Transformer for the options in model.yml");
  }
  for (const auto& [p, index] : wanted) {
    const std::string data = read(index);
    Tensor t = Tensor::Empty(p.shape);
    std::memcpy(t.raw(), data.data(), t.bytes());
    for (int64_t j = 0; j < t.numel(); ++j) {
      if (!std::isfinite(t.f32()[j])) {
        Fail(source, ": parameter '", p.marian_name, "' holds ", t.f32()[j], " at element ", j,
             "; a model with values that are not finite numbers translates nothing");
      }
    }
    model.tensors.push_back({p.tern_name, t});
  }
  return model;
}

}  // namespace

ImportedModel FromMarianArrays(const std::vector<NpyArray>& arrays, const std::string& source) {
  std::vector<NpzMember> headers;
  for (const NpyArray& a : arrays) headers.push_back({a.name, a.descr, a.shape});
  return Import(
      headers, [&](size_t i) { return arrays[i].data; }, source);
}

ImportedModel FromMarianNpz(const NpzArchive& archive) {
  return Import(
      archive.members(), [&](size_t i) { return archive.Read(i).data; }, archive.path());
}

}  // namespace tern::inference
