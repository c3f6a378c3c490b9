// Warp and block reductions (sum, max) for kernels where one block reduces one row. Every thread
// of the block must call the block reductions; all of them get the result.
#pragma once

#include <cuda_runtime.h>

namespace tern::cuda {

__device__ inline float WarpSum(float v) {
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

__device__ inline float WarpMax(float v) {
  for (int offset = 16; offset > 0; offset /= 2)
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

// REQUIRES: blockDim.x a multiple of 32, at most 1024.
template <bool kMax>
__device__ inline float BlockReduce(float v) {
  __shared__ float partial[32];
  __shared__ float result;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  v = kMax ? WarpMax(v) : WarpSum(v);
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  if (warp == 0) {
    const int warps = blockDim.x / 32;
    float w = lane < warps ? partial[lane] : (kMax ? -INFINITY : 0.f);
    w = kMax ? WarpMax(w) : WarpSum(w);
    if (lane == 0) result = w;
  }
  __syncthreads();
  float out = result;
  __syncthreads();  // the shared slots may be reused by the next reduction
  return out;
}

__device__ inline float BlockSum(float v) { return BlockReduce<false>(v); }
__device__ inline float BlockMax(float v) { return BlockReduce<true>(v); }

}  // namespace tern::cuda
