// Layer normalization over the last dim.
#include <algorithm>
#include <cmath>

#include "common/thread_pool.h"
#include "tensor/cpu/cpu_kernels.h"

namespace tern::cpu {

namespace {

constexpr int kSumLanes = 8;

// sum_i f(x[i]) with x[i] added into lane i % 8 and the lanes added in one fixed tree: the loop
// vectorizes (a single running sum cannot, without reassociation), and the bits do not depend on
// how the rows are split over threads.
template <class F>
[[gnu::always_inline]] inline float LaneSum(const float* x, int64_t n, F f) {
  float lanes[kSumLanes] = {};
  int64_t i = 0;
  for (; i + kSumLanes <= n; i += kSumLanes) {
    for (int l = 0; l < kSumLanes; ++l) lanes[l] += f(x[i + l]);
  }
  for (int l = 0; i < n; ++i, ++l) lanes[l] += f(x[i]);
  return ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) +
         ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7]));
}

TERN_MULTIVERSION void LayerNormRow(const float* x, const float* gamma, const float* beta,
                                    int64_t n, float eps, float* y, float* mean, float* rstd) {
  const float mu = LaneSum(x, n, [](float v) { return v; }) / n;
  const float var = LaneSum(x, n, [mu](float v) { return (v - mu) * (v - mu); });
  const float rs = 1.f / std::sqrt(var / n + eps);
  *mean = mu;
  *rstd = rs;
  for (int64_t i = 0; i < n; ++i) y[i] = (x[i] - mu) * rs * gamma[i] + beta[i];
}

constexpr int kRowGroup = 8;

// For rows q < count of x and dy (n columns each, rows n apart): sum_g[q] = Σ dy·gamma and
// sum_gx[q] = Σ dy·gamma·(x - mean[q])·rstd[q], each a chain of adds in column order.
void RowSums(const float* x, const float* dy, const float* gamma, const float* mean,
             const float* rstd, int64_t n, int count, float* sum_g, float* sum_gx) {
  if (count < kRowGroup) {
    for (int q = 0; q < count; ++q) {
      const float *xr = x + q * n, *dyr = dy + q * n;
      float sg = 0.f, sgx = 0.f;
      for (int64_t i = 0; i < n; ++i) {
        const float g = dyr[i] * gamma[i];
        sg += g;
        sgx += g * (xr[i] - mean[q]) * rstd[q];
      }
      sum_g[q] = sg;
      sum_gx[q] = sgx;
    }
    return;
  }
  float sg[kRowGroup] = {}, sgx[kRowGroup] = {};
  for (int64_t i = 0; i < n; ++i) {
    for (int q = 0; q < kRowGroup; ++q) {
      const float g = dy[q * n + i] * gamma[i];
      sg[q] += g;
      sgx[q] += g * (x[q * n + i] - mean[q]) * rstd[q];
    }
  }
  for (int q = 0; q < kRowGroup; ++q) {
    sum_g[q] = sg[q];
    sum_gx[q] = sgx[q];
  }
}

}  // namespace

void LayerNorm(const Tensor& x, const Tensor& gamma, const Tensor& beta, const Tensor& out,
               const Tensor& mean, const Tensor& rstd, float eps) {
  const int64_t n = x.cols();
  const float *px = x.f32(), *pg = gamma.f32(), *pb = beta.f32();
  float *py = out.f32(), *pm = mean.f32(), *ps = rstd.f32();
  ParallelFor(x.rows(), GrainRows(n), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      LayerNormRow(px + r * n, pg, pb, n, eps, py + r * n, pm + r, ps + r);
    }
  });
}

void LayerNormBackward(const Tensor& x, const Tensor& gamma, const Tensor& mean, const Tensor& rstd,
                       const Tensor& dy, const Tensor& dx, const Tensor& dgamma,
                       const Tensor& dbeta, bool accumulate) {
  const int64_t n = x.cols(), rows = x.rows();
  const float *px = x.f32(), *pg = gamma.f32(), *pm = mean.f32(), *ps = rstd.f32();
  const float* pdy = dy.f32();
  float* pdx = dx.f32();
  // dx: independent per row. Each row's two sums are single chains of adds in column order
  // (this file is built for the baseline ISA: no FMA to contract into), taken for kRowGroup rows
  // side by side so that the chains' latencies overlap.
  ParallelFor(rows, GrainRows(n), [&](int64_t r0, int64_t r1) {
    float sums_g[kRowGroup], sums_gx[kRowGroup];  // rows group_from.., kRowGroup at a time
    int64_t group_from = r0 - kRowGroup;
    for (int64_t r = r0; r < r1; ++r) {
      if (r - group_from >= kRowGroup) {
        group_from = r;
        RowSums(px + r * n, pdy + r * n, pg, pm + r, ps + r, n,
                static_cast<int>(std::min<int64_t>(kRowGroup, r1 - r)), sums_g, sums_gx);
      }
      const float *xr = px + r * n, *dyr = pdy + r * n;
      float* dxr = pdx + r * n;
      const float mu = pm[r], rs = ps[r];
      const float mg = sums_g[r - group_from] / n, mgx = sums_gx[r - group_from] / n;
      if (accumulate) {
        for (int64_t i = 0; i < n; ++i)
          dxr[i] += rs * (dyr[i] * pg[i] - mg - (xr[i] - mu) * rs * mgx);
      } else {
        for (int64_t i = 0; i < n; ++i)
          dxr[i] = rs * (dyr[i] * pg[i] - mg - (xr[i] - mu) * rs * mgx);
      }
    }
  });
  // dgamma, dbeta: parallel over columns.
  if (!dgamma.defined() && !dbeta.defined()) return;
  float* pdg = dgamma.defined() ? dgamma.f32() : nullptr;
  float* pdb = dbeta.defined() ? dbeta.f32() : nullptr;
  ParallelFor(n, 64, [&](int64_t c0, int64_t c1) {
    for (int64_t r = 0; r < rows; ++r) {
      const float *xr = px + r * n, *dyr = pdy + r * n;
      const float mu = pm[r], rs = ps[r];
      for (int64_t i = c0; i < c1; ++i) {
        if (pdg) pdg[i] += dyr[i] * (xr[i] - mu) * rs;
        if (pdb) pdb[i] += dyr[i];
      }
    }
  });
}

}  // namespace tern::cpu
