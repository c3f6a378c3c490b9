// Weights: the named parameters a runtime model reads, as read-only Tensor views. The memory is
// owned elsewhere: the trainer's flat parameter buffer (validation) or a memory-mapped .tern file
// (ModelFile). Names and shapes are the ones models/ creates (see
// inference/transformer/transformer.h for the list).
// A quantized matrix (int16/int8, from an integer export) carries its quantization scale, and
// (format version 2) a scale per column in the float32 tensor NAME + kColumnScalesSuffix, shape
// (out): value[:, j] = q[:, j] / (scale * column_scales[j]).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "tensor/tensor.h"

namespace tern::inference {

inline constexpr char kColumnScalesSuffix[] = "@column_scales";

class Weights {
 public:
  // `source` names where the weights come from ("model.tern", "trainer parameters") so that an
  // error about a missing or misshapen parameter says where to look.
  explicit Weights(std::string source = "weights") : source_(std::move(source)) {}

  // Adds a view. REQUIRES: name not yet present (a duplicate is a programmer error).
  void Add(const std::string& name, const Tensor& view, float scale = 1.f);

  bool Has(const std::string& name) const { return tensors_.count(name) != 0; }
  // The view named `name`; tern::Error naming the parameter when it is missing.
  const Tensor& Get(const std::string& name) const;
  // As Get, and also checks the shape; tern::Error names the parameter and both shapes.
  const Tensor& Get(const std::string& name, const Shape& expected) const;
  // As Get with a shape, but also accepts int16/int8 (a linear layer's weight matrix).
  const Tensor& GetMatrix(const std::string& name, const Shape& expected) const;
  // The quantization scale of `name` (1 for float32).
  float Scale(const std::string& name) const;
  // The per-column scales (out) of a quantized matrix `name`, or an undefined tensor.
  Tensor ColumnScales(const std::string& name) const;

  std::vector<std::string> Names() const;
  // The device every float32 tensor is on (the CPU for an empty set).
  Device device() const;
  size_t size() const { return tensors_.size(); }
  const std::string& source() const { return source_; }

 private:
  std::string source_;
  std::map<std::string, Tensor> tensors_;
  std::map<std::string, float> scales_;  // quantized tensors only
};

// A quantized matrix (in, out) as float32 (owning, on the CPU): q / (scale * column_scales[j]),
// column_scales (out) or undefined.
Tensor Dequantize(const Tensor& q, float scale, const Tensor& column_scales);

// The float32 and quantized tensors of `host` copied to `device`, the quantized ones as float32
// (value = q / scale): a GPU runs float products. Other tensors (a shortlist's ids) stay on the
// host. `storage` receives the device tensors, which must outlive the result.
Weights CopyWeightsTo(const Weights& host, Device device, std::vector<Tensor>* storage);

}  // namespace tern::inference
