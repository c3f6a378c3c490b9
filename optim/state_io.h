// The byte layout of optimizer state, shared by the optimizers: a fixed header (magic, version,
// kind, size, steps) followed by the float32 buffers. Internal to optim/.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tensor/tensor.h"

namespace tern::optim::internal {

// One state buffer (n floats) on the device of the spans its optimizer updates: a host vector,
// mirrored on the GPU from the first step of a CUDA span on. An optimizer's spans stay on one
// device (CHECK).
class StateBuffer {
 public:
  explicit StateBuffer(int64_t n) : host_(n, 0.f) {}
  // The buffer on `device`: made at the first CUDA use, zero-filled there while the host values
  // were never written (a fresh optimizer's first step waits for no copy), else uploaded.
  Tensor On(Device device);
  // The host values, brought up to date from the GPU copy when there is one (for SaveState).
  const std::vector<float>& Host() const;
  // The host values to overwrite (LoadState, a reset); call Written() after.
  std::vector<float>* MutableHost() {
    zeros_ = false;
    return &host_;
  }
  void Written();

 private:
  mutable std::vector<float> host_;
  Tensor device_;      // the CUDA copy, once used there
  bool zeros_ = true;  // host_ still holds the constructor's zeros
};

enum class StateKind : uint32_t { kAdam = 1, kSgd = 2, kDelayedMomentumSgd = 3 };

std::string EncodeState(StateKind kind, int64_t size, int64_t steps,
                        const std::vector<const std::vector<float>*>& buffers);
// Checks magic, version, kind, size and length; throws tern::Error naming what is wrong.
void DecodeState(const std::string& bytes, StateKind kind, int64_t size, int64_t* steps,
                 const std::vector<std::vector<float>*>& buffers);

}  // namespace tern::optim::internal
