// One parameter-server shard: a range of the flat parameters, that range's optimizer state and
// a version bumped by every global update. All access goes through the shard's mutex, so the
// server thread (remote pushes) and the owning worker's communication thread (its own pushes)
// may update it concurrently.
//
// The parameters and optimizer state live on `device`: on a GPU the updates run there (a pushed
// gradient goes up, the fresh values come down for the reply), while what travels between ranks
// stays in host memory.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "optim/optimizer.h"
#include "ps/shard_map.h"
#include "ps/staleness.h"
#include "tensor/tensor.h"

namespace tern::ps {

// A sparse gradient for one shard: positions relative to the shard's begin, ascending.
struct SparseGradient {
  std::vector<int32_t> indices;
  std::vector<float> values;
};

class Shard {
 public:
  Shard(ShardRange range, std::unique_ptr<optim::Optimizer> optimizer,
        Device device = Device::kCpu);
  Shard(const Shard&) = delete;
  Shard& operator=(const Shard&) = delete;

  const ShardRange& range() const { return range_; }

  // values (range.size()): the initial parameters of this range. Resets the version to 0.
  void Init(const float* values);

  // A global update with a gradient computed on version base_version; records the staleness
  // and returns the new version. Dense: grad (range.size()). When out is not null it gets the
  // updated parameters (range.size()), written in the same pass as the update: what Read would
  // return right after, without a second pass over the shard.
  uint64_t ApplyDense(const float* grad, const optim::StepOptions& options, uint64_t base_version,
                      float* out = nullptr);
  uint64_t ApplySparse(const SparseGradient& grad, const optim::StepOptions& options,
                       uint64_t base_version, float* out = nullptr);

  // Copies the parameters to out (range.size()) and returns their version.
  uint64_t Read(float* out) const;
  uint64_t version() const;
  StalenessHistogram staleness() const;
  int64_t updates() const;

  // Parameters, version and optimizer state, for checkpoints (same range size to load).
  std::string SaveState() const;
  void LoadState(const std::string& bytes);

  // The parts of SaveState's bytes, and back (re-sharding; see reshard.h).
  struct StateParts {
    std::vector<float> params;  // (range size)
    uint64_t version = 0;
    std::string optimizer;  // optim::Optimizer::SaveState
  };
  static StateParts DecodeState(const std::string& bytes);
  static std::string EncodeState(const float* params, int64_t n, uint64_t version,
                                 const std::string& optimizer);

 private:
  uint64_t ApplyLocked(const optim::StepOptions& options, uint64_t base_version, const float* grad,
                       float* out);
  // One optimizer step of params_ with the host gradient `grad`, the new values to out (host,
  // may be null). REQUIRES: mu_ held.
  void StepLocked(optim::Optimizer* optimizer, const optim::StepOptions& options, const float* grad,
                  float* out);

  const ShardRange range_;
  mutable std::mutex mu_;
  Tensor params_;                                // GUARDED_BY(mu_) (range.size()) on device
  Tensor grad_;                                  // GUARDED_BY(mu_) off the CPU: grad upload
  std::vector<float> scratch_;                   // GUARDED_BY(mu_) sparse -> dense
  std::unique_ptr<optim::Optimizer> optimizer_;  // GUARDED_BY(mu_)
  uint64_t version_ = 0;                         // GUARDED_BY(mu_)
  StalenessHistogram staleness_;                 // GUARDED_BY(mu_)
};

}  // namespace tern::ps
