// The optimizers' elementwise updates on the GPU (contracts at KernelTable::adam_update and
// sgd_update). Every operation is an explicitly rounded intrinsic, so nothing is contracted into
// an FMA and a step gives the CPU loop's bits (tensor/cpu/optimizer_update.cc).
#include <glog/logging.h>

#include "tensor/cuda/cuda_common.h"
#include "tensor/cuda/cuda_kernels.h"

namespace tern::cuda {
namespace {

__global__ void AdamKernel(float* p, const float* g, float* m, float* v, AdamArgs a, int64_t n) {
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

__global__ void SgdKernel(float* p, const float* g, float* u, SgdArgs a, bool momentum, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    float step = __fmul_rn(g[i], a.grad_scale);
    if (momentum) {
      step = __fadd_rn(__fmul_rn(a.momentum, u[i]), step);
      u[i] = step;
    }
    const float pi = p[i];
    p[i] = __fsub_rn(pi, __fadd_rn(__fmul_rn(a.learning_rate, step), __fmul_rn(a.decay, pi)));
  }
}

}  // namespace

void AdamUpdate(const Tensor& p, const Tensor& g, const Tensor& m, const Tensor& v,
                const AdamArgs& a, float* out) {
  CHECK(out == nullptr) << "AdamUpdate: out is for CPU spans only";
  const int64_t n = p.numel();
  if (n == 0) return;
  AdamKernel<<<BlocksFor(n), kThreads, 0, CurrentStream()>>>(p.f32(), g.f32(), m.f32(), v.f32(), a,
                                                             n);
  TERN_CUDA_LAUNCH_CHECK("AdamKernel");
}

void SgdUpdate(const Tensor& p, const Tensor& g, const Tensor& u, const SgdArgs& a, float* out) {
  CHECK(out == nullptr) << "SgdUpdate: out is for CPU spans only";
  const int64_t n = p.numel();
  if (n == 0) return;
  SgdKernel<<<BlocksFor(n), kThreads, 0, CurrentStream()>>>(p.f32(), g.f32(), u.f32(), a,
                                                            a.momentum != 0.f, n);
  TERN_CUDA_LAUNCH_CHECK("SgdKernel");
}

}  // namespace tern::cuda
