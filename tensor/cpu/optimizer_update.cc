// The optimizers' elementwise updates (optim/ keeps step counts and state; see KernelTable).
// One loop per case, so the common steps pay no per-element branch. Adam's loop has an AVX-512
// clone (its square roots and divisions bound it, not memory); the file is built with
// -ffp-contract=off, so that the clone rounds each product and sum as the baseline does.
#include <algorithm>
#include <cmath>
#include <type_traits>

#include "common/thread_pool.h"
#include "tensor/cpu/cpu_kernels.h"

namespace tern::cpu {
namespace {

constexpr int64_t kGrain = 1 << 14;

template <bool kCopy>
TERN_MULTIVERSION_V4_ONLY void AdamRange(float* p, const float* g, float* m, float* v,
                                         const AdamArgs& a, float* out, int64_t begin,
                                         int64_t end) {
  const float b1 = a.beta1, b2 = a.beta2, c1 = 1.f - b1, c2 = 1.f - b2;
  const float lr = a.learning_rate, eps = a.epsilon, scale = a.grad_scale, decay = a.decay;
  const float inv_bc1 = a.inv_bc1, inv_bc2 = a.inv_bc2;
  for (int64_t i = begin; i < end; ++i) {
    const float gi = g[i] * scale;
    const float mi = b1 * m[i] + c1 * gi;
    const float vi = b2 * v[i] + c2 * gi * gi;
    m[i] = mi;
    v[i] = vi;
    const float pi = p[i] - (lr * (mi * inv_bc1) / (std::sqrt(vi * inv_bc2) + eps) + decay * p[i]);
    p[i] = pi;
    if constexpr (kCopy) out[i] = pi;
  }
}

template <bool kMomentum, bool kCopy>
void SgdRange(float* p, const float* g, float* u, const SgdArgs& a, float* out, int64_t begin,
              int64_t end) {
  const float mu = a.momentum, lr = a.learning_rate, scale = a.grad_scale, decay = a.decay;
  for (int64_t i = begin; i < end; ++i) {
    float step = g[i] * scale;
    if constexpr (kMomentum) {
      const float ui = mu * u[i] + step;
      u[i] = ui;
      step = a.nesterov ? step + mu * ui : ui;
    }
    const float pi = p[i] - (lr * step + decay * p[i]);
    p[i] = pi;
    if constexpr (kCopy) out[i] = pi;
  }
}

// A gated step's corrections, or a's; false when the gate says the step does not apply.
bool Gated(const Tensor& gate, AdamArgs* a) {
  if (!gate.defined()) return true;
  const float* s = gate.f32();
  if (s[kStepApply] == 0.f) return false;
  a->inv_bc1 = s[kStepInvBc1];
  a->inv_bc2 = s[kStepInvBc2];
  return true;
}

}  // namespace

void AdamUpdate(const Tensor& p, const Tensor& g, const Tensor& m, const Tensor& v,
                const AdamArgs& args, const Tensor& gate, float* out) {
  AdamArgs a = args;
  if (!Gated(gate, &a)) {
    if (out != nullptr) std::copy(p.f32(), p.f32() + p.numel(), out);
    return;
  }
  float* pp = p.f32();
  const float* gp = g.f32();
  float* mp = m.f32();
  float* vp = v.f32();
  ParallelFor(p.numel(), kGrain, [&](int64_t begin, int64_t end) {
    if (out != nullptr) {
      AdamRange<true>(pp, gp, mp, vp, a, out, begin, end);
    } else {
      AdamRange<false>(pp, gp, mp, vp, a, out, begin, end);
    }
  });
}

void SgdUpdate(const Tensor& p, const Tensor& g, const Tensor& u, const SgdArgs& a,
               const Tensor& gate, float* out) {
  if (gate.defined() && gate.f32()[kStepApply] == 0.f) {
    if (out != nullptr) std::copy(p.f32(), p.f32() + p.numel(), out);
    return;
  }
  float* pp = p.f32();
  const float* gp = g.f32();
  float* up = u.f32();
  const bool momentum = a.momentum != 0.f;
  ParallelFor(p.numel(), kGrain, [&](int64_t begin, int64_t end) {
    if (momentum) {
      if (out != nullptr) {
        SgdRange<true, true>(pp, gp, up, a, out, begin, end);
      } else {
        SgdRange<true, false>(pp, gp, up, a, out, begin, end);
      }
    } else if (out != nullptr) {
      SgdRange<false, true>(pp, gp, up, a, out, begin, end);
    } else {
      SgdRange<false, false>(pp, gp, up, a, out, begin, end);
    }
  });
}

void LossScaleGate(const Tensor& squared_norm, const Tensor& gate, const LossGateArgs& a) {
  float* s = gate.f32();
  const float scale = s[kGateScale];
  const bool finite = std::isfinite(squared_norm.f32()[0]);
  s[kGateApply] = finite ? 1.f : 0.f;
  s[kGateInvScale] = 1.f / scale;
  if (!finite) {
    s[kGateScale] = std::max(a.min_scale, scale * 0.5f);
    s[kGateGoodSteps] = 0.f;
    s[kGateSkipped] += 1.f;
  } else if ((s[kGateGoodSteps] += 1.f) >= a.window) {
    s[kGateScale] = std::min(a.max_scale, scale * 2.f);
    s[kGateGoodSteps] = 0.f;
  }
}

void StepGate(const Tensor& apply, const Tensor& state, float beta1, float beta2, double calls) {
  float* s = state.f32();
  s[kStepApply] = apply.f32()[0];
  if (s[kStepApply] == 0.f) s[kStepSkipped] += 1.f;
  const double t = calls - double{s[kStepSkipped]};
  s[kStepInvBc1] = static_cast<float>(1.0 / (1.0 - std::pow(double{beta1}, t)));
  s[kStepInvBc2] = static_cast<float>(1.0 / (1.0 - std::pow(double{beta2}, t)));
}

void ScaleBy(const Tensor& x, const Tensor& factor) {
  const float f = factor.f32()[0];
  float* p = x.f32();
  ParallelFor(x.numel(), kGrain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) p[i] *= f;
  });
}

}  // namespace tern::cpu
