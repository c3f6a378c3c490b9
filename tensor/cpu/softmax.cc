// Softmax, log-softmax and the label-smoothed cross-entropy, row by row.
#include <algorithm>
#include <cmath>
#include <limits>

#include "common/thread_pool.h"
#include "tensor/cpu/attend_row.h"
#include "tensor/cpu/cpu_kernels.h"
#include "tensor/cpu/row_scan.h"
#include "tensor/cpu/vec8.h"

namespace tern::cpu {
namespace {

// std::max's left fold over the row, vectorized (row_scan.h).
float RowMax(const float* x, int64_t n) { return AddAndMax(x, nullptr, nullptr, n); }

// y = exp(scale * (x - max)) through vec8's exp (within 2 ulp of std::exp, 8 at a time);
// returns the sum.
TERN_MULTIVERSION float ExpShifted(const float* x, float* y, float max, float scale, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = scale * (x[i] - max);
  return vec8::ExpShifted(y, n, 0.f);
}

// d[k] = g * (exp(x[k] - lse) - uniform), written or added: the cross-entropy's gradient.
TERN_MULTIVERSION void SoftmaxMinusUniform(const float* x, float lse, float g, float uniform,
                                           int64_t n, bool accumulate, float* d) {
  using namespace vec8;  // NOLINT
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    const V8 v = Splat(g) * (Exp8(Load(x + i) - lse) - uniform);
    Store(d + i, accumulate ? Load(d + i) + v : v);
  }
  if (i < n) {
    float tail[kLanes];
    for (int l = 0; l < kLanes; ++l) tail[l] = i + l < n ? x[i + l] : -kInfinity;
    float out[kLanes];
    Store(out, Splat(g) * (Exp8(Load(tail) - lse) - uniform));
    for (int64_t k = i; k < n; ++k) d[k] = accumulate ? d[k] + out[k - i] : out[k - i];
  }
}

TERN_MULTIVERSION float Dot(const float* a, const float* b, int64_t n) {
  float s = 0.f;
  for (int64_t i = 0; i < n; ++i) s += a[i] * b[i];
  return s;
}

TERN_MULTIVERSION float Sum(const float* a, int64_t n) {
  float s = 0.f;
  for (int64_t i = 0; i < n; ++i) s += a[i];
  return s;
}

// Sum of each of kSumRows rows `stride` apart, side by side: each row's own chain of adds in
// Sum's order (so Sum's bits), eight chains in flight instead of one's latency per add.
constexpr int kSumRows = 8;
TERN_MULTIVERSION void SumsOfRows(const float* x, int64_t stride, int64_t n, float* out) {
  float s[kSumRows] = {};
  for (int64_t i = 0; i < n; ++i)
    for (int r = 0; r < kSumRows; ++r) s[r] += x[r * stride + i];
  for (int r = 0; r < kSumRows; ++r) out[r] = s[r];
}

}  // namespace

void Softmax(const Tensor& x, const Tensor& out, const Tensor& key_mask, bool causal, float scale) {
  const int64_t n = x.cols(), rows = x.rows();
  const float* px = x.f32();
  float* py = out.f32();
  const float* mask = key_mask.defined() ? key_mask.f32() : nullptr;
  const int64_t tq = x.rank() == 4 ? x.dim(2) : 1;
  const int64_t rows_per_batch = x.rank() == 4 ? x.dim(1) * x.dim(2) : rows;
  ParallelFor(rows, GrainRows(n), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const float* xr = px + r * n;
      float* yr = py + r * n;
      if (!mask && !causal) {  // the common unmasked case, vectorized
        float inv = 1.f / ExpShifted(xr, yr, RowMax(xr, n), scale, n);
        for (int64_t k = 0; k < n; ++k) yr[k] *= inv;
        continue;
      }
      // Valid keys: mask[b, k] != 0 and (not causal or k <= q).
      int64_t limit = causal ? std::min<int64_t>(n, r % tq + 1) : n;
      const float* m = mask ? mask + (r / rows_per_batch) * n : nullptr;
      float max = -std::numeric_limits<float>::infinity();
      for (int64_t k = 0; k < limit; ++k)
        if (!m || m[k] != 0.f) max = std::max(max, xr[k]);
      if (max == -std::numeric_limits<float>::infinity()) {  // fully masked row
        std::fill(yr, yr + n, 0.f);
        continue;
      }
      float sum = 0.f;
      for (int64_t k = 0; k < n; ++k) {
        float e = (k < limit && (!m || m[k] != 0.f)) ? std::exp(scale * (xr[k] - max)) : 0.f;
        yr[k] = e;
        sum += e;
      }
      float inv = 1.f / sum;
      for (int64_t k = 0; k < n; ++k) yr[k] *= inv;
    }
  });
}

