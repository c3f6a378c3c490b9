// Attention of few queries in one launch (KernelTable::attend): a decoder step's self- and
// cross-attention, which as batched products, a masked softmax and a second product took three
// launches for a few microseconds of work each. One block per query row; each warp takes 32 keys
// at a time, a key per lane, and keeps a running maximum with its sum and weighted values
// rescaled to it (so no Tk-sized buffer), and the warps' partial results are merged at the end.
// Semantics as tensor/cpu/attend_row.cc: masked keys get no weight, a query with none left gets
// zeros.
#include "tensor/cuda/cuda_common.h"
#include "tensor/cuda/cuda_kernels.h"
#include "tensor/cuda/reduce.cuh"

namespace tern::cuda {
namespace {

constexpr int kWarps = 4;
constexpr int kMaxColumnsPerLane = 8;  // dk <= 32 * 8 = kAttendMaxHeadWidth

// q . key over dk columns; q from shared memory (every lane reads the same word: a broadcast).
template <bool kVector>
__device__ float Dot(const float* q, const float* key, int64_t dk) {
  float sum = 0.f;
  if (kVector) {  // dk % 4 == 0 and 16-byte aligned rows
    const float4* k4 = reinterpret_cast<const float4*>(key);
    const float4* q4 = reinterpret_cast<const float4*>(q);
    for (int64_t j = 0; j < dk / 4; ++j) {
      const float4 a = q4[j], b = __ldg(k4 + j);
      sum += a.x * b.x + a.y * b.y + a.z * b.z + a.w * b.w;
    }
  } else {
    for (int64_t j = 0; j < dk; ++j) sum += q[j] * __ldg(key + j);
  }
  return sum;
}

// grid: B * H * Tq blocks, one per query row (b, h, i); 32 * kWarps threads.
template <bool kVector>
__global__ void AttendKernel(const float* q, const float* k, const float* v, const float* mask,
                             const int32_t* kv_rows, int64_t held, bool causal, float scale,
                             int64_t heads, int64_t tq, int64_t tk, int64_t dk, float* out,
                             DeviceErrorReport* error) {
  __shared__ __align__(16) float query[32 * kMaxColumnsPerLane];
  __shared__ float warp_max[kWarps], warp_sum[kWarps];
  __shared__ float warp_acc[kWarps][32 * kMaxColumnsPerLane];
  const int64_t row = blockIdx.x;
  const int64_t i = row % tq, hi = (row / tq) % heads, bi = row / (tq * heads);
  const int64_t s = kv_rows != nullptr ? kv_rows[bi] : bi;
  if (s < 0 || s >= held) {
    if (threadIdx.x == 0)
      ReportBadIndex(error, kGatherId, static_cast<int>(s), static_cast<int>(held));
    return;
  }
  const float* keys = k + (s * heads + hi) * tk * dk;
  const float* values = v + (s * heads + hi) * tk * dk;
  const float* m = mask != nullptr ? mask + s * tk : nullptr;
  const int64_t limit = causal ? min(tk, i + 1) : tk;
  for (int64_t j = threadIdx.x; j < dk; j += blockDim.x) query[j] = q[row * dk + j];
  __syncthreads();

  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  float run_max = -INFINITY, run_sum = 0.f, acc[kMaxColumnsPerLane];
#pragma unroll
  for (int c = 0; c < kMaxColumnsPerLane; ++c) acc[c] = 0.f;
  for (int64_t base = warp * 32; base < limit; base += kWarps * 32) {
    const int64_t t = base + lane;
    float score = -INFINITY;
    if (t < limit && (m == nullptr || m[t] != 0.f)) {
      score = Dot<kVector>(query, keys + t * dk, dk) * scale;
    }
    const float chunk_max = WarpMax(score);
    if (chunk_max == -INFINITY) continue;  // every key of the chunk masked (the whole warp)
    const float new_max = fmaxf(run_max, chunk_max);
    const float rescale = expf(run_max - new_max);  // 0 while run_max is -inf
    const float weight = expf(score - new_max);     // 0 for a masked key
    run_sum = run_sum * rescale + WarpSum(weight);
    run_max = new_max;
#pragma unroll
    for (int c = 0; c < kMaxColumnsPerLane; ++c) acc[c] *= rescale;
    const int64_t keys_here = limit - base < 32 ? limit - base : 32;
    for (int u = 0; u < keys_here; ++u) {
      const float w = __shfl_sync(0xffffffffu, weight, u);
      const float* value = values + (base + u) * dk;
#pragma unroll
      for (int c = 0; c < kMaxColumnsPerLane; ++c) {
        const int64_t j = lane + 32 * c;
        if (j < dk) acc[c] += w * __ldg(value + j);
      }
    }
  }
  if (lane == 0) {
    warp_max[warp] = run_max;
    warp_sum[warp] = run_sum;
  }
#pragma unroll
  for (int c = 0; c < kMaxColumnsPerLane; ++c) {
    const int64_t j = lane + 32 * c;
    if (j < dk) warp_acc[warp][j] = acc[c];
  }
  __syncthreads();
  float best = -INFINITY;
  for (int w = 0; w < kWarps; ++w) best = fmaxf(best, warp_max[w]);
  float* o = out + ((bi * tq + i) * heads + hi) * dk;
  if (best == -INFINITY) {  // no key left: zeros, as the CPU gives
    for (int64_t j = threadIdx.x; j < dk; j += blockDim.x) o[j] = 0.f;
    return;
  }
  float factor[kWarps], total = 0.f;
  for (int w = 0; w < kWarps; ++w) {
    factor[w] = warp_max[w] == -INFINITY ? 0.f : expf(warp_max[w] - best);
    total += warp_sum[w] * factor[w];
  }
  const float inv = 1.f / total;
  for (int64_t j = threadIdx.x; j < dk; j += blockDim.x) {
    float sum = 0.f;
    for (int w = 0; w < kWarps; ++w) sum += warp_acc[w][j] * factor[w];
    o[j] = sum * inv;
  }
}

bool Aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

}  // namespace

void Attend(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& key_mask,
            const Tensor& kv_rows, bool causal, float scale, const Tensor& out) {
  const int64_t heads = q.dim(1), tq = q.dim(2), dk = q.dim(3), tk = k.dim(2);
  const int64_t rows = q.dim(0) * heads * tq;
  const float* mask = key_mask.defined() ? key_mask.f32() : nullptr;
  const int32_t* map = kv_rows.defined() ? kv_rows.i32() : nullptr;
  const bool vector = dk % 4 == 0 && Aligned16(k.f32());  // q is read from shared memory
  auto kernel = vector ? &AttendKernel<true> : &AttendKernel<false>;
  kernel<<<static_cast<unsigned>(rows), 32 * kWarps, 0, CurrentStream()>>>(
      q.f32(), k.f32(), v.f32(), mask, map, k.dim(0), causal, scale, heads, tq, tk, dk, out.f32(),
      DeviceErrorSlot());
  TERN_CUDA_LAUNCH_CHECK("AttendKernel");
}

}  // namespace tern::cuda
