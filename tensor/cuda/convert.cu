// Float32 to bfloat16 / half, round to nearest even: the operands of the mixed-precision
// products in gemm.cc (tensor/low_precision.h is the CPU's rounding of the same).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>

#include "tensor/cuda/cuda_common.h"
#include "tensor/cuda/cuda_kernels.h"

namespace tern::cuda {
namespace {

__device__ inline __nv_bfloat162 Pair(float a, float b, __nv_bfloat16*) {
  return __floats2bfloat162_rn(a, b);
}
__device__ inline __half2 Pair(float a, float b, __half*) { return __floats2half2_rn(a, b); }

template <typename T>
__global__ void ConvertOneByOneKernel(const float* x, T* out, int64_t n) {
  TERN_GRID_STRIDE(i, n) out[i] = Pair(x[i], 0.f, out).x;
}

// Four floats per step: one 16-byte load and one 8-byte store (the conversion is bound by memory;
// a float and a 2-byte store per thread ran at about a third of the bandwidth). REQUIRES: x
// 16-byte and out 8-byte aligned; the n % 4 tail is done one by one.
template <typename T>
__global__ void ConvertKernel(const float* x, T* out, int64_t n) {
  using T2 = decltype(Pair(0.f, 0.f, static_cast<T*>(nullptr)));
  const int64_t quads = n / 4;
  const float4* x4 = reinterpret_cast<const float4*>(x);
  T2* out2 = reinterpret_cast<T2*>(out);
  TERN_GRID_STRIDE(i, quads) {
    const float4 v = x4[i];
    out2[2 * i] = Pair(v.x, v.y, out);
    out2[2 * i + 1] = Pair(v.z, v.w, out);
  }
  const int64_t tail = quads * 4 + blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (tail < n) out[tail] = Pair(x[tail], 0.f, out).x;
}

template <typename T>
void Launch(const float* x, T* out, int64_t n, const char* name) {
  const bool aligned =
      reinterpret_cast<uintptr_t>(x) % 16 == 0 && reinterpret_cast<uintptr_t>(out) % 8 == 0;
  if (aligned) {
    ConvertKernel<T>
        <<<BlocksFor(std::max<int64_t>(n / 4, n % 4)), kThreads, 0, CurrentStream()>>>(x, out, n);
  } else {
    ConvertOneByOneKernel<T><<<BlocksFor(n), kThreads, 0, CurrentStream()>>>(x, out, n);
  }
  TERN_CUDA_LAUNCH_CHECK(name);
}

}  // namespace

void ConvertFloat(const Tensor& x, const Tensor& out) {
  CHECK(x.dtype() == DType::kFloat32 && out.numel() == x.numel()) << "ConvertFloat shapes";
  const int64_t n = x.numel();
  if (n == 0) return;
  if (out.dtype() == DType::kBFloat16) {
    Launch(x.f32(), static_cast<__nv_bfloat16*>(out.raw()), n, "ConvertKernel<bf16>");
  } else {
    CHECK(out.dtype() == DType::kFloat16) << "ConvertFloat to " << DTypeName(out.dtype());
    Launch(x.f32(), static_cast<__half*>(out.raw()), n, "ConvertKernel<fp16>");
  }
}

}  // namespace tern::cuda
