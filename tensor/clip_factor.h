// The gradient-clipping factor, one definition for the host (optim::ClipScale, the CPU kernels)
// and the CUDA kernels, so every device and every strategy clips alike.
#pragma once

#include <cmath>

#if defined(__CUDACC__)
#define TERN_HOST_DEVICE __host__ __device__
#else
#define TERN_HOST_DEVICE
#endif

namespace tern {

// min(1, clip_norm / sqrt(squared_norm)): 1 when clipping is off (clip_norm <= 0), the norm is 0
// or within the clip; 0 when the squared norm is not finite (the update is dropped rather than
// poisoning the model). x - x is 0 only for a finite x, on either side.
TERN_HOST_DEVICE inline float ClipFactor(double squared_norm, float clip_norm) {
  if (!(squared_norm - squared_norm == 0.0)) return 0.f;
  if (clip_norm <= 0.f || squared_norm <= 0.0) return 1.f;
  const double norm = sqrt(squared_norm);
  return norm <= clip_norm ? 1.f : static_cast<float>(clip_norm / norm);
}

}  // namespace tern
