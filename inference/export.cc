#include "inference/export.h"

#include "common/error.h"
#include "inference/transformer.h"
#include "tensor/cpu/int_gemm.h"

namespace tern::inference {

WeightType ParseWeightType(const std::string& name) {
  if (name == "float32") return WeightType::kFloat32;
  if (name == "int16") return WeightType::kInt16;
  if (name == "int8") return WeightType::kInt8;
  Fail("--weights '", name, "' is not a weight type (float32, int16 or int8)");
}

std::vector<NamedTensor> ConvertWeights(const std::vector<NamedTensor>& tensors, WeightType type) {
  std::vector<NamedTensor> out;
  for (const NamedTensor& t : tensors) {
    if (type == WeightType::kFloat32 || !IsLinearWeightName(t.name) || t.tensor.rank() != 2) {
      out.push_back(t);
      continue;
    }
    CHECK(t.tensor.dtype() == DType::kFloat32) << t.name << " is already quantized";
    const cpu::IntType int_type =
        type == WeightType::kInt16 ? cpu::IntType::kInt16 : cpu::IntType::kInt8;
    Tensor q = Tensor::Empty(t.tensor.shape(),
                             int_type == cpu::IntType::kInt16 ? DType::kInt16 : DType::kInt8);
    Tensor scales = Tensor::Empty({t.tensor.dim(1)});
    cpu::QuantizeWeightColumns(int_type, t.tensor.f32(), t.tensor.dim(0), t.tensor.dim(1),
                               /*transposed=*/false, q.raw(), scales.f32());
    out.push_back({t.name, q, 1.f});
    out.push_back({t.name + kColumnScalesSuffix, scales});
  }
  return out;
}

}  // namespace tern::inference
