// The GRU models' kernels (KernelTable::gru_cell, additive_attention_scores and its backward), and
// Clamp. Activations through RationalTanh, as Unary's.
#include <algorithm>
#include <cmath>
#include <vector>

#include "common/thread_pool.h"
#include "tensor/cpu/cpu_kernels.h"
#include "tensor/cpu/rational_tanh.h"

namespace tern::cpu {
namespace {

TERN_MULTIVERSION void GruRow(const float* in_rz, const float* in_h, const float* su_rz,
                              const float* su_h, const float* s, float mask, int64_t d,
                              float* out) {
  for (int64_t j = 0; j < d; ++j) {
    const float r = RationalSigmoid(in_rz[j] + su_rz[j]);
    const float z = RationalSigmoid(in_rz[d + j] + su_rz[d + j]);
    const float h = RationalTanh(in_h[j] + r * su_h[j]);
    float o = h + z * (s[j] - h);
    if (mask != 1.f) o = s[j] + mask * (o - s[j]);
    out[j] = o;
  }
}

// One row of GruCell's backward (see KernelTable::gru_cell_backward).
TERN_MULTIVERSION void GruGradRow(const float* in_rz, const float* in_h, const float* su_rz,
                                  const float* su_h, const float* s, float mask, const float* dout,
                                  int64_t d, float* d_rz, float* d_h, float* d_su_h, float* ds) {
  for (int64_t j = 0; j < d; ++j) {
    const float r = RationalSigmoid(in_rz[j] + su_rz[j]);
    const float z = RationalSigmoid(in_rz[d + j] + su_rz[d + j]);
    const float h = RationalTanh(in_h[j] + r * su_h[j]);
    const float dmixed = mask * dout[j];  // the gradient of h + z (s - h)
    const float dpre_h = dmixed * (1.f - z) * (1.f - h * h);
    d_h[j] = dpre_h;
    d_rz[j] = dpre_h * su_h[j] * r * (1.f - r);
    d_rz[d + j] = dmixed * (s[j] - h) * z * (1.f - z);
    if (d_su_h != nullptr) d_su_h[j] += dpre_h * r;
    if (ds != nullptr) ds[j] += (1.f - mask) * dout[j] + dmixed * z;
  }
}

TERN_MULTIVERSION float ScoreRow(const float* q, const float* mapped, const float* u, int64_t c) {
  float score = 0.f;
  for (int64_t j = 0; j < c; ++j) score += RationalTanh(mapped[j] + q[j]) * u[j];
  return score;
}

// One position's share of the scores' backward: e = tanh(m + q); g = ds u (1 - e^2);
// dm += g, dq += g, du += ds e (each skipped when null).
TERN_MULTIVERSION void AttentionGradRow(const float* q, const float* m, const float* u, float ds,
                                        int64_t c, float* e, float* dq, float* dm, float* du) {
  for (int64_t j = 0; j < c; ++j) e[j] = RationalTanh(m[j] + q[j]);
  if (dm != nullptr || dq != nullptr) {
    for (int64_t j = 0; j < c; ++j) {
      const float g = ds * u[j] * (1.f - e[j] * e[j]);
      if (dm != nullptr) dm[j] += g;
      if (dq != nullptr) dq[j] += g;
    }
  }
  if (du != nullptr) {
    for (int64_t j = 0; j < c; ++j) du[j] += ds * e[j];
  }
}

}  // namespace

void Clamp(const Tensor& x, float lo, float hi) {
  float* p = x.f32();
  ParallelFor(x.numel(), 1 << 15, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) p[i] = std::min(hi, std::max(lo, p[i]));
  });
}

void GruCell(const Tensor& in_rz, const Tensor& in_h, const Tensor& su_rz, const Tensor& su_h,
             const Tensor& s, const Tensor& row_mask, const Tensor& out) {
  const int64_t d = s.dim(1);
  const int64_t in_rows = in_rz.dim(0);
  ParallelFor(s.dim(0), GrainRows(8 * d), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t i = in_rows == 1 ? 0 : r;
      GruRow(in_rz.f32() + i * 2 * d, in_h.f32() + i * d, su_rz.f32() + r * 2 * d,
             su_h.f32() + r * d, s.f32() + r * d, row_mask.defined() ? row_mask.f32()[r] : 1.f, d,
             out.f32() + r * d);
    }
  });
}

void GruCellBackward(const Tensor& in_rz, const Tensor& in_h, const Tensor& su_rz,
                     const Tensor& su_h, const Tensor& s, const Tensor& row_mask,
                     const Tensor& dout, const Tensor& d_rz, const Tensor& d_h,
                     const Tensor& d_su_h, const Tensor& ds) {
  const int64_t d = s.dim(1);
  const int64_t in_rows = in_rz.dim(0);
  ParallelFor(s.dim(0), GrainRows(12 * d), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t i = in_rows == 1 ? 0 : r;
      GruGradRow(in_rz.f32() + i * 2 * d, in_h.f32() + i * d, su_rz.f32() + r * 2 * d,
                 su_h.f32() + r * d, s.f32() + r * d, row_mask.defined() ? row_mask.f32()[r] : 1.f,
                 dout.f32() + r * d, d, d_rz.f32() + r * 2 * d, d_h.f32() + r * d,
                 d_su_h.defined() ? d_su_h.f32() + r * d : nullptr,
                 ds.defined() ? ds.f32() + r * d : nullptr);
    }
  });
}

void AdditiveAttentionScores(const Tensor& q, const Tensor& mapped, const Tensor& u,
                             const Tensor& scores) {
  const int64_t rows = q.dim(0), c = q.dim(1), len = mapped.dim(1);
  const int64_t beam = rows / mapped.dim(0);
  ParallelFor(rows, GrainRows(len * c), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const float* m = mapped.f32() + (r / beam) * len * c;
      for (int64_t t = 0; t < len; ++t) {
        scores.f32()[r * len + t] = ScoreRow(q.f32() + r * c, m + t * c, u.f32(), c);
      }
    }
  });
}

void AdditiveAttentionScoresBackward(const Tensor& q, const Tensor& mapped, const Tensor& u,
                                     const Tensor& dscores, const Tensor& dq, const Tensor& dmapped,
                                     const Tensor& du_rows) {
  const int64_t rows = q.dim(0), c = q.dim(1), len = mapped.dim(1);
  ParallelFor(rows, GrainRows(2 * len * c), [&](int64_t r0, int64_t r1) {
    std::vector<float> e(c);
    for (int64_t r = r0; r < r1; ++r) {
      const float* qr = q.f32() + r * c;
      float* dqr = dq.defined() ? dq.f32() + r * c : nullptr;
      float* dur = du_rows.defined() ? du_rows.f32() + r * c : nullptr;
      if (dur != nullptr) std::fill(dur, dur + c, 0.f);
      for (int64_t t = 0; t < len; ++t) {
        const float ds = dscores.f32()[r * len + t];
        const float* m = mapped.f32() + (r * len + t) * c;
        float* dm = dmapped.defined() ? dmapped.f32() + (r * len + t) * c : nullptr;
        AttentionGradRow(qr, m, u.f32(), ds, c, e.data(), dqr, dm, dur);
      }
    }
  });
}

}  // namespace tern::cpu
