// Elementwise kernels, bias, column sums, activations and the sum of squares (see
// tensor/cpu/elementwise.cc for the contracts these match).
#include <glog/logging.h>

#include <algorithm>

#include "tensor/allocator.h"
#include "tensor/clip_factor.h"
#include "tensor/cuda/cuda_common.h"
#include "tensor/cuda/cuda_kernels.h"
#include "tensor/cuda/reduce.cuh"

namespace tern::cuda {
namespace {

constexpr float kGeluC = 0.7978845608028654f;  // sqrt(2/pi)

// ---- kernels ----

__global__ void FillKernel(float* x, float value, int64_t n) {
  TERN_GRID_STRIDE(i, n) x[i] = value;
}

// out = alpha * a + beta * b; with beta == 0, b is not read (0 * NaN stays out of it).
__global__ void AddKernel(const float* a, const float* b, float* out, float alpha, float beta,
                          int64_t n) {
  if (beta == 0.f) {
    TERN_GRID_STRIDE(i, n) out[i] = alpha * a[i];
  } else {
    TERN_GRID_STRIDE(i, n) out[i] = alpha * a[i] + beta * b[i];
  }
}

__global__ void MulKernel(const float* a, const float* b, float* out, bool accumulate, int64_t n) {
  if (accumulate) {
    TERN_GRID_STRIDE(i, n) out[i] += a[i] * b[i];
  } else {
    TERN_GRID_STRIDE(i, n) out[i] = a[i] * b[i];
  }
}

// x (rows, cols) += bias (cols).
__global__ void AddBiasKernel(float* x, const float* bias, int64_t cols, int64_t n) {
  TERN_GRID_STRIDE(i, n) x[i] += bias[i % cols];
}

// x (rows, cols) /= divisors (rows), row by row.
__global__ void DivideRowsKernel(float* x, const float* divisors, int64_t cols, int64_t n) {
  TERN_GRID_STRIDE(i, n) x[i] /= divisors[i / cols];
}

// Σ over rows [blockIdx.y * per, + per) of x (rows, cols), one column per threadIdx.x;
// threadIdx.y strides the chunk's rows and the 32 partial sums are added in a fixed order, so the
// result does not depend on scheduling. With `partial` (chunks, cols) each chunk writes its sum
// there (SumChunksKernel adds them); without, the one chunk writes out = beta * out + sum.
__global__ void SumRowsKernel(const float* x, float* out, float* partial, float beta, int64_t rows,
                              int64_t cols, int64_t per) {
  __shared__ float part[32][33];
  const int64_t c = blockIdx.x * 32 + threadIdx.x;
  const int64_t begin = blockIdx.y * per, end = begin + per < rows ? begin + per : rows;
  float sum = 0.f;
  if (c < cols) {
    for (int64_t r = begin + threadIdx.y; r < end; r += 32) sum += x[r * cols + c];
  }
  part[threadIdx.y][threadIdx.x] = sum;
  __syncthreads();
  if (threadIdx.y == 0 && c < cols) {
    float total = 0.f;
    for (int i = 0; i < 32; ++i) total += part[i][threadIdx.x];
    if (partial != nullptr) {
      partial[blockIdx.y * cols + c] = total;
    } else {
      out[c] = beta == 0.f ? total : beta * out[c] + total;
    }
  }
}

// out (cols) = beta * out + Σ_chunk partial (chunks, cols), in chunk order.
__global__ void SumChunksKernel(const float* partial, float* out, float beta, int64_t chunks,
                                int64_t cols) {
  TERN_GRID_STRIDE(c, cols) {
    float total = 0.f;
    for (int64_t k = 0; k < chunks; ++k) total += partial[k * cols + c];
    out[c] = beta == 0.f ? total : beta * out[c] + total;
  }
}

__global__ void UnaryKernel(int op, const float* x, float* y, int64_t n) {
  TERN_GRID_STRIDE(i, n) {
    const float v = x[i];
    switch (op) {
      case kRelu:
        y[i] = v > 0.f ? v : 0.f;
        break;
      case kTanh:
        y[i] = tanhf(v);
        break;
      case kSigmoid:
        y[i] = 1.f / (1.f + expf(-v));
        break;
      case kGelu:
        y[i] = 0.5f * v * (1.f + tanhf(kGeluC * (v + 0.044715f * v * v * v)));
        break;
      case kSwish:
        y[i] = v / (1.f + expf(-v));
        break;
    }
  }
}

// dx += dy * f'(x) (dx = without `accumulate`), written in terms of y = f(x); for GELU and swish
// `y` holds the input x.
__global__ void UnaryBackwardKernel(int op, const float* y, const float* dy, float* dx, int64_t n,
                                    bool accumulate) {
  TERN_GRID_STRIDE(i, n) {
    float d = 0.f;
    switch (op) {
      case kRelu:
        d = y[i] > 0.f ? dy[i] : 0.f;
        break;
      case kTanh:
        d = dy[i] * (1.f - y[i] * y[i]);
        break;
      case kSigmoid:
        d = dy[i] * y[i] * (1.f - y[i]);
        break;
      case kGelu: {
        const float v = y[i], t = tanhf(kGeluC * (v + 0.044715f * v * v * v));
        const float du = kGeluC * (1.f + 3.f * 0.044715f * v * v);
        d = dy[i] * (0.5f * (1.f + t) + 0.5f * v * (1.f - t * t) * du);
        break;
      }
      case kSwish: {
        const float v = y[i], s = 1.f / (1.f + expf(-v));
        d = dy[i] * s * (1.f + v * (1.f - s));
        break;
      }
    }
    dx[i] = accumulate ? dx[i] + d : d;
  }
}

// partial[block] = Σ x² over the block's grid-stride share (float per thread, as the CPU sums
// in float within a block of 4096).
__global__ void SumSquaresKernel(const float* x, int64_t n, double* partial) {
  float sum = 0.f;
  TERN_GRID_STRIDE(i, n) sum += x[i] * x[i];
  sum = BlockSum(sum);
  if (threadIdx.x == 0) partial[blockIdx.x] = sum;
}

// *out = Σ partial[0..count) (as double or rounded to float), in a fixed order, by one block of
// 32 threads.
template <typename T>
__global__ void SumPartialsKernel(const double* partial, int count, T* out) {
  double sum = 0;
  for (int i = threadIdx.x; i < count; i += 32) sum += partial[i];
  for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, offset);
  if (threadIdx.x == 0) *out = static_cast<T>(sum);
}

// x *= ClipFactor(*squared_norm, clip); every thread reads the factor, so nothing is written when
// it is 1.
__global__ void ClipToNormKernel(float* x, const float* squared_norm, float clip, int64_t n) {
  const float s = ClipFactor(*squared_norm, clip);
  if (s == 1.f) return;
  TERN_GRID_STRIDE(i, n) x[i] *= s;
}

int SumSquaresBlocks(int64_t n) {
  return static_cast<int>(std::max<int64_t>(1, std::min<int64_t>((n + 4095) / 4096, 1024)));
}

// Σ x² into *out on the current stream, through `blocks` double partials from the pool (given
// back in stream order: no cudaMalloc once warm, and nothing here waits for the GPU).
template <typename T>
void QueueSumSquares(const Tensor& x, T* out) {
  const int64_t n = x.numel();
  const int blocks = SumSquaresBlocks(n);
  Allocator* allocator = AllocatorFor(Device::kCuda);
  double* partial = static_cast<double*>(allocator->Allocate(blocks * sizeof(double)));
  SumSquaresKernel<<<blocks, kThreads, 0, CurrentStream()>>>(x.f32(), n, partial);
  TERN_CUDA_LAUNCH_CHECK("SumSquaresKernel");
  SumPartialsKernel<T><<<1, 32, 0, CurrentStream()>>>(partial, blocks, out);
  TERN_CUDA_LAUNCH_CHECK("SumPartialsKernel");
  allocator->Free(partial);
}

}  // namespace

