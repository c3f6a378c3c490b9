#include "inference/format/export.h"

#include <cstring>

#include "common/error.h"
#include "tensor/cpu/int_gemm.h"

namespace tern::inference {

bool IsLinearWeightName(const std::string& name) {
  // The RNN models' output matrix (decoder_ff_logit_l2_W, untied) stays float like Wemb.
  if (name == "decoder_ff_logit_l2_W") return false;
  // Transformer and AAN layers; then the GRU models' (inference/rnn/rnn.h) cells, attention and
  // feed-forward.
  for (const char* suffix : {"_Wq", "_Wk", "_Wv", "_Wo", "_W1", "_W2", "_Wi", "_Wf", "_W", "_Wx",
                             "_U", "_Ux", "_W0", "_W_comb_att", "_Wc_att"}) {
    const size_t n = std::strlen(suffix);
    if (name.size() > n && name.compare(name.size() - n, n, suffix) == 0) return true;
  }
  return false;
}

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
