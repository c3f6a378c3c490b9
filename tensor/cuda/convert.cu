// Float32 to bfloat16 / half, round to nearest even: the operands of the mixed-precision
// products in gemm.cc (tensor/low_precision.h is the CPU's rounding of the same).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "tensor/cuda/cuda_common.h"
#include "tensor/cuda/cuda_kernels.h"

namespace tern::cuda {
namespace {

__global__ void ToBFloat16Kernel(const float* x, __nv_bfloat16* out, int64_t n) {
  TERN_GRID_STRIDE(i, n) out[i] = __float2bfloat16_rn(x[i]);
}

__global__ void ToHalfKernel(const float* x, __half* out, int64_t n) {
  TERN_GRID_STRIDE(i, n) out[i] = __float2half_rn(x[i]);
}

}  // namespace

void ConvertFloat(const Tensor& x, const Tensor& out) {
  CHECK(x.dtype() == DType::kFloat32 && out.numel() == x.numel()) << "ConvertFloat shapes";
  const int64_t n = x.numel();
  if (n == 0) return;
  if (out.dtype() == DType::kBFloat16) {
    ToBFloat16Kernel<<<BlocksFor(n), kThreads, 0, CurrentStream()>>>(
        x.f32(), static_cast<__nv_bfloat16*>(out.raw()), n);
    TERN_CUDA_LAUNCH_CHECK("ToBFloat16Kernel");
  } else {
    CHECK(out.dtype() == DType::kFloat16) << "ConvertFloat to " << DTypeName(out.dtype());
    ToHalfKernel<<<BlocksFor(n), kThreads, 0, CurrentStream()>>>(
        x.f32(), static_cast<__half*>(out.raw()), n);
    TERN_CUDA_LAUNCH_CHECK("ToHalfKernel");
  }
}

}  // namespace tern::cuda
