#include "graph/params.h"

#include <cmath>
#include <random>

#include "common/checksum.h"
#include "tensor/ops.h"

namespace tern::graph {

int ParamStore::Add(const std::string& name, const Shape& shape, Init init, float init_scale) {
  CHECK(!finalized()) << "ParamStore::Add after Finalize: " << name;
  CHECK(by_name_.find(name) == by_name_.end()) << "duplicate parameter " << name;
  int index = static_cast<int>(params_.size());
  params_.push_back({name, shape, total_, init, init_scale});
  by_name_[name] = index;
  total_ += (shape.numel() + 15) / 16 * 16;
  return index;
}

void ParamStore::Finalize(Device device, uint64_t seed, bool pinned) {
  CHECK(!finalized());
  CHECK(!pinned || device == Device::kCpu) << "ParamStore: pinned memory is host memory";
  const Shape flat{std::max<int64_t>(total_, 1)};
  Tensor host = pinned ? Tensor::PinnedZeros(flat) : Tensor::Zeros(flat);
  for (const ParamInfo& p : params_) {
    float* v = host.f32() + p.offset;
    const int64_t n = p.shape.numel();
    std::mt19937_64 rng(seed ^ Fingerprint64(p.name));
    switch (p.init) {
      case Init::kZeros:
        break;
      case Init::kOnes:
        std::fill(v, v + n, 1.f);
        break;
      case Init::kGlorotUniform: {
        int64_t fan_out = p.shape.cols(), fan_in = p.shape.rows();
        const float gain = p.init_scale > 0.f ? p.init_scale : 1.f;
        float limit = gain * std::sqrt(6.f / static_cast<float>(fan_in + fan_out));
        std::uniform_real_distribution<float> dist(-limit, limit);
        for (int64_t i = 0; i < n; ++i) v[i] = dist(rng);
        break;
      }
      case Init::kNormal: {
        std::normal_distribution<float> dist(0.f, p.init_scale);
        for (int64_t i = 0; i < n; ++i) v[i] = dist(rng);
        break;
      }
    }
  }
  if (device == Device::kCpu) {
    values_ = host.Reshape({total_});
  } else {
    values_ = Tensor::Empty({total_}, DType::kFloat32, device);
    Copy(host.Reshape({total_}), values_);
  }
  grads_ = (pinned ? Tensor::PinnedZeros(flat) : Tensor::Zeros(flat, DType::kFloat32, device))
               .Reshape({total_});
}

int ParamStore::Find(const std::string& name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? -1 : it->second;
}

int ParamStore::Index(const std::string& name) const {
  int i = Find(name);
  CHECK_GE(i, 0) << "no parameter named " << name;
  return i;
}

Tensor ParamStore::value(int i) const {
  const ParamInfo& p = params_[i];
  return values_.Slice(p.offset, p.offset + p.shape.numel()).Reshape(p.shape);
}

Tensor ParamStore::grad(int i) const {
  const ParamInfo& p = params_[i];
  return grads_.Slice(p.offset, p.offset + p.shape.numel()).Reshape(p.shape);
}

void ParamStore::ZeroGrads() { Fill(grads_, 0.f); }

void ParamStore::Borrow(const float* values, float* grads) {
  CHECK(finalized() && !own_values_.defined() && values_.device() == Device::kCpu)
      << "ParamStore::Borrow: a finalized CPU store, not already borrowed";
  own_values_ = values_;
  own_grads_ = grads_;
  values_ = Tensor(const_cast<float*>(values), Shape{total_});
  if (grads != nullptr) grads_ = Tensor(grads, Shape{total_});
}

void ParamStore::Restore() {
  CHECK(own_values_.defined()) << "ParamStore::Restore without Borrow";
  values_ = own_values_;
  grads_ = own_grads_;
  own_values_ = own_grads_ = Tensor();
}

}  // namespace tern::graph
