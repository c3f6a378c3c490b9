// The kernels around cuDNN's RNN call for a whole GRU layer (cudnn_gru.h): Tern's parameters into
// cuDNN's weight space and its gradient back (tiled transposes, one launch for every block of a
// layer), each column's length from the mask, and the padded positions' carry-over on the way out
// and back in. The host reference of the same steps is tensor/cpu/gru_layer.cc.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <type_traits>

#include "common/error.h"
#include "tensor/cuda/cuda_common.h"
#include "tensor/cuda/cudnn_gru.h"

namespace tern::cuda {
namespace {

__device__ inline float ToFloat(float v) { return v; }
__device__ inline float ToFloat(__half v) { return __half2float(v); }
__device__ inline float ToFloat(__nv_bfloat16 v) { return __bfloat162float(v); }
template <typename T>
__device__ inline T FromFloat(float v);
template <>
__device__ inline float FromFloat<float>(float v) {
  return v;
}
template <>
__device__ inline __half FromFloat<__half>(float v) {
  return __float2half_rn(v);
}
template <>
__device__ inline __nv_bfloat16 FromFloat<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}

constexpr int kTile = 32, kTileRows = 8;

// Block (32, 8) per 32 x 32 tile of segment blockIdx.z: space[offset + j cols + k] =
// source[k source_cols + column + j], read along j and written along k through shared memory.
template <typename T>
__global__ void PackKernel(GruSegmentList list, T* space) {
  const GruSegmentArgs& s = list.segment[blockIdx.z];
  const int64_t j0 = static_cast<int64_t>(blockIdx.y) * kTile;
  const int64_t k0 = static_cast<int64_t>(blockIdx.x) * kTile;
  if (j0 >= s.rows || k0 >= s.cols) return;  // the whole block: no barrier is skipped by a part
  __shared__ float tile[kTile][kTile + 1];
  for (int i = threadIdx.y; i < kTile; i += kTileRows) {
    const int64_t k = k0 + i, j = j0 + threadIdx.x;
    if (k < s.cols && j < s.rows)
      tile[i][threadIdx.x] = s.source != nullptr ? s.source[k * s.source_cols + s.column + j] : 0.f;
  }
  __syncthreads();
  for (int i = threadIdx.y; i < kTile; i += kTileRows) {
    const int64_t j = j0 + i, k = k0 + threadIdx.x;
    if (j < s.rows && k < s.cols)
      space[s.offset + j * s.cols + k] = FromFloat<T>(tile[threadIdx.x][i]);
  }
}

// The transpose back, added into the gradient: read along k, written along j.
template <typename T>
__global__ void UnpackKernel(GruSegmentList list, const T* space) {
  const GruSegmentArgs& s = list.segment[blockIdx.z];
  const int64_t j0 = static_cast<int64_t>(blockIdx.y) * kTile;
  const int64_t k0 = static_cast<int64_t>(blockIdx.x) * kTile;
  if (s.grad == nullptr || j0 >= s.rows || k0 >= s.cols) return;
  __shared__ float tile[kTile][kTile + 1];
  for (int i = threadIdx.y; i < kTile; i += kTileRows) {
    const int64_t j = j0 + i, k = k0 + threadIdx.x;
    if (j < s.rows && k < s.cols) tile[i][threadIdx.x] = ToFloat(space[s.offset + j * s.cols + k]);
  }
  __syncthreads();
  for (int i = threadIdx.y; i < kTile; i += kTileRows) {
    const int64_t k = k0 + i, j = j0 + threadIdx.x;
    if (k < s.cols && j < s.rows) s.grad[k * s.source_cols + s.column + j] += tile[threadIdx.x][i];
  }
}

__global__ void LengthsKernel(const float* mask, int64_t len, int64_t batch, int32_t* lengths) {
  TERN_GRID_STRIDE(b, batch) {
    int32_t n = static_cast<int32_t>(len);
    if (mask != nullptr) {
      n = 0;
      for (int64_t t = 0; t < len; ++t) n += mask[t * batch + b] != 0.f;
    }
    lengths[b] = n;
  }
}

template <typename T>
__global__ void FinishKernel(const T* y, const T* hy, const int32_t* lengths, int64_t len,
                             int64_t batch, int64_t d, int64_t width, float* out) {
  TERN_GRID_STRIDE(i, len * batch * width) {
    const int64_t c = i % width, b = (i / width) % batch, t = i / (width * batch);
    const bool carried = hy != nullptr && c < d && t >= lengths[b];
    out[i] = carried ? ToFloat(hy[b * d + c]) : ToFloat(y[i]);
  }
}

// One thread per (column b, feature c), down the positions: reads and writes along c.
template <typename T>
__global__ void PrepareGradKernel(float* dout, const int32_t* lengths, int64_t len, int64_t batch,
                                  int64_t d, int64_t width, T* dy, T* dhy) {
  TERN_GRID_STRIDE(i, batch * width) {
    const int64_t c = i % width, b = i / width;
    const int64_t steps = dhy != nullptr ? lengths[b] : len;
    float carried = 0.f;
    for (int64_t t = 0; t < len; ++t) {
      const int64_t at = (t * batch + b) * width + c;
      float v = dout[at];
      if (t >= steps) {
        carried += v;
        dout[at] = 0.f;
        v = 0.f;
      }
      if (dy != nullptr) dy[at] = FromFloat<T>(v);
    }
    if (dhy != nullptr) {
      const int64_t dir = c / d, j = c % d;
      dhy[(dir * batch + b) * d + j] = FromFloat<T>(dir == 0 ? carried : 0.f);
    }
  }
}

template <typename T>
__global__ void AddInputGradKernel(const T* from, int64_t n, bool accumulate, float* dx) {
  TERN_GRID_STRIDE(i, n) dx[i] = (accumulate ? dx[i] : 0.f) + ToFloat(from[i]);
}

// Calls f with a null pointer of the element type of `type`.
template <typename F>
void WithType(DType type, F&& f) {
  switch (type) {
    case DType::kFloat32:
      f(static_cast<float*>(nullptr));
      return;
    case DType::kBFloat16:
      f(static_cast<__nv_bfloat16*>(nullptr));
      return;
    case DType::kFloat16:
      f(static_cast<__half*>(nullptr));
      return;
    default:
      Fail("cuDNN GRU layer: no data type ", DTypeName(type));
  }
}

dim3 SegmentGrid(const GruSegmentList& list) {
  return dim3(static_cast<unsigned>((list.max_cols + kTile - 1) / kTile),
              static_cast<unsigned>((list.max_rows + kTile - 1) / kTile),
              static_cast<unsigned>(list.count));
}

}  // namespace

