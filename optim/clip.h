// Gradient clipping by global norm. The caller supplies the squared norm so that a distributed
// caller can sum the squared norms of its shards (or ranks) first.
#pragma once

#include "tensor/tensor.h"

namespace tern::optim {

// The factor min(1, clip_norm / sqrt(squared_norm)); 1 when clip_norm <= 0 (clipping off) or
// the norm is 0. Non-finite squared norms give 0 (drop the update rather than poison the model).
float ClipScale(double squared_norm, float clip_norm);

// Squared L2 norm of a flat float32 span (any device).
double SquaredNorm(const Tensor& grads);

// Scales grads (n) in place by ClipScale(squared_norm, clip_norm) and returns that factor.
// Callers that fuse the factor into the optimizer pass it as StepOptions::grad_scale instead.
float ClipByGlobalNorm(const Tensor& grads, double squared_norm, float clip_norm);

}  // namespace tern::optim
