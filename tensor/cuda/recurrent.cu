// The GRU models' kernels (KernelTable::gru_cell, additive_attention_scores and its backward),
// and Clamp: the same formulas as tensor/cpu/recurrent.cc.
#include "tensor/cuda/cuda_common.h"
#include "tensor/cuda/cuda_kernels.h"

namespace tern::cuda {
namespace {

__global__ void ClampKernel(float* x, float lo, float hi, int64_t n) {
  TERN_GRID_STRIDE(i, n) x[i] = fminf(hi, fmaxf(lo, x[i]));
}

// One thread per element of out (rows, d); in_rows 1 broadcasts the input projections.
__global__ void GruCellKernel(const float* in_rz, const float* in_h, int64_t in_rows,
                              const float* su_rz, const float* su_h, const float* s,
                              const float* mask, float* out, int64_t d, int64_t n) {
  TERN_GRID_STRIDE(k, n) {
    const int64_t r = k / d, j = k % d, i = in_rows == 1 ? 0 : r;
    const float gr = 1.f / (1.f + expf(-(in_rz[i * 2 * d + j] + su_rz[r * 2 * d + j])));
    const float z = 1.f / (1.f + expf(-(in_rz[i * 2 * d + d + j] + su_rz[r * 2 * d + d + j])));
    const float h = tanhf(in_h[i * d + j] + gr * su_h[r * d + j]);
    const float sk = s[k];
    float o = h + z * (sk - h);
    if (mask != nullptr && mask[r] != 1.f) o = sk + mask[r] * (o - sk);
    out[k] = o;
  }
}

// GruCell's backward, one thread per element (see KernelTable::gru_cell_backward).
__global__ void GruCellBackwardKernel(const float* in_rz, const float* in_h, int64_t in_rows,
                                      const float* su_rz, const float* su_h, const float* s,
                                      const float* mask, const float* dout, float* d_rz, float* d_h,
                                      float* d_su_h, float* ds, int64_t d, int64_t n) {
  TERN_GRID_STRIDE(k, n) {
    const int64_t r = k / d, j = k % d, i = in_rows == 1 ? 0 : r;
    const float gr = 1.f / (1.f + expf(-(in_rz[i * 2 * d + j] + su_rz[r * 2 * d + j])));
    const float z = 1.f / (1.f + expf(-(in_rz[i * 2 * d + d + j] + su_rz[r * 2 * d + d + j])));
    const float h = tanhf(in_h[i * d + j] + gr * su_h[k]);
    const float m = mask != nullptr ? mask[r] : 1.f;
    const float dmixed = m * dout[k];
    const float dpre_h = dmixed * (1.f - z) * (1.f - h * h);
    d_h[k] = dpre_h;
    d_rz[r * 2 * d + j] = dpre_h * su_h[k] * gr * (1.f - gr);
    d_rz[r * 2 * d + d + j] = dmixed * (s[k] - h) * z * (1.f - z);
    if (d_su_h != nullptr) d_su_h[k] += dpre_h * gr;
    if (ds != nullptr) ds[k] += (1.f - m) * dout[k] + dmixed * z;
  }
}

// One warp per score (r, t): the lanes stride the c columns, then a shuffle reduction. The loop
// bound is the same for a warp's lanes, so every lane reaches each shuffle.
__global__ void AttentionScoresKernel(const float* q, const float* mapped, const float* u,
                                      float* scores, int64_t count, int64_t len, int64_t c,
                                      int64_t beam) {
  const int lane = threadIdx.x % 32;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * (blockDim.x / 32);
  for (int64_t w = blockIdx.x * static_cast<int64_t>(blockDim.x / 32) + threadIdx.x / 32; w < count;
       w += warps) {
    const int64_t r = w / len, t = w % len;
    const float* m = mapped + ((r / beam) * len + t) * c;
    const float* qr = q + r * c;
    float sum = 0.f;
    for (int64_t j = lane; j < c; j += 32) sum += tanhf(m[j] + qr[j]) * u[j];
    for (int offset = 16; offset > 0; offset >>= 1)
      sum += __shfl_down_sync(0xffffffffu, sum, offset);
    if (lane == 0) scores[w] = sum;
  }
}

// One thread per (row r, column j), looping over the positions: dmapped's writes and the reads
// of mapped are coalesced along j; the sums over t stay in registers.
__global__ void AttentionScoresBackwardKernel(const float* q, const float* mapped, const float* u,
                                              const float* dscores, float* dq, float* dmapped,
                                              float* du_rows, int64_t rows, int64_t len,
                                              int64_t c) {
  TERN_GRID_STRIDE(k, rows * c) {
    const int64_t r = k / c, j = k % c;
    const float qj = q[k], uj = u[j];
    float dq_sum = 0.f, du_sum = 0.f;
    for (int64_t t = 0; t < len; ++t) {
      const int64_t at = (r * len + t) * c + j;
      const float e = tanhf(mapped[at] + qj);
      const float ds = dscores[r * len + t];
      const float g = ds * uj * (1.f - e * e);
      if (dmapped != nullptr) dmapped[at] += g;
      dq_sum += g;
      du_sum += ds * e;
    }
    if (dq != nullptr) dq[k] += dq_sum;
    if (du_rows != nullptr) du_rows[k] = du_sum;
  }
}

}  // namespace

void Clamp(const Tensor& x, float lo, float hi) {
  const int64_t n = x.numel();
  if (n == 0) return;
  ClampKernel<<<BlocksFor(n), kThreads, 0, CurrentStream()>>>(x.f32(), lo, hi, n);
  TERN_CUDA_LAUNCH_CHECK("ClampKernel");
}

void GruCell(const Tensor& in_rz, const Tensor& in_h, const Tensor& su_rz, const Tensor& su_h,
             const Tensor& s, const Tensor& row_mask, const Tensor& out) {
  const int64_t n = out.numel();
  if (n == 0) return;
  GruCellKernel<<<BlocksFor(n), kThreads, 0, CurrentStream()>>>(
      in_rz.f32(), in_h.f32(), in_rz.dim(0), su_rz.f32(), su_h.f32(), s.f32(),
      row_mask.defined() ? row_mask.f32() : nullptr, out.f32(), s.dim(1), n);
  TERN_CUDA_LAUNCH_CHECK("GruCellKernel");
}

void GruCellBackward(const Tensor& in_rz, const Tensor& in_h, const Tensor& su_rz,
                     const Tensor& su_h, const Tensor& s, const Tensor& row_mask,
                     const Tensor& dout, const Tensor& d_rz, const Tensor& d_h,
                     const Tensor& d_su_h, const Tensor& ds) {
  const int64_t n = s.numel();
  if (n == 0) return;
  auto ptr = [](const Tensor& t) { return t.defined() ? t.f32() : nullptr; };
  GruCellBackwardKernel<<<BlocksFor(n), kThreads, 0, CurrentStream()>>>(
      in_rz.f32(), in_h.f32(), in_rz.dim(0), su_rz.f32(), su_h.f32(), s.f32(), ptr(row_mask),
      dout.f32(), d_rz.f32(), d_h.f32(), ptr(d_su_h), ptr(ds), s.dim(1), n);
  TERN_CUDA_LAUNCH_CHECK("GruCellBackwardKernel");
}

void AdditiveAttentionScores(const Tensor& q, const Tensor& mapped, const Tensor& u,
                             const Tensor& scores) {
  const int64_t rows = q.dim(0), len = mapped.dim(1), count = rows * len;
  if (count == 0) return;
  AttentionScoresKernel<<<BlocksFor(count * 32), kThreads, 0, CurrentStream()>>>(
      q.f32(), mapped.f32(), u.f32(), scores.f32(), count, len, q.dim(1), rows / mapped.dim(0));
  TERN_CUDA_LAUNCH_CHECK("AttentionScoresKernel");
}

void AdditiveAttentionScoresBackward(const Tensor& q, const Tensor& mapped, const Tensor& u,
                                     const Tensor& dscores, const Tensor& dq, const Tensor& dmapped,
                                     const Tensor& du_rows) {
  const int64_t rows = q.dim(0), c = q.dim(1), len = mapped.dim(1);
  if (rows * c == 0) return;
  auto ptr = [](const Tensor& t) { return t.defined() ? t.f32() : nullptr; };
  AttentionScoresBackwardKernel<<<BlocksFor(rows * c), kThreads, 0, CurrentStream()>>>(
      q.f32(), mapped.f32(), u.f32(), dscores.f32(), ptr(dq), ptr(dmapped), ptr(du_rows), rows, len,
      c);
  TERN_CUDA_LAUNCH_CHECK("AttentionScoresBackwardKernel");
}

}  // namespace tern::cuda
