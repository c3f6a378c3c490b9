// tanh(x) = x P(x^2) / Q(x^2) on [-7.9, 7.9] (saturated beyond): a minimax rational fit, the form
// Eigen and XLA use for float tanh, with absolute error below 2e-6. Branch-free, so loops over it
// vectorize (std::tanh does not: it took a third of a GRU model's training step). NaN stays NaN.
#pragma once

namespace tern::cpu {

inline float RationalTanh(float x) {
  constexpr float kClamp = 7.90531110763549805f;
  x = x > kClamp ? kClamp : (x < -kClamp ? -kClamp : x);
  const float x2 = x * x;
  float p = -2.76076847742355e-16f;
  p = p * x2 + 2.00018790482477e-13f;
  p = p * x2 - 8.60467152213735e-11f;
  p = p * x2 + 5.12229709037114e-08f;
  p = p * x2 + 1.48572235717979e-05f;
  p = p * x2 + 6.37261928875436e-04f;
  p = p * x2 + 4.89352455891786e-03f;
  float q = 1.19825839466702e-06f;
  q = q * x2 + 1.18534705686654e-04f;
  q = q * x2 + 2.26843463243900e-03f;
  q = q * x2 + 4.89352518554385e-03f;
  return x * p / q;
}

// sigmoid(x) = (1 + tanh(x / 2)) / 2 through RationalTanh: absolute error below 1e-6.
inline float RationalSigmoid(float x) { return 0.5f + 0.5f * RationalTanh(0.5f * x); }

}  // namespace tern::cpu
