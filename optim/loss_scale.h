// Dynamic loss scaling for fp16 mixed precision (Micikevicius et al. 2018): the loss is
// multiplied by `scale` before the backward pass so small gradients survive fp16's range; the
// gradients are divided by it again before the optimizer. A step whose gradients overflowed
// (inf or NaN) is skipped and halves the scale; `window` steps in a row without overflow double
// it. Powers of two keep the scaling and unscaling exact.
//
// On the host (Update) the decision needs the gradients' norm there: on a GPU, a wait each step.
// Moved to a device (MoveTo), the scale and the decision stay there (tensor/ops.h LossScaleGate):
// the backward pass takes its scale from the device (SeedScale), Decide unscales the gradients
// there and leaves the flag the optimizer's step takes (Apply, StepOptions::apply), and only
// reading scale(), good_steps() or skipped() (log points, checkpoints) waits. The same rule, the
// same bits.
#pragma once

#include <cstdint>

#include "tensor/tensor.h"

namespace tern::optim {

class LossScaler {
 public:
  LossScaler(float initial_scale, int64_t window);

  float scale() const;
  int64_t good_steps() const;  // since the last change of scale
  int64_t skipped() const;     // steps skipped by this process

  // After a backward pass: whether its gradients may be applied (`finite`), updating the scale.
  // On the host only.
  bool Update(bool finite);

  // For checkpoints: the scale and the count towards the next doubling.
  void Restore(float scale, int64_t good_steps);

  // Keeps the state on `device` from now on (a CPU "device" runs the same kernels there).
  void MoveTo(Device device);
  bool on_device() const { return gate_.defined(); }
  // On a device: the scale the next backward pass multiplies its loss gradient by (one float).
  Tensor SeedScale() const;
  // On a device, after that backward pass: decides from grads (their squared norm, there),
  // unscales them there when finite, and sets Apply().
  void Decide(const Tensor& grads);
  Tensor Apply() const;  // one float on the device: 1 when the last Decide's gradients apply

 private:
  Tensor Field(int field) const;
  const int64_t window_;
  float scale_;
  int64_t good_steps_ = 0;
  int64_t skipped_ = 0;
  Tensor gate_;          // (kLossGateSize) on the device, after MoveTo
  Tensor squared_norm_;  // (1) there, Decide's scratch
};

}  // namespace tern::optim
