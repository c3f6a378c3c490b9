// Helpers shared by the ps/ tests: seeded random vectors and tensor views of them.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "configs/tern.pb.h"
#include "ps/strategy.h"
#include "tensor/tensor.h"

namespace tern::ps::testing {

// (n) values from N(0, 1), the same for the same seed.
inline std::vector<float> RandomVector(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.f, 1.f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

inline Tensor View(std::vector<float>& v) {
  return Tensor(v.data(), Shape{static_cast<int64_t>(v.size())});
}

// Adam with the epsilon the tests compare against.
inline config::OptimConfig Adam() {
  config::OptimConfig c;
  c.set_optimizer("adam");
  c.set_epsilon(1e-8f);
  return c;
}

inline config::OptimConfig Sgd() {
  config::OptimConfig c;
  c.set_optimizer("sgd");
  return c;
}

// A mini-batch's update number and schedule options.
inline StepInfo Info(int64_t update, float lr, float beta1 = 0.9f) {
  StepInfo info;
  info.update = update;
  info.options.learning_rate = lr;
  info.options.beta1 = beta1;
  info.options.beta2 = 0.999f;
  return info;
}

}  // namespace tern::ps::testing
