// The parameter store: every parameter of a model in one flat, contiguous buffer per device, with
// a matching gradient buffer (DESIGN.md, "Flat parameter buffer"). A parameter is a named view
// (offset, shape). Offsets are aligned to 16 floats (64 bytes), so shards, allreduce, gradient
// dropping, checkpoints and export can all work on plain ranges of the buffer.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "tensor/tensor.h"

namespace tern::graph {

enum class Init { kZeros, kOnes, kGlorotUniform, kNormal };

struct ParamInfo {
  std::string name;
  Shape shape;
  int64_t offset;  // in floats, into the flat buffers
  Init init;
  float init_scale;  // kNormal: standard deviation; kGlorotUniform: gain (0: 1)
};

class ParamStore {
 public:
  ParamStore() = default;
  ParamStore(const ParamStore&) = delete;
  ParamStore& operator=(const ParamStore&) = delete;

  // REQUIRES: not finalized; names unique.
  int Add(const std::string& name, const Shape& shape, Init init, float init_scale = 0.f);
  // Allocates the buffers and initializes every parameter, deterministically from `seed` and the
  // parameter's name (so adding a parameter does not change the others' initial values).
  // `pinned` (device kCpu only): in page-locked memory (Tensor::PinnedZeros), for the host copy
  // of a GPU run's parameters and gradients.
  void Finalize(Device device, uint64_t seed, bool pinned = false);
  bool finalized() const { return values_.defined(); }

  int size() const { return static_cast<int>(params_.size()); }
  const ParamInfo& info(int i) const { return params_[i]; }
  int Find(const std::string& name) const;   // -1 when absent
  int Index(const std::string& name) const;  // CHECKs presence
  Tensor value(int i) const;
  Tensor grad(int i) const;
  Tensor value(const std::string& name) const { return value(Index(name)); }

  Tensor values_flat() const { return values_; }  // (total_size)
  Tensor grads_flat() const { return grads_; }    // (total_size)
  int64_t total_size() const { return total_; }
  void ZeroGrads();
  // Points values_flat and grads_flat (and each value(i), grad(i) taken after) at caller-owned
  // CPU buffers of total_size floats until Restore, so that a caller keeping a copy per worker
  // (virtual workers) computes a worker's gradient on its copy, into its buffer, without copying
  // either in or out. The values are only read while borrowed. grads null: the store's own.
  void Borrow(const float* values, float* grads);
  void Restore();

 private:
  std::vector<ParamInfo> params_;
  std::unordered_map<std::string, int> by_name_;
  int64_t total_ = 0;
  Tensor values_, grads_;
  Tensor own_values_, own_grads_;  // while borrowed
};

}  // namespace tern::graph