// ---- launchers ----

void Fill(const Tensor& x, float value) {
  float* p = x.f32();
  const int64_t n = x.numel();
  if (n == 0) return;
  if (value == 0.f) {
    TERN_CUDA_CHECK(cudaMemsetAsync(p, 0, x.bytes(), CurrentStream()));
    return;
  }
  FillKernel<<<BlocksFor(n), kThreads, 0, CurrentStream()>>>(p, value, n);
  TERN_CUDA_LAUNCH_CHECK("FillKernel");
}

void CopyTensor(const Tensor& src, const Tensor& dst) {
  if (src.bytes() == 0) return;
  TERN_CUDA_CHECK(cudaMemcpyAsync(dst.raw(), src.raw(), src.bytes(), cudaMemcpyDeviceToDevice,
                                  CurrentStream()));
}

void Add(const Tensor& a, const Tensor& b, const Tensor& out, float alpha, float beta) {
  const int64_t n = out.numel();
  if (n == 0) return;
  AddKernel<<<BlocksFor(n), kThreads, 0, CurrentStream()>>>(a.f32(), b.f32(), out.f32(), alpha,
                                                            beta, n);
  TERN_CUDA_LAUNCH_CHECK("AddKernel");
}

void Mul(const Tensor& a, const Tensor& b, const Tensor& out, bool accumulate) {
  const int64_t n = out.numel();
  if (n == 0) return;
  MulKernel<<<BlocksFor(n), kThreads, 0, CurrentStream()>>>(a.f32(), b.f32(), out.f32(), accumulate,
                                                            n);
  TERN_CUDA_LAUNCH_CHECK("MulKernel");
}

