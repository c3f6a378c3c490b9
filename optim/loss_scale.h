// Dynamic loss scaling for fp16 mixed precision (Micikevicius et al. 2018): the loss is
// multiplied by `scale` before the backward pass so small gradients survive fp16's range; the
// gradients are divided by it again before the optimizer. A step whose gradients overflowed
// (inf or NaN) is skipped and halves the scale; `window` steps in a row without overflow double
// it. Powers of two keep the scaling and unscaling exact.
#pragma once

#include <cstdint>

namespace tern::optim {

class LossScaler {
 public:
  LossScaler(float initial_scale, int64_t window);

  float scale() const { return scale_; }
  int64_t good_steps() const { return good_steps_; }  // since the last change of scale
  int64_t skipped() const { return skipped_; }        // steps skipped by this process

  // After a backward pass: whether its gradients may be applied (`finite`), updating the scale.
  bool Update(bool finite);

  // For checkpoints: the scale and the count towards the next doubling.
  void Restore(float scale, int64_t good_steps);

 private:
  const int64_t window_;
  float scale_;
  int64_t good_steps_ = 0;
  int64_t skipped_ = 0;
};

}  // namespace tern::optim