void PackGruWeightSpace(const GruSegmentList& list, DType type, void* space) {
  WithType(type, [&](auto* t) {
    using T = std::remove_pointer_t<decltype(t)>;
    PackKernel<T><<<SegmentGrid(list), dim3(kTile, kTileRows), 0, CurrentStream()>>>(
        list, static_cast<T*>(space));
  });
  TERN_CUDA_LAUNCH_CHECK("GRU PackKernel");
}

void UnpackGruWeightSpace(const GruSegmentList& list, DType type, const void* space) {
  WithType(type, [&](auto* t) {
    using T = std::remove_pointer_t<decltype(t)>;
    UnpackKernel<T><<<SegmentGrid(list), dim3(kTile, kTileRows), 0, CurrentStream()>>>(
        list, static_cast<const T*>(space));
  });
  TERN_CUDA_LAUNCH_CHECK("GRU UnpackKernel");
}

void GruSequenceLengths(const float* mask, int64_t len, int64_t batch, int32_t* lengths) {
  LengthsKernel<<<BlocksFor(batch), kThreads, 0, CurrentStream()>>>(mask, len, batch, lengths);
  TERN_CUDA_LAUNCH_CHECK("GRU LengthsKernel");
}

void FinishGruOutput(DType type, const void* y, const void* hy, const int32_t* lengths, int64_t len,
                     int64_t batch, int64_t d, int dirs, float* out) {
  const int64_t width = dirs * d;
  WithType(type, [&](auto* t) {
    using T = std::remove_pointer_t<decltype(t)>;
    FinishKernel<T><<<BlocksFor(len * batch * width), kThreads, 0, CurrentStream()>>>(
        static_cast<const T*>(y), static_cast<const T*>(hy), lengths, len, batch, d, width, out);
  });
  TERN_CUDA_LAUNCH_CHECK("GRU FinishKernel");
}

void PrepareGruOutputGrad(DType type, float* dout, const int32_t* lengths, int64_t len,
                          int64_t batch, int64_t d, int dirs, void* dy, void* dhy) {
  const int64_t width = dirs * d;
  WithType(type, [&](auto* t) {
    using T = std::remove_pointer_t<decltype(t)>;
    PrepareGradKernel<T><<<BlocksFor(batch * width), kThreads, 0, CurrentStream()>>>(
        dout, lengths, len, batch, d, width, static_cast<T*>(dy), static_cast<T*>(dhy));
  });
  TERN_CUDA_LAUNCH_CHECK("GRU PrepareGradKernel");
}

void AddGruInputGrad(DType type, const void* from, int64_t n, bool accumulate, float* dx) {
  WithType(type, [&](auto* t) {
    using T = std::remove_pointer_t<decltype(t)>;
    AddInputGradKernel<T><<<BlocksFor(n), kThreads, 0, CurrentStream()>>>(
        static_cast<const T*>(from), n, accumulate, dx);
  });
  TERN_CUDA_LAUNCH_CHECK("GRU AddInputGradKernel");
}

}  // namespace tern::cuda