void SoftmaxBackward(const Tensor& y, const Tensor& dy, const Tensor& dx, float scale,
                     bool accumulate) {
  const int64_t n = y.cols();
  const float *py = y.f32(), *pdy = dy.f32();
  float* pdx = dx.f32();
  ParallelFor(y.rows(), GrainRows(n), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const float *yr = py + r * n, *dyr = pdy + r * n;
      float* dxr = pdx + r * n;
      float dot = Dot(yr, dyr, n);
      if (accumulate) {
        for (int64_t k = 0; k < n; ++k) dxr[k] += scale * yr[k] * (dyr[k] - dot);
      } else {
        for (int64_t k = 0; k < n; ++k) dxr[k] = scale * yr[k] * (dyr[k] - dot);
      }
    }
  });
}

void LogSoftmax(const Tensor& x, const Tensor& out) {
  const int64_t n = x.cols();
  const float* px = x.f32();
  float* py = out.f32();
  ParallelFor(x.rows(), GrainRows(n), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const float* xr = px + r * n;
      float* yr = py + r * n;
      float max = RowMax(xr, n);
      float lse = max + std::log(SumExpShifted(xr, n, max));
      for (int64_t k = 0; k < n; ++k) yr[k] = xr[k] - lse;
    }
  });
}

void CrossEntropy(const Tensor& logits, const Tensor& targets, float smoothing, int32_t ignore_id,
                  const Tensor& loss, const Tensor& lse) {
  const int64_t v = logits.cols();
  const float* px = logits.f32();
  const int32_t* pt = targets.i32();
  float *pl = loss.f32(), *plse = lse.f32();
  ParallelFor(logits.rows(), GrainRows(v), [&](int64_t r0, int64_t r1) {
    float sums[kSumRows];  // the smoothing term's Sum of rows sums_from.. (eight at a time)
    int64_t sums_from = r0 - kSumRows;
    for (int64_t r = r0; r < r1; ++r) {
      const float* xr = px + r * v;
      if (smoothing != 0.f && r - sums_from >= kSumRows) {
        sums_from = r;
        if (r + kSumRows <= r1) {
          SumsOfRows(xr, v, v, sums);
        } else {
          for (int64_t q = r; q < r1; ++q) sums[q - r] = Sum(px + q * v, v);
        }
      }
      float max = RowMax(xr, v);
      float l = max + std::log(SumExpShifted(xr, v, max));
      plse[r] = l;
      if (pt[r] == ignore_id) {
        pl[r] = 0.f;
        continue;
      }
      CHECK(pt[r] >= 0 && pt[r] < v) << "target id " << pt[r] << " outside vocabulary " << v;
      float nll = l - xr[pt[r]];
      const float sum = smoothing != 0.f ? sums[r - sums_from] : Sum(xr, v);
      float smooth = l - sum / static_cast<float>(v);  // mean over v of -log p[v]
      pl[r] = (1.f - smoothing) * nll + smoothing * smooth;
    }
  });
}

void CrossEntropyBackward(const Tensor& logits, const Tensor& targets, float smoothing,
                          int32_t ignore_id, const Tensor& lse, const Tensor& dloss,
                          const Tensor& dlogits, bool accumulate) {
  const int64_t v = logits.cols();
  const float *px = logits.f32(), *plse = lse.f32(), *pdl = dloss.f32();
  const int32_t* pt = targets.i32();
  float* pdx = dlogits.f32();
  const float uniform = smoothing / static_cast<float>(v);
  ParallelFor(logits.rows(), GrainRows(v), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      float* dxr = pdx + r * v;
      if (pt[r] == ignore_id) {
        if (!accumulate) std::fill(dxr, dxr + v, 0.f);
        continue;
      }
      const float* xr = px + r * v;
      SoftmaxMinusUniform(xr, plse[r], pdl[r], uniform, v, accumulate, dxr);
      const float g = pdl[r];
      dxr[pt[r]] -= g * (1.f - smoothing);
    }
  });
}

}  // namespace tern::cpu
