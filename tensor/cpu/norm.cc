// Layer normalization over the last dim.
#include <cmath>

#include "common/thread_pool.h"
#include "tensor/cpu/cpu_kernels.h"

namespace tern::cpu {

void LayerNorm(const Tensor& x, const Tensor& gamma, const Tensor& beta, const Tensor& out,
               const Tensor& mean, const Tensor& rstd, float eps) {
  const int64_t n = x.cols();
  const float *px = x.f32(), *pg = gamma.f32(), *pb = beta.f32();
  float *py = out.f32(), *pm = mean.f32(), *ps = rstd.f32();
  ParallelFor(x.rows(), GrainRows(n), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const float* xr = px + r * n;
      float* yr = py + r * n;
      float sum = 0.f;
      for (int64_t i = 0; i < n; ++i) sum += xr[i];
      const float mu = sum / n;
      float var = 0.f;
      for (int64_t i = 0; i < n; ++i) var += (xr[i] - mu) * (xr[i] - mu);
      const float rs = 1.f / std::sqrt(var / n + eps);
      pm[r] = mu;
      ps[r] = rs;
      for (int64_t i = 0; i < n; ++i) yr[i] = (xr[i] - mu) * rs * pg[i] + pb[i];
    }
  });
}

void LayerNormBackward(const Tensor& x, const Tensor& gamma, const Tensor& mean, const Tensor& rstd,
                       const Tensor& dy, const Tensor& dx, const Tensor& dgamma,
                       const Tensor& dbeta) {
  const int64_t n = x.cols(), rows = x.rows();
  const float *px = x.f32(), *pg = gamma.f32(), *pm = mean.f32(), *ps = rstd.f32();
  const float* pdy = dy.f32();
  float* pdx = dx.f32();
  // dx: independent per row.
  ParallelFor(rows, GrainRows(n), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const float *xr = px + r * n, *dyr = pdy + r * n;
      float* dxr = pdx + r * n;
      const float mu = pm[r], rs = ps[r];
      float sum_g = 0.f, sum_gx = 0.f;
      for (int64_t i = 0; i < n; ++i) {
        float g = dyr[i] * pg[i];
        sum_g += g;
        sum_gx += g * (xr[i] - mu) * rs;
      }
      const float mg = sum_g / n, mgx = sum_gx / n;
      for (int64_t i = 0; i < n; ++i)
        dxr[i] += rs * (dyr[i] * pg[i] - mg - (xr[i] - mu) * rs * mgx);
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
