// The fused output pass on a CUDA GPU (see inference/search/fused_top_k.h). Two kernels:
//  1. PartialTopK, grid (splits, rows): each block sweeps its slice of a row once, coalesced. A
//     thread keeps its k best (biased logit, column) pairs sorted in registers and its own running
//     (max, rescaled sum); the block then merges the threads' lists (k rounds of a block-wide
//     argmax over the lists' heads) and their (max, sum) pairs, and writes one partial result.
//  2. MergeTopK, one block per row: the same merge over the row's splits * k partial candidates.
// Splitting a row over several blocks keeps the GPU busy when there are few rows (beam 1, batch 1)
// and long ones (a 64k vocabulary). Order: higher logit first, ties to the lower column, as
// FusedRowTopK on the CPU; the sum's order differs, so lse agrees with the CPU to rounding.
#include <cuda_runtime.h>

#include <algorithm>
#include <climits>
#include <cmath>

#include "common/error.h"
#include "inference/search/fused_top_k.h"
#include "tensor/cuda/cuda_common.h"

namespace tern::inference::gpu_impl {
namespace {

constexpr int kPartialThreads = 256;
constexpr int kMergeThreads = 128;
constexpr int kEmpty = INT_MAX;  // the column of an empty slot: worse than any real column

__device__ __forceinline__ bool Better(float v1, int c1, float v2, int c2) {
  return v1 > v2 || (v1 == v2 && c1 < c2);
}

// A thread's k best, best first, in registers (every index is a compile-time constant).
template <int K>
struct TopList {
  float v[K];
  int c[K];
  __device__ void Init() {
#pragma unroll
    for (int j = 0; j < K; ++j) {
      v[j] = -INFINITY;
      c[j] = kEmpty;
    }
  }
  __device__ void Push(float x, int col) {
    if (!Better(x, col, v[K - 1], c[K - 1])) return;
    v[K - 1] = x;
    c[K - 1] = col;
#pragma unroll
    for (int j = K - 1; j > 0; --j) {
      if (Better(v[j], c[j], v[j - 1], c[j - 1])) {
        const float tv = v[j];
        v[j] = v[j - 1];
        v[j - 1] = tv;
        const int tc = c[j];
        c[j] = c[j - 1];
        c[j - 1] = tc;
      }
    }
  }
  __device__ void PopFront() {
#pragma unroll
    for (int j = 0; j + 1 < K; ++j) {
      v[j] = v[j + 1];
      c[j] = c[j + 1];
    }
    v[K - 1] = -INFINITY;
    c[K - 1] = kEmpty;
  }
};

// (max, sum of exp(x - max)) pairs combine into one; an empty side (max -inf) adds nothing.
__device__ __forceinline__ void Combine(float& m, float& s, float m2, float s2) {
  if (m2 == -INFINITY) return;
  if (m == -INFINITY) {
    m = m2;
    s = s2;
    return;
  }
  const float top = fmaxf(m, m2);
  s = s * expf(m - top) + s2 * expf(m2 - top);
  m = top;
}

__device__ __forceinline__ void Accumulate(float& m, float& s, float x) {
  if (x > m) {
    s = s * expf(m - x) + 1.f;
    m = x;
  } else if (x > -INFINITY) {  // -inf adds 0; before any finite value, expf(-inf + inf) is NaN
    s += expf(x - m);
  }
}

struct Candidate {
  float v;
  int c;
};

// The block's best head among the threads' lists (every thread gets it).
__device__ Candidate BlockBest(Candidate mine, Candidate* warp_best) {
  const unsigned full = 0xffffffffu;
  for (int offset = 16; offset > 0; offset /= 2) {
    const float ov = __shfl_down_sync(full, mine.v, offset);
    const int oc = __shfl_down_sync(full, mine.c, offset);
    if (Better(ov, oc, mine.v, mine.c)) mine = {ov, oc};
  }
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  if (lane == 0) warp_best[warp] = mine;
  __syncthreads();
  Candidate best = warp_best[0];
  for (int w = 1; w < warps; ++w) {
    if (Better(warp_best[w].v, warp_best[w].c, best.v, best.c)) best = warp_best[w];
  }
  __syncthreads();  // warp_best is reused by the next round
  return best;
}

// Merges the threads' lists into the block's k best, written by thread 0 to out_v/out_c (empty
// slots as (-inf, kEmpty)). Columns are distinct, so the thread holding the winner is the one
// whose head has its column.
template <int K>
__device__ void MergeLists(TopList<K>& list, int k, float* out_v, int* out_c) {
  __shared__ Candidate warp_best[32];
  for (int r = 0; r < k; ++r) {
    const Candidate best = BlockBest({list.v[0], list.c[0]}, warp_best);
    if (threadIdx.x == 0) {
      out_v[r] = best.v;
      out_c[r] = best.c;
    }
    if (best.c != kEmpty && list.c[0] == best.c) list.PopFront();
  }
}

// The block's combined (max, sum), valid in thread 0.
__device__ void MergeSums(float& m, float& s) {
  __shared__ float warp_m[32], warp_s[32];
  const unsigned full = 0xffffffffu;
  for (int offset = 16; offset > 0; offset /= 2) {
    Combine(m, s, __shfl_down_sync(full, m, offset), __shfl_down_sync(full, s, offset));
  }
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  if (lane == 0) {
    warp_m[warp] = m;
    warp_s[warp] = s;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < warps; ++w) Combine(m, s, warp_m[w], warp_s[w]);
  }
}

template <int K>
__global__ void PartialTopK(const float* __restrict__ logits, int64_t n,
                            const float* __restrict__ bias, int exclude0, int exclude1,
                            bool normalize, int64_t chunk, int k, float* part_values,
                            int* part_columns, float* part_max, float* part_sum) {
  const int64_t row = blockIdx.y, split = blockIdx.x;
  const float* x = logits + row * n;
  const int64_t end = min(n, (split + 1) * chunk);
  TopList<K> list;
  list.Init();
  float m = -INFINITY, s = 0.f;
  for (int64_t c = split * chunk + threadIdx.x; c < end; c += blockDim.x) {
    const float v = x[c] + (bias ? bias[c] : 0.f);
    if (normalize) Accumulate(m, s, v);
    if (c != exclude0 && c != exclude1) list.Push(v, static_cast<int>(c));
  }
  const int64_t slot = row * gridDim.x + split;
  MergeLists(list, k, part_values + slot * k, part_columns + slot * k);
  if (normalize) {
    MergeSums(m, s);
    if (threadIdx.x == 0) {
      part_max[slot] = m;
      part_sum[slot] = s;
    }
  }
}

template <int K>
__global__ void MergeTopK(int splits, int k, bool normalize, const float* part_values,
                          const int* part_columns, const float* part_max, const float* part_sum,
                          float* values, int* columns, float* lse) {
  const int64_t row = blockIdx.x;
  const int64_t count = static_cast<int64_t>(splits) * k;
  TopList<K> list;
  list.Init();
  for (int64_t i = threadIdx.x; i < count; i += blockDim.x) {
    list.Push(part_values[row * count + i], part_columns[row * count + i]);
  }
  float* out_v = values + row * k;
  int* out_c = columns + row * k;
  MergeLists(list, k, out_v, out_c);
  __syncthreads();
  if (threadIdx.x < k && out_c[threadIdx.x] == kEmpty) out_c[threadIdx.x] = -1;
  float m = -INFINITY, s = 0.f;
  if (normalize) {
    for (int i = threadIdx.x; i < splits; i += blockDim.x) {
      Combine(m, s, part_max[row * splits + i], part_sum[row * splits + i]);
    }
    MergeSums(m, s);
  }
  if (threadIdx.x == 0) lse[row] = normalize ? m + logf(s) : 0.f;
}

template <int K>
void Launch(const float* logits, int64_t rows, int64_t n, const float* bias, int32_t exclude0,
            int32_t exclude1, int k, bool normalize, int splits, float* part_values,
            int32_t* part_columns, float* part_max, float* part_sum, float* values,
            int32_t* columns, float* lse) {
  cudaStream_t stream = cuda::CurrentStream();
  const int64_t chunk = (n + splits - 1) / splits;
  PartialTopK<K><<<dim3(splits, static_cast<unsigned>(rows)), kPartialThreads, 0, stream>>>(
      logits, n, bias, exclude0, exclude1, normalize, chunk, k, part_values, part_columns, part_max,
      part_sum);
  TERN_CUDA_LAUNCH_CHECK("PartialTopK");
  MergeTopK<K><<<static_cast<unsigned>(rows), kMergeThreads, 0, stream>>>(
      splits, k, normalize, part_values, part_columns, part_max, part_sum, values, columns, lse);
  TERN_CUDA_LAUNCH_CHECK("MergeTopK");
}

int MultiProcessors() {
  static const int count = [] {
    int device = 0, value = 0;
    TERN_CUDA_CHECK(cudaGetDevice(&device));
    TERN_CUDA_CHECK(cudaDeviceGetAttribute(&value, cudaDevAttrMultiProcessorCount, device));
    return value;
  }();
  return count;
}

}  // namespace

int Splits(int64_t rows, int64_t n) {
  // About two blocks per multiprocessor in all, each with at least 2048 columns to sweep.
  const int64_t want = (2 * MultiProcessors() + rows - 1) / rows;
  const int64_t most = (n + 2047) / 2048;
  return static_cast<int>(std::max<int64_t>(1, std::min(want, most)));
}

void FusedTopK(const float* logits, int64_t rows, int64_t n, const float* bias, int32_t exclude0,
               int32_t exclude1, int k, bool normalize, int splits, float* part_values,
               int32_t* part_columns, float* part_max, float* part_sum, float* values,
               int32_t* columns, float* lse) {
  if (rows == 0) return;
  CHECK(rows <= 65535) << "FusedTopK on the GPU: at most 65535 rows per call, got " << rows;
  auto launch = k <= 1   ? Launch<1>
                : k <= 2 ? Launch<2>
                : k <= 4 ? Launch<4>
                : k <= 8 ? Launch<8>
                         : Launch<16>;
  launch(logits, rows, n, bias, exclude0, exclude1, k, normalize, splits, part_values, part_columns,
         part_max, part_sum, values, columns, lse);
}

void Synchronize() { cuda::Synchronize(); }

}  // namespace tern::inference::gpu_impl
