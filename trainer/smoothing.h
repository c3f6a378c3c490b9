// Exponential smoothing of the parameters (optim.exponential_smoothing, Marian's
// --exponential-smoothing): an average kept beside the parameters that training steps, which
// validation, model.tern and tern-export use instead of them.
#pragma once

#include <cstdint>

#include "tensor/tensor.h"

namespace tern::trainer {

// The weight the average keeps at update t >= 1: min(1 - s, (1 + t) / (10 + t)). Early on the
// second term wins and the average spans about t / 9 updates (it forgets the random start);
// after t ~ 9 / s it spans 1 / s updates.
float SmoothingDecay(float smoothing, int64_t update);

class ParamSmoother {
 public:
  explicit ParamSmoother(float smoothing) : smoothing_(smoothing) {}

  bool active() const { return smoothing_ > 0.f; }
  // After update `update` made `values` (rank 0's view of every parameter): the average moves
  // towards them, on their device. With no average yet (neither updated nor restored), it
  // starts at them. REQUIRES: active().
  void Update(const Tensor& values, int64_t update);
  // The average; undefined until the first Update or Restore.
  const Tensor& average() const { return average_; }
  // On resume: the checkpoint's average (host, float32), copied to `device`.
  void Restore(const Tensor& host, Device device);

 private:
  float smoothing_;
  Tensor average_;
};

}  // namespace tern::trainer
