#include "inference/format/weights.h"

#include <cstdint>

#include "common/error.h"
#include "tensor/ops.h"

namespace tern::inference {

void Weights::Add(const std::string& name, const Tensor& view, float scale) {
  CHECK(view.defined()) << "undefined tensor for parameter " << name;
  bool inserted = tensors_.emplace(name, view).second;
  CHECK(inserted) << "parameter " << name << " added twice";
  if (view.dtype() != DType::kFloat32) scales_[name] = scale;
}

float Weights::Scale(const std::string& name) const {
  auto it = scales_.find(name);
  return it == scales_.end() ? 1.f : it->second;
}

Tensor Weights::ColumnScales(const std::string& name) const {
  auto it = tensors_.find(name + kColumnScalesSuffix);
  return it == tensors_.end() ? Tensor() : it->second;
}

const Tensor& Weights::Get(const std::string& name) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end()) {
    Fail(source_, ": model parameter '", name,
         "' is missing (the weights do not match the model config; was the model trained with a "
         "different architecture or depth?)");
  }
  return it->second;
}

const Tensor& Weights::GetMatrix(const std::string& name, const Shape& expected) const {
  const Tensor& t = Get(name);
  if (t.shape() != expected) {
    Fail(source_, ": model parameter '", name, "' has shape ", t.shape().ToString(),
         " but the model config needs ", expected.ToString());
  }
  return t;
}

const Tensor& Weights::Get(const std::string& name, const Shape& expected) const {
  const Tensor& t = GetMatrix(name, expected);
  if (t.dtype() != DType::kFloat32) {
    Fail(source_, ": model parameter '", name, "' is ", DTypeName(t.dtype()),
         "; only linear layers' weight matrices may be quantized");
  }
  return t;
}

std::vector<std::string> Weights::Names() const {
  std::vector<std::string> names;
  names.reserve(tensors_.size());
  for (const auto& [name, t] : tensors_) names.push_back(name);
  return names;
}

Device Weights::device() const {
  for (const auto& [name, t] : tensors_) {
    if (t.dtype() == DType::kFloat32) return t.device();
  }
  return Device::kCpu;
}

Tensor Dequantize(const Tensor& q, float scale, const Tensor& column_scales) {
  CHECK(q.rank() == 2 && (q.dtype() == DType::kInt16 || q.dtype() == DType::kInt8));
  const int64_t n = q.dim(1);
  CHECK(!column_scales.defined() || column_scales.numel() == n);
  Tensor out = Tensor::Empty(q.shape());
  float* f = out.f32();
  for (int64_t i = 0; i < q.numel(); ++i) {
    const float s = column_scales.defined() ? scale * column_scales.f32()[i % n] : scale;
    f[i] = static_cast<float>(q.dtype() == DType::kInt16 ? q.data<int16_t>()[i]
                                                         : q.data<int8_t>()[i]) /
           s;
  }
  return out;
}

Weights CopyWeightsTo(const Weights& host, Device device, std::vector<Tensor>* storage) {
  Weights out(host.source() + " on " + DeviceName(device));
  for (const std::string& name : host.Names()) {
    const Tensor& t = host.Get(name);
    if (t.dtype() != DType::kFloat32 && t.dtype() != DType::kInt16 && t.dtype() != DType::kInt8) {
      out.Add(name, t, host.Scale(name));
      continue;
    }
    Tensor source = t;
    if (t.dtype() != DType::kFloat32) {  // dequantized on the host, then copied
      source = Dequantize(t, host.Scale(name), host.ColumnScales(name));
    }
    storage->push_back(Tensor::Empty(t.shape(), DType::kFloat32, device));
    Copy(source, storage->back());
    out.Add(name, storage->back());
  }
  return out;
}

}  // namespace tern::inference
