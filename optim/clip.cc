// Gradient clipping by global norm.
#include "optim/clip.h"

#include "tensor/clip_factor.h"
#include "tensor/ops.h"

namespace tern::optim {

float ClipScale(double squared_norm, float clip_norm) {
  return ClipFactor(squared_norm, clip_norm);
}

double SquaredNorm(const Tensor& grads) { return SumSquares(grads); }

float ClipByGlobalNorm(const Tensor& grads, double squared_norm, float clip_norm) {
  const float scale = ClipScale(squared_norm, clip_norm);
  if (scale != 1.f) Scale(grads, scale);
  return scale;
}

}  // namespace tern::optim
