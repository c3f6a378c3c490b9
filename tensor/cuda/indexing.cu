// Row gather/scatter (embeddings), the (0,2,1,3) permutation of attention heads, and dropout
// masks from the same counter-based SplitMix64 generator as tensor/cpu/indexing.cc, so a seed
// gives the same mask on either device.
#include "tensor/cuda/cuda_common.h"
#include "tensor/cuda/cuda_kernels.h"

namespace tern::cuda {
namespace {

__host__ __device__ inline uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// ---- kernels ----

// out (count, d) = scale * table (vocab, d) [ids (count)]. A bad id is reported, its row zeroed.
__global__ void GatherRowsKernel(const float* table, const int32_t* ids, float* out, float scale,
                                 int64_t d, int64_t vocab, int64_t total,
                                 DeviceErrorReport* error) {
  TERN_GRID_STRIDE(i, total) {
    const int64_t r = i / d, c = i % d;
    const int32_t id = ids[r];
    if (id < 0 || id >= vocab) {
      ReportBadIndex(error, kGatherId, id, static_cast<int>(vocab));
      out[i] = 0.f;
      continue;
    }
    out[i] = scale * table[static_cast<int64_t>(id) * d + c];
  }
}

// dtable[ids] += scale * dout (count, d); repeated ids add up (atomically).
__global__ void ScatterAddRowsKernel(const float* dout, const int32_t* ids, float* dtable,
                                     float scale, int64_t d, int64_t vocab, int64_t total,
                                     DeviceErrorReport* error) {
  TERN_GRID_STRIDE(i, total) {
    const int64_t r = i / d, c = i % d;
    const int32_t id = ids[r];
    if (id < 0 || id >= vocab) {
      ReportBadIndex(error, kScatterId, id, static_cast<int>(vocab));
      continue;
    }
    atomicAdd(dtable + static_cast<int64_t>(id) * d + c, scale * dout[i]);
  }
}

// in (a, b, c, d) -> out (a, c, b, d), indexed by the output element. V: float or float4 (d
// counted in V's); I: the index type, 32-bit where the tensor allows (64-bit divisions made this
// a third of the bandwidth).
template <typename V, typename I>
__global__ void Permute0213Kernel(const V* in, V* out, I b, I c, I d, bool accumulate, I total) {
  for (I o = blockIdx.x * blockDim.x + threadIdx.x; o < total;
       o += static_cast<I>(blockDim.x) * gridDim.x) {
    const I id = o % d;
    I rest = o / d;
    const I ib = rest % b;
    rest /= b;
    const I ic = rest % c;
    const I ia = rest / c;
    const V v = in[((ia * b + ib) * c + ic) * d + id];
    if (accumulate) {
      V w = out[o];
      if constexpr (sizeof(V) == sizeof(float4)) {
        w.x += v.x;
        w.y += v.y;
        w.z += v.z;
        w.w += v.w;
      } else {
        w += v;
      }
      out[o] = w;
    } else {
      out[o] = v;
    }
  }
}

template <typename V, typename I>
void LaunchPermute0213(const float* in, float* out, int64_t b, int64_t c, int64_t d,
                       bool accumulate, int64_t total) {
  Permute0213Kernel<V, I><<<BlocksFor(total), kThreads, 0, CurrentStream()>>>(
      reinterpret_cast<const V*>(in), reinterpret_cast<V*>(out), static_cast<I>(b),
      static_cast<I>(c), static_cast<I>(d), accumulate, static_cast<I>(total));
  TERN_CUDA_LAUNCH_CHECK("Permute0213Kernel");
}

// out (rows, a, t1, c) indexed by its element; see GatherAppend in tensor/ops.h.
__global__ void GatherAppendKernel(const float* past, const int32_t* ids, int64_t past_rows,
                                   int64_t t0, int64_t skip, const float* next, float* out,
                                   int64_t a, int64_t t1, int64_t c, int64_t total,
                                   DeviceErrorReport* error) {
  TERN_GRID_STRIDE(o, total) {
    const int64_t ic = o % c;
    int64_t rest = o / c;
    const int64_t t = rest % t1;
    rest /= t1;  // r * a + h
    const int64_t h = rest % a, r = rest / a;
    const int64_t kept = t0 - skip;
    float v = 0.f;
    if (t < kept) {
      const int64_t from = ids != nullptr ? ids[r] : r;
      if (from >= past_rows) {
        ReportBadIndex(error, kGatherId, static_cast<int>(from), static_cast<int>(past_rows));
      } else if (from >= 0) {
        v = past[((from * a + h) * t0 + skip + t) * c + ic];
      }
    } else if (t == kept && next != nullptr) {
      v = next[rest * c + ic];
    }
    out[o] = v;
  }
}

__device__ inline float DropoutValue(int64_t i, float value, uint64_t threshold, uint64_t key) {
  return (SplitMix64(key ^ static_cast<uint64_t>(i)) >> 32) < threshold ? value : 0.f;
}

__global__ void DropoutMaskKernel(float* mask, float value, uint64_t threshold, uint64_t key,
                                  int64_t n) {
  TERN_GRID_STRIDE(i, n) { mask[i] = DropoutValue(i, value, threshold, key); }
}

// out = base + x * the mask's element i, made here (the mask is never stored); base may be null.
__global__ void DropoutKernel(const float* x, const float* base, float* out, float value,
                              uint64_t threshold, uint64_t key, int64_t n) {
  TERN_GRID_STRIDE(i, n) {
    const float y = x[i] * DropoutValue(i, value, threshold, key);
    out[i] = base != nullptr ? __fadd_rn(base[i], y) : y;
  }
}

}  // namespace

// ---- launchers ----

void GatherRows(const Tensor& table, const Tensor& ids, const Tensor& out, float scale) {
  const int64_t d = table.cols(), total = ids.numel() * d;
  if (total == 0) return;
  GatherRowsKernel<<<BlocksFor(total), kThreads, 0, CurrentStream()>>>(
      table.f32(), ids.i32(), out.f32(), scale, d, table.rows(), total, DeviceErrorSlot());
  TERN_CUDA_LAUNCH_CHECK("GatherRowsKernel");
}

void GatherAppend(const Tensor& past, const Tensor& ids, int64_t skip, const Tensor& next,
                  const Tensor& out) {
  const int64_t total = out.numel();
  if (total == 0) return;
  // A past of no rows still sets T0 (the CPU's kept = T0 - skip): only its data is absent.
  const bool has_past = past.defined();
  GatherAppendKernel<<<BlocksFor(total), kThreads, 0, CurrentStream()>>>(
      has_past && past.numel() > 0 ? past.f32() : nullptr, ids.defined() ? ids.i32() : nullptr,
      has_past ? past.dim(0) : 0, has_past ? past.dim(2) : 0, has_past ? skip : 0,
      next.defined() ? next.f32() : nullptr, out.f32(), out.dim(1), out.dim(2), out.dim(3), total,
      DeviceErrorSlot());
  TERN_CUDA_LAUNCH_CHECK("GatherAppendKernel");
}

void ScatterAddRows(const Tensor& dout, const Tensor& ids, const Tensor& dtable, float scale) {
  const int64_t d = dtable.cols(), total = ids.numel() * d;
  if (total == 0) return;
  ScatterAddRowsKernel<<<BlocksFor(total), kThreads, 0, CurrentStream()>>>(
      dout.f32(), ids.i32(), dtable.f32(), scale, d, dtable.rows(), total, DeviceErrorSlot());
  TERN_CUDA_LAUNCH_CHECK("ScatterAddRowsKernel");
}

void Permute0213(const Tensor& in, const Tensor& out, bool accumulate) {
  const int64_t total = in.numel();
  if (total == 0) return;
  const int64_t b = in.dim(1), c = in.dim(2), d = in.dim(3);
  const bool quads = d % 4 == 0 && reinterpret_cast<uintptr_t>(in.raw()) % 16 == 0 &&
                     reinterpret_cast<uintptr_t>(out.raw()) % 16 == 0;
  const bool small = total <= (int64_t{1} << 30);  // o plus the grid stride stays in int32
  if (quads && small) {
    LaunchPermute0213<float4, int32_t>(in.f32(), out.f32(), b, c, d / 4, accumulate, total / 4);
  } else if (quads) {
    LaunchPermute0213<float4, int64_t>(in.f32(), out.f32(), b, c, d / 4, accumulate, total / 4);
  } else if (small) {
    LaunchPermute0213<float, int32_t>(in.f32(), out.f32(), b, c, d, accumulate, total);
  } else {
    LaunchPermute0213<float, int64_t>(in.f32(), out.f32(), b, c, d, accumulate, total);
  }
}

void DropoutMask(const Tensor& mask, float keep_prob, uint64_t seed) {
  const int64_t n = mask.numel();
  if (n == 0) return;
  const float value = 1.f / keep_prob;
  const uint64_t threshold = static_cast<uint64_t>(static_cast<double>(keep_prob) * 4294967296.0);
  DropoutMaskKernel<<<BlocksFor(n), kThreads, 0, CurrentStream()>>>(mask.f32(), value, threshold,
                                                                    SplitMix64(seed), n);
  TERN_CUDA_LAUNCH_CHECK("DropoutMaskKernel");
}

void Dropout(const Tensor& x, const Tensor& base, const Tensor& out, float keep_prob,
             uint64_t seed) {
  const int64_t n = x.numel();
  if (n == 0) return;
  const float value = 1.f / keep_prob;
  const uint64_t threshold = static_cast<uint64_t>(static_cast<double>(keep_prob) * 4294967296.0);
  DropoutKernel<<<BlocksFor(n), kThreads, 0, CurrentStream()>>>(
      x.f32(), base.defined() ? base.f32() : nullptr, out.f32(), value, threshold, SplitMix64(seed),
      n);
  TERN_CUDA_LAUNCH_CHECK("DropoutKernel");
}

}  // namespace tern::cuda
