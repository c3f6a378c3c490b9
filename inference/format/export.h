// Export of a model's parameters to the weight type of a .tern file: float32 as they are, or the
// linear layers' weight matrices (IsLinearWeightName) quantized to int16/int8 with a scale per
// column (NAME@column_scales, format version 2) that keeps the integer GEMM's int32 accumulation
// from overflowing at the matrix's width (tensor/cpu/int_gemm.h QuantizeWeightColumns).
// Embeddings, biases and layer norms stay float32.
#pragma once

#include <string>
#include <vector>

#include "inference/format/model_file.h"

namespace tern::inference {

// Whether `name` is a linear layer's weight matrix (in, out), of any architecture the runtime
// decodes: what an integer export quantizes.
bool IsLinearWeightName(const std::string& name);

enum class WeightType { kFloat32, kInt16, kInt8 };

// "float32", "int16" or "int8"; tern::Error naming the flag otherwise.
WeightType ParseWeightType(const std::string& name);

// The tensors to write for `type`: float32 ones are passed through (views), quantized ones are
// new owning tensors with their scale.
std::vector<NamedTensor> ConvertWeights(const std::vector<NamedTensor>& tensors, WeightType type);

}  // namespace tern::inference
