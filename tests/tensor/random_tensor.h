// Seeded random tensors for the tensor/ tests.
#pragma once

#include <random>

#include "tensor/tensor.h"

namespace tern::testing {

// A CPU float tensor of N(0, stddev²) values, the same for the same seed.
inline Tensor RandomTensor(const Shape& shape, uint32_t seed, float stddev = 1.f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.f, stddev);
  Tensor t = Tensor::Empty(shape);
  for (int64_t i = 0; i < t.numel(); ++i) t.f32()[i] = dist(rng);
  return t;
}

}  // namespace tern::testing
