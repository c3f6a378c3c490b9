// Scans of one row of floats for the output layer's top-k pass (inference/search/output_layer.h)
// and the softmaxes (softmax.cc): the biased logits with their maximum, and the next column a kept
// set could take. Vectorized (TERN_MULTIVERSION), so a vocabulary row costs a few hundred vector
// steps, not a branch per column.
#pragma once

#include <cstdint>

namespace tern::cpu {

// out[c] = x[c] + bias[c] for c < n (bias may be null: x itself; out may be null: nothing
// written). Returns the largest out[c] as a left fold of std::max from -inf would, bit for bit
// (NaNs are passed over; a zero maximum has the sign of the first zero), or -inf when n is 0.
float AddAndMax(const float* x, const float* bias, float* out, int64_t n);

// The first c in [from, n) where x[c] <= floor does not hold (a larger value, or NaN), or n.
int64_t FirstNotAtMost(const float* x, int64_t from, int64_t n, float floor);

}  // namespace tern::cpu
