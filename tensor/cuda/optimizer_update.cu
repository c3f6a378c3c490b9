// The optimizers' elementwise updates on the GPU (contracts at KernelTable::adam_update and
// sgd_update). Every operation is an explicitly rounded intrinsic, so nothing is contracted into
// an FMA and a step gives the CPU loop's bits (tensor/cpu/optimizer_update.cc).
#include <glog/logging.h>

#include "tensor/cuda/cuda_common.h"
#include "tensor/cuda/cuda_kernels.h"

namespace tern::cuda {
namespace {

// gate: a StepGate state, or null: a skipped step returns at once, an applied one takes its
// corrections.
__global__ void AdamKernel(float* p, const float* g, float* m, float* v, AdamArgs a,
                           const float* gate, int64_t n) {
  if (gate != nullptr) {
    if (gate[kStepApply] == 0.f) return;
    a.inv_bc1 = gate[kStepInvBc1];
    a.inv_bc2 = gate[kStepInvBc2];
  }
  const float c1 = __fsub_rn(1.f, a.beta1), c2 = __fsub_rn(1.f, a.beta2);
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    const float gi = __fmul_rn(g[i], a.grad_scale);
    const float mi = __fadd_rn(__fmul_rn(a.beta1, m[i]), __fmul_rn(c1, gi));
    const float vi = __fadd_rn(__fmul_rn(a.beta2, v[i]), __fmul_rn(__fmul_rn(c2, gi), gi));
    m[i] = mi;
    v[i] = vi;
    const float num = __fmul_rn(a.learning_rate, __fmul_rn(mi, a.inv_bc1));
    const float den = __fadd_rn(__fsqrt_rn(__fmul_rn(vi, a.inv_bc2)), a.epsilon);
    const float pi = p[i];
    p[i] = __fsub_rn(pi, __fadd_rn(__fdiv_rn(num, den), __fmul_rn(a.decay, pi)));
  }
}

__global__ void SgdKernel(float* p, const float* g, float* u, SgdArgs a, bool momentum,
                          const float* gate, int64_t n) {
  if (gate != nullptr && gate[kStepApply] == 0.f) return;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    float step = __fmul_rn(g[i], a.grad_scale);
    if (momentum) {
      const float ui = __fadd_rn(__fmul_rn(a.momentum, u[i]), step);
      u[i] = ui;
      step = a.nesterov ? __fadd_rn(step, __fmul_rn(a.momentum, ui)) : ui;
    }
    const float pi = p[i];
    p[i] = __fsub_rn(pi, __fadd_rn(__fmul_rn(a.learning_rate, step), __fmul_rn(a.decay, pi)));
  }
}

// The decisions of the CPU's LossScaleGate and StepGate (tensor/cpu/optimizer_update.cc), one
// thread: a few scalars a step.
__global__ void LossScaleGateKernel(const float* squared_norm, float* s, LossGateArgs a) {
  const float scale = s[kGateScale];
  const bool finite = isfinite(squared_norm[0]);
  s[kGateApply] = finite ? 1.f : 0.f;
  s[kGateInvScale] = __fdiv_rn(1.f, scale);
  if (!finite) {
    s[kGateScale] = fmaxf(a.min_scale, __fmul_rn(scale, 0.5f));
    s[kGateGoodSteps] = 0.f;
    s[kGateSkipped] += 1.f;
  } else if ((s[kGateGoodSteps] += 1.f) >= a.window) {
    s[kGateScale] = fminf(a.max_scale, __fmul_rn(scale, 2.f));
    s[kGateGoodSteps] = 0.f;
  }
}

__global__ void StepGateKernel(const float* apply, float* s, float beta1, float beta2,
                               double calls) {
  s[kStepApply] = apply[0];
  if (s[kStepApply] == 0.f) s[kStepSkipped] += 1.f;
  const double t = calls - static_cast<double>(s[kStepSkipped]);
  s[kStepInvBc1] = static_cast<float>(1.0 / (1.0 - pow(static_cast<double>(beta1), t)));
  s[kStepInvBc2] = static_cast<float>(1.0 / (1.0 - pow(static_cast<double>(beta2), t)));
}

__global__ void ScaleByKernel(float* x, const float* factor, int64_t n) {
  const float f = factor[0];
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    x[i] = __fmul_rn(x[i], f);
  }
}

const float* GatePointer(const Tensor& gate) { return gate.defined() ? gate.f32() : nullptr; }

}  // namespace

void AdamUpdate(const Tensor& p, const Tensor& g, const Tensor& m, const Tensor& v,
                const AdamArgs& a, const Tensor& gate, float* out) {
  CHECK(out == nullptr) << "AdamUpdate: out is for CPU spans only";
  const int64_t n = p.numel();
  if (n == 0) return;
  AdamKernel<<<BlocksFor(n), kThreads, 0, CurrentStream()>>>(p.f32(), g.f32(), m.f32(), v.f32(), a,
                                                             GatePointer(gate), n);
  TERN_CUDA_LAUNCH_CHECK("AdamKernel");
}

void SgdUpdate(const Tensor& p, const Tensor& g, const Tensor& u, const SgdArgs& a,
               const Tensor& gate, float* out) {
  CHECK(out == nullptr) << "SgdUpdate: out is for CPU spans only";
  const int64_t n = p.numel();
  if (n == 0) return;
  SgdKernel<<<BlocksFor(n), kThreads, 0, CurrentStream()>>>(
      p.f32(), g.f32(), u.f32(), a, a.momentum != 0.f, GatePointer(gate), n);
  TERN_CUDA_LAUNCH_CHECK("SgdKernel");
}

void LossScaleGate(const Tensor& squared_norm, const Tensor& gate, const LossGateArgs& a) {
  LossScaleGateKernel<<<1, 1, 0, CurrentStream()>>>(squared_norm.f32(), gate.f32(), a);
  TERN_CUDA_LAUNCH_CHECK("LossScaleGateKernel");
}

void StepGate(const Tensor& apply, const Tensor& state, float beta1, float beta2, double calls) {
  StepGateKernel<<<1, 1, 0, CurrentStream()>>>(apply.f32(), state.f32(), beta1, beta2, calls);
  TERN_CUDA_LAUNCH_CHECK("StepGateKernel");
}

void ScaleBy(const Tensor& x, const Tensor& factor) {
  const int64_t n = x.numel();
  ScaleByKernel<<<BlocksFor(n), kThreads, 0, CurrentStream()>>>(x.f32(), factor.f32(), n);
  TERN_CUDA_LAUNCH_CHECK("ScaleByKernel");
}

}  // namespace tern::cuda
