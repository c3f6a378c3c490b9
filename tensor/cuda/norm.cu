// Layer normalization over the last dim and its backward (see tensor/cpu/norm.cc): one block per
// row for the forward pass and dx; dgamma and dbeta summed over rows in a fixed order.
#include "tensor/cuda/cuda_common.h"
#include "tensor/cuda/cuda_kernels.h"
#include "tensor/cuda/reduce.cuh"

namespace tern::cuda {
namespace {

// ---- kernels ----

// x, y (rows, n); gamma, beta (n); mean, rstd (rows). Two passes (mean, then variance) as on CPU.
__global__ void LayerNormKernel(const float* x, const float* gamma, const float* beta, float* y,
                                float* mean, float* rstd, float eps, int64_t n) {
  const int64_t row = blockIdx.x;
  const float* xr = x + row * n;
  float* yr = y + row * n;
  float sum = 0.f;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) sum += xr[i];
  const float mu = BlockSum(sum) / n;
  float var = 0.f;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) var += (xr[i] - mu) * (xr[i] - mu);
  const float rs = rsqrtf(BlockSum(var) / n + eps);
  if (threadIdx.x == 0) {
    mean[row] = mu;
    rstd[row] = rs;
  }
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x)
    yr[i] = (xr[i] - mu) * rs * gamma[i] + beta[i];
}

// dx += rstd * (g - mean(g) - xhat * mean(g * xhat)), g = dy * gamma, one block per row (dx =
// without `accumulate`).
__global__ void LayerNormBackwardDxKernel(const float* x, const float* gamma, const float* mean,
                                          const float* rstd, const float* dy, float* dx, int64_t n,
                                          bool accumulate) {
  const int64_t offset = blockIdx.x * n;
  const float mu = mean[blockIdx.x], rs = rstd[blockIdx.x];
  float sum_g = 0.f, sum_gx = 0.f;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    const float g = dy[offset + i] * gamma[i];
    sum_g += g;
    sum_gx += g * (x[offset + i] - mu) * rs;
  }
  const float mg = BlockSum(sum_g) / n;
  const float mgx = BlockSum(sum_gx) / n;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    const float xhat = (x[offset + i] - mu) * rs;
    const float d = rs * (dy[offset + i] * gamma[i] - mg - xhat * mgx);
    dx[offset + i] = accumulate ? dx[offset + i] + d : d;
  }
}

// Σ dy * xhat and Σ dy over rows [blockIdx.y * per, + per). Block (32, 32): threadIdx.x the
// column, threadIdx.y strides the chunk's rows, partials added in a fixed order. With `partial`
// (2, chunks, n) each chunk writes its two sums there (LayerNormParamChunksKernel adds them);
// without, the one chunk adds them to dgamma and dbeta (either may be null).
__global__ void LayerNormBackwardParamsKernel(const float* x, const float* mean, const float* rstd,
                                              const float* dy, float* dgamma, float* dbeta,
                                              float* partial, int64_t rows, int64_t n,
                                              int64_t per) {
  __shared__ float part_g[32][33];
  __shared__ float part_b[32][33];
  const int64_t c = blockIdx.x * 32 + threadIdx.x;
  const int64_t begin = blockIdx.y * per, end = begin + per < rows ? begin + per : rows;
  float sg = 0.f, sb = 0.f;
  if (c < n) {
    for (int64_t r = begin + threadIdx.y; r < end; r += 32) {
      const float d = dy[r * n + c];
      sg += d * (x[r * n + c] - mean[r]) * rstd[r];
      sb += d;
    }
  }
  part_g[threadIdx.y][threadIdx.x] = sg;
  part_b[threadIdx.y][threadIdx.x] = sb;
  __syncthreads();
  if (threadIdx.y == 0 && c < n) {
    float tg = 0.f, tb = 0.f;
    for (int i = 0; i < 32; ++i) {
      tg += part_g[i][threadIdx.x];
      tb += part_b[i][threadIdx.x];
    }
    if (partial != nullptr) {
      partial[blockIdx.y * n + c] = tg;
      partial[(gridDim.y + blockIdx.y) * n + c] = tb;
    } else {
      if (dgamma != nullptr) dgamma[c] += tg;
      if (dbeta != nullptr) dbeta[c] += tb;
    }
  }
}

// dgamma (n) += Σ_chunk partial[0], dbeta (n) += Σ_chunk partial[1], in chunk order.
__global__ void LayerNormParamChunksKernel(const float* partial, float* dgamma, float* dbeta,
                                           int64_t chunks, int64_t n) {
  TERN_GRID_STRIDE(c, n) {
    float tg = 0.f, tb = 0.f;
    for (int64_t k = 0; k < chunks; ++k) {
      tg += partial[k * n + c];
      tb += partial[(chunks + k) * n + c];
    }
    if (dgamma != nullptr) dgamma[c] += tg;
    if (dbeta != nullptr) dbeta[c] += tb;
  }
}

}  // namespace

// ---- launchers ----

void LayerNorm(const Tensor& x, const Tensor& gamma, const Tensor& beta, const Tensor& out,
               const Tensor& mean, const Tensor& rstd, float eps) {
  const int64_t n = x.cols(), rows = x.rows();
  if (rows == 0 || n == 0) return;
  LayerNormKernel<<<rows, RowThreads(n), 0, CurrentStream()>>>(
      x.f32(), gamma.f32(), beta.f32(), out.f32(), mean.f32(), rstd.f32(), eps, n);
  TERN_CUDA_LAUNCH_CHECK("LayerNormKernel");
}

void LayerNormBackward(const Tensor& x, const Tensor& gamma, const Tensor& mean, const Tensor& rstd,
                       const Tensor& dy, const Tensor& dx, const Tensor& dgamma,
                       const Tensor& dbeta, bool accumulate) {
  const int64_t n = x.cols(), rows = x.rows();
  if (rows == 0 || n == 0) return;
  LayerNormBackwardDxKernel<<<rows, RowThreads(n), 0, CurrentStream()>>>(
      x.f32(), gamma.f32(), mean.f32(), rstd.f32(), dy.f32(), dx.f32(), n, accumulate);
  TERN_CUDA_LAUNCH_CHECK("LayerNormBackwardDxKernel");
  if (!dgamma.defined() && !dbeta.defined()) return;
  float* pdg = dgamma.defined() ? dgamma.f32() : nullptr;
  float* pdb = dbeta.defined() ? dbeta.f32() : nullptr;
  const int64_t per = ColumnChunkRows(rows, n), chunks = (rows + per - 1) / per;
  const dim3 grid(static_cast<unsigned>((n + 31) / 32), static_cast<unsigned>(chunks));
  Tensor partial;
  if (chunks > 1) partial = Tensor::Empty({2, chunks, n}, DType::kFloat32, Device::kCuda);
  LayerNormBackwardParamsKernel<<<grid, dim3(32, 32), 0, CurrentStream()>>>(
      x.f32(), mean.f32(), rstd.f32(), dy.f32(), pdg, pdb,
      partial.defined() ? partial.f32() : nullptr, rows, n, per);
  TERN_CUDA_LAUNCH_CHECK("LayerNormBackwardParamsKernel");
  if (!partial.defined()) return;
  LayerNormParamChunksKernel<<<BlocksFor(n), kThreads, 0, CurrentStream()>>>(partial.f32(), pdg,
                                                                             pdb, chunks, n);
  TERN_CUDA_LAUNCH_CHECK("LayerNormParamChunksKernel");
}

}  // namespace tern::cuda
