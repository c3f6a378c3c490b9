// Gradient clipping by global norm.
#include "optim/clip.h"

#include <cmath>

#include "tensor/ops.h"

namespace tern::optim {

float ClipScale(double squared_norm, float clip_norm) {
  if (!std::isfinite(squared_norm)) return 0.f;
  if (clip_norm <= 0 || squared_norm <= 0) return 1.f;
  const double norm = std::sqrt(squared_norm);
  return norm <= clip_norm ? 1.f : static_cast<float>(clip_norm / norm);
}

double SquaredNorm(const Tensor& grads) { return SumSquares(grads); }

float ClipByGlobalNorm(const Tensor& grads, double squared_norm, float clip_norm) {
  const float scale = ClipScale(squared_norm, clip_norm);
  if (scale != 1.f) Scale(grads, scale);
  return scale;
}

}  // namespace tern::optim