void AddBias(const Tensor& x, const Tensor& bias) {
  const int64_t n = x.numel();
  if (n == 0) return;
  AddBiasKernel<<<BlocksFor(n), kThreads, 0, CurrentStream()>>>(x.f32(), bias.f32(), x.cols(), n);
  TERN_CUDA_LAUNCH_CHECK("AddBiasKernel");
}

void DivideRows(const Tensor& x, const Tensor& divisors) {
  const int64_t n = x.numel();
  if (n == 0) return;
  DivideRowsKernel<<<BlocksFor(n), kThreads, 0, CurrentStream()>>>(x.f32(), divisors.f32(),
                                                                   x.cols(), n);
  TERN_CUDA_LAUNCH_CHECK("DivideRowsKernel");
}

void SumRows(const Tensor& x, const Tensor& out, float beta) {
  const int64_t cols = x.cols(), rows = x.rows();
  if (cols == 0) return;
  const int64_t per = ColumnChunkRows(rows, cols),
                chunks = std::max<int64_t>(1, (rows + per - 1) / per);
  const dim3 grid(static_cast<unsigned>((cols + 31) / 32), static_cast<unsigned>(chunks));
  Tensor partial;
  if (chunks > 1) partial = Tensor::Empty({chunks, cols}, DType::kFloat32, Device::kCuda);
  SumRowsKernel<<<grid, dim3(32, 32), 0, CurrentStream()>>>(
      x.f32(), out.f32(), partial.defined() ? partial.f32() : nullptr, beta, rows, cols, per);
  TERN_CUDA_LAUNCH_CHECK("SumRowsKernel");
  if (!partial.defined()) return;
  SumChunksKernel<<<BlocksFor(cols), kThreads, 0, CurrentStream()>>>(partial.f32(), out.f32(), beta,
                                                                     chunks, cols);
  TERN_CUDA_LAUNCH_CHECK("SumChunksKernel");
}

void Unary(int op, const Tensor& x, const Tensor& out) {
  CHECK(op >= kRelu && op <= kSwish) << "unknown unary op " << op;
  const int64_t n = x.numel();
  if (n == 0) return;
  UnaryKernel<<<BlocksFor(n), kThreads, 0, CurrentStream()>>>(op, x.f32(), out.f32(), n);
  TERN_CUDA_LAUNCH_CHECK("UnaryKernel");
}

void UnaryBackward(int op, const Tensor& y, const Tensor& dy, const Tensor& dx, bool accumulate) {
  CHECK(op >= kRelu && op <= kSwish) << "unknown unary op " << op;
  const int64_t n = y.numel();
  if (n == 0) return;
  UnaryBackwardKernel<<<BlocksFor(n), kThreads, 0, CurrentStream()>>>(op, y.f32(), dy.f32(),
                                                                      dx.f32(), n, accumulate);
  TERN_CUDA_LAUNCH_CHECK("UnaryBackwardKernel");
}

void SumSquaresTo(const Tensor& x, const Tensor& out) { QueueSumSquares(x, out.f32()); }

void ClipToNorm(const Tensor& x, const Tensor& squared_norm, float clip_norm) {
  const int64_t n = x.numel();
  if (n == 0) return;
  ClipToNormKernel<<<BlocksFor(n), kThreads, 0, CurrentStream()>>>(x.f32(), squared_norm.f32(),
                                                                   clip_norm, n);
  TERN_CUDA_LAUNCH_CHECK("ClipToNormKernel");
}

void SumSquares(const Tensor& x, double* out) {
  if (x.numel() == 0) {
    *out = 0;
    return;
  }
  Allocator* allocator = AllocatorFor(Device::kCuda);
  double* total = static_cast<double*>(allocator->Allocate(sizeof(double)));
  QueueSumSquares(x, total);
  TERN_CUDA_CHECK(
      cudaMemcpyAsync(out, total, sizeof(double), cudaMemcpyDeviceToHost, CurrentStream()));
  Synchronize();
  allocator->Free(total);
}

}  // namespace tern::cuda
