// tern._tern's converter functions (model_writer.h). Everything is checked here, in C++, before a
// byte is written: the config as tern-train validates a model section, the vocabulary as the
// runtime loads one, and every parameter's name and shape against the architecture's list.
#include "python/src/model_writer.h"

#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <cstring>
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "common/error.h"
#include "configs/config_io.h"
#include "configs/model_size.h"
#include "data/vocab.h"
#include "inference/format/export.h"
#include "inference/format/model_file.h"
#include "inference/marian/model.h"
#include "inference/marian/npz.h"
#include "inference/marian/vocab.h"
#include "inference/transformer/transformer.h"

namespace py = pybind11;

namespace tern::python {
namespace {

// A C-contiguous float32 buffer (a numpy array) as an owning tensor of the same shape.
Tensor TensorFromBuffer(const std::string& name, const py::buffer& buffer) {
  const py::buffer_info info = buffer.request();
  if (info.format != py::format_descriptor<float>::format() || info.itemsize != 4) {
    throw py::type_error("parameter '" + name + "' is not float32 (buffer format '" + info.format +
                         "'); convert it with .astype('float32')");
  }
  std::vector<int64_t> dims(info.shape.begin(), info.shape.end());
  py::ssize_t stride = 4;
  for (int i = info.ndim - 1; i >= 0; --i) {
    if (info.shape[i] > 1 && info.strides[i] != stride) {
      throw py::value_error("parameter '" + name +
                            "' is not C-contiguous; pass numpy.ascontiguousarray(...)");
    }
    stride *= info.shape[i];
  }
  Tensor t = Tensor::Empty(Shape(dims));
  if (t.numel() > 0) std::memcpy(t.f32(), info.ptr, static_cast<size_t>(t.numel()) * 4);
  return t;
}

// The model config of a converted model: protobuf text, validated as a Marian import's is.
config::TrainConfig ConvertedConfig(const std::string& text, int64_t vocab_size) {
  config::TrainConfig config;
  std::string error;
  if (!config::ParseTrainConfig(text, "the converted config", &config, &error)) {
    throw py::value_error(error);
  }
  config::FillDefaults(&config);
  if (config.model().arch() != "transformer") {
    throw py::value_error("model.arch '" + config.model().arch() +
                          "': the converters write Transformers only");
  }
  if (!config::ValidateModel(config.model(), &error) ||
      !config::CheckModelSize(config, vocab_size, 0, &error)) {
    throw py::value_error("the converted model: " + error);
  }
  config.mutable_data()->set_vocab_size(static_cast<int32_t>(vocab_size));
  return config;
}

void WriteModel(const std::string& path, const std::string& config_text, const py::bytes& vocab,
                const std::map<std::string, py::buffer>& tensors, const std::string& weight_type) {
  const std::string vocab_bytes = vocab;
  const inference::WeightType type = inference::ParseWeightType(weight_type);
  const data::Vocab v = data::Vocab::FromSerialized(vocab_bytes, "the converted vocabulary");
  const config::TrainConfig config = ConvertedConfig(config_text, v.size());
  std::vector<inference::NamedTensor> named;
  std::map<std::string, bool> used;
  for (const auto& [name, shape] :
       inference::TransformerParameterShapes(config.model(), v.size())) {
    auto it = tensors.find(name);
    if (it == tensors.end()) {
      throw py::value_error("parameter '" + name + "' is missing (shape " + shape.ToString() +
                            " for this config)");
    }
    Tensor t = TensorFromBuffer(name, it->second);
    if (t.shape() != shape) {
      throw py::value_error("parameter '" + name + "' has shape " + t.shape().ToString() +
                            ", expected " + shape.ToString());
    }
    used[name] = true;
    named.push_back({name, std::move(t), 1.f});
  }
  for (const auto& [name, buffer] : tensors) {
    if (!used.count(name)) {
      throw py::value_error("parameter '" + name + "' has no place in this Transformer");
    }
  }
  py::gil_scoped_release release;
  inference::WriteModelFile(path, config, v.serialized(), inference::ConvertWeights(named, type));
}

using PieceTuple = std::tuple<std::string, float, int>;

std::vector<PieceTuple> SpmPieceTuples(const py::bytes& model) {
  std::vector<PieceTuple> out;
  for (const inference::SpmPiece& p : inference::SpmPieces(std::string(model), "model")) {
    out.emplace_back(p.piece, p.score, p.type);
  }
  return out;
}

py::bytes SpmWithPieces(const py::bytes& model, const std::vector<PieceTuple>& pieces) {
  std::vector<inference::SpmPiece> list;
  list.reserve(pieces.size());
  for (const auto& [piece, score, type] : pieces) {
    if (type < 1 || type > 6) {
      throw py::value_error("piece '" + piece + "': type " + std::to_string(type) +
                            " is not a SentencePiece type (1 to 6)");
    }
    list.push_back({piece, score, type});
  }
  return py::bytes(inference::WithSpmPieces(std::string(model), list, "model"));
}

// A Marian .npz's model, as FromMarianNpz reads and checks it: (config text, vocabulary size,
// {Tern name: float32 array}).
py::tuple ReadMarianNpz(const std::string& path) {
  inference::ImportedModel model = inference::FromMarianNpz(*inference::NpzArchive::Open(path));
  config::TrainConfig config;
  *config.mutable_model() = model.model;
  py::dict tensors;
  for (const inference::NamedTensor& t : model.tensors) {
    const std::vector<int64_t> dims = t.tensor.shape().dims();
    py::array_t<float> a(std::vector<py::ssize_t>(dims.begin(), dims.end()));
    std::memcpy(a.mutable_data(), t.tensor.f32(), static_cast<size_t>(t.tensor.numel()) * 4);
    tensors[py::str(t.name)] = std::move(a);
  }
  return py::make_tuple(config::ToText(config), model.vocab_size, tensors);
}

}  // namespace

void DefModelWriter(py::module_& m) {
  m.def("_write_model", &WriteModel, py::arg("path"), py::arg("config"), py::arg("vocab"),
        py::arg("tensors"), py::arg("weight_type") = "float32");
  m.def(
      "_check_config",
      [](const std::string& config_text, int64_t vocab_size) {
        ConvertedConfig(config_text, vocab_size);
      },
      py::arg("config"), py::arg("vocab_size"));
  m.def("_spm_pieces", &SpmPieceTuples, py::arg("model"));
  m.def("_spm_with_pieces", &SpmWithPieces, py::arg("model"), py::arg("pieces"));
  m.def("_read_marian_npz", &ReadMarianNpz, py::arg("path"));
}

}  // namespace tern::python
