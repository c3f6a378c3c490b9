// One parameter-server shard (see shard.h).
#include "ps/shard.h"

#include <algorithm>
#include <cstring>

#include "common/error.h"
#include "tensor/ops.h"

namespace tern::ps {

namespace {

// A host view of n floats.
Tensor Host(const float* p, int64_t n) { return Tensor(const_cast<float*>(p), Shape{n}); }

}  // namespace

Shard::Shard(ShardRange range, std::unique_ptr<optim::Optimizer> optimizer, Device device)
    : range_(range),
      params_(Tensor::Zeros(Shape{range.size()}, DType::kFloat32, device)),
      optimizer_(std::move(optimizer)) {
  CHECK(optimizer_ != nullptr);
  CHECK_EQ(optimizer_->size(), range.size());
  if (device != Device::kCpu) grad_ = Tensor::Empty(Shape{range.size()}, DType::kFloat32, device);
}

void Shard::Init(const float* values) {
  std::lock_guard<std::mutex> lock(mu_);
  Copy(Host(values, range_.size()), params_);
  version_ = 0;
}

void Shard::StepLocked(optim::Optimizer* optimizer, const optim::StepOptions& options,
                       const float* grad, float* out) {
  const int64_t n = range_.size();
  if (params_.device() == Device::kCpu) {  // the update writes out in the same pass
    optimizer->StepAndCopy(params_, Host(grad, n), options, out);
    return;
  }
  Copy(Host(grad, n), grad_);
  optimizer->Step(params_, grad_, options);
  if (out != nullptr) Copy(params_, Host(out, n));
}

uint64_t Shard::ApplyLocked(const optim::StepOptions& options, uint64_t base_version,
                            const float* grad, float* out) {
  CHECK_LE(base_version, version_) << "a push claims a version the shard never had";
  staleness_.Record(version_ - base_version);
  StepLocked(optimizer_.get(), options, grad, out);
  return ++version_;
}

uint64_t Shard::ApplyDense(const float* grad, const optim::StepOptions& options,
                           uint64_t base_version, float* out) {
  std::lock_guard<std::mutex> lock(mu_);
  return ApplyLocked(options, base_version, grad, out);
}

uint64_t Shard::ApplySparse(const SparseGradient& grad, const optim::StepOptions& options,
                            uint64_t base_version, float* out) {
  CHECK_EQ(grad.indices.size(), grad.values.size());
  std::lock_guard<std::mutex> lock(mu_);
  scratch_.resize(range_.size(), 0.f);
  for (size_t k = 0; k < grad.indices.size(); ++k) {
    const int32_t i = grad.indices[k];
    CHECK(i >= 0 && i < range_.size()) << "sparse index " << i << " outside the shard";
    scratch_[i] = grad.values[k];
  }
  const uint64_t v = ApplyLocked(options, base_version, scratch_.data(), out);
  for (int32_t i : grad.indices) scratch_[i] = 0.f;  // keep scratch all zero between calls
  return v;
}

uint64_t Shard::Read(float* out) const {
  std::lock_guard<std::mutex> lock(mu_);
  Copy(params_, Host(out, range_.size()));
  return version_;
}

uint64_t Shard::version() const {
  std::lock_guard<std::mutex> lock(mu_);
  return version_;
}

StalenessHistogram Shard::staleness() const {
  std::lock_guard<std::mutex> lock(mu_);
  return staleness_;
}

int64_t Shard::updates() const { return staleness().total(); }

std::string Shard::EncodeState(const float* params, int64_t n, uint64_t version,
                               const std::string& optimizer) {
  std::string out(sizeof(int64_t) + sizeof(uint64_t) + n * sizeof(float), '\0');
  char* p = out.data();
  std::memcpy(p, &n, sizeof(n));
  std::memcpy(p + sizeof(n), &version, sizeof(version));
  if (n > 0) std::memcpy(p + sizeof(n) + sizeof(version), params, n * sizeof(float));
  return out + optimizer;
}

Shard::StateParts Shard::DecodeState(const std::string& bytes) {
  int64_t n = -1;
  if (bytes.size() >= sizeof(n)) std::memcpy(&n, bytes.data(), sizeof(n));
  const size_t head = sizeof(int64_t) + sizeof(uint64_t) + std::max<int64_t>(n, 0) * sizeof(float);
  if (n < 0 || bytes.size() < head) Fail("shard state: malformed (", bytes.size(), " bytes)");
  StateParts parts;
  parts.params.resize(n);
  std::memcpy(&parts.version, bytes.data() + sizeof(n), sizeof(parts.version));
  if (n > 0) {
    std::memcpy(parts.params.data(), bytes.data() + sizeof(n) + sizeof(parts.version),
                n * sizeof(float));
  }
  parts.optimizer = bytes.substr(head);
  return parts;
}

std::string Shard::SaveState() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<float> host(range_.size());
  Copy(params_, Host(host.data(), range_.size()));
  return EncodeState(host.data(), range_.size(), version_, optimizer_->SaveState());
}

void Shard::LoadState(const std::string& bytes) {
  int64_t saved_n = -1;
  if (bytes.size() >= sizeof(saved_n)) std::memcpy(&saved_n, bytes.data(), sizeof(saved_n));
  if (saved_n != range_.size()) {
    Fail("shard state: holds ", saved_n, " parameters, this shard has ", range_.size(),
         " (a different model, or a checkpoint of another rank count not re-sharded)");
  }
  StateParts parts = DecodeState(bytes);
  std::lock_guard<std::mutex> lock(mu_);
  version_ = parts.version;
  Copy(Host(parts.params.data(), range_.size()), params_);
  optimizer_->LoadState(parts.optimizer);
}

}  // namespace tern::ps
