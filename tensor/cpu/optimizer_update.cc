// The optimizers' elementwise updates (optim/ keeps step counts and state; see KernelTable).
// One loop per case, so the common steps pay no per-element branch. Not multiversioned: an FMA
// clone would round differently from the baseline, and these loops are bound by memory anyway.
#include <cmath>
#include <type_traits>

#include "common/thread_pool.h"
#include "tensor/cpu/cpu_kernels.h"

namespace tern::cpu {
namespace {

constexpr int64_t kGrain = 1 << 14;

template <bool kCopy>
void AdamRange(float* p, const float* g, float* m, float* v, const AdamArgs& a, float* out,
               int64_t begin, int64_t end) {
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
      step = mu * u[i] + step;
      u[i] = step;
    }
    const float pi = p[i] - (lr * step + decay * p[i]);
    p[i] = pi;
    if constexpr (kCopy) out[i] = pi;
  }
}

}  // namespace

void AdamUpdate(const Tensor& p, const Tensor& g, const Tensor& m, const Tensor& v,
                const AdamArgs& a, float* out) {
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

void SgdUpdate(const Tensor& p, const Tensor& g, const Tensor& u, const SgdArgs& a, float* out) {
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

}  // namespace tern::cpu
