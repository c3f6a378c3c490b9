#include "inference/rnn/rnn_kernels.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "inference/layers/layers.h"
#include "tensor/cpu/cpu_kernels.h"
#include "tensor/cpu/rational_tanh.h"
#include "tensor/ops.h"

namespace tern::inference {
namespace {

using cpu::RationalTanh;

inline void TanhRange(float* x, int64_t n, bool approx) {
  if (approx) {
    for (int64_t i = 0; i < n; ++i) x[i] = RationalTanh(x[i]);
  } else {
    for (int64_t i = 0; i < n; ++i) x[i] = std::tanh(x[i]);
  }
}

inline void SigmoidRange(float* x, int64_t n, bool approx) {
  if (approx) {
    for (int64_t i = 0; i < n; ++i) x[i] = cpu::RationalSigmoid(x[i]);
  } else {
    for (int64_t i = 0; i < n; ++i) x[i] = 1.f / (1.f + std::exp(-x[i]));
  }
}

}  // namespace

TERN_MULTIVERSION void TanhInPlace(float* x, int64_t n, bool approx) { TanhRange(x, n, approx); }

TERN_MULTIVERSION void SigmoidInPlace(float* x, int64_t n, bool approx) {
  SigmoidRange(x, n, approx);
}

namespace rnn_internal {

Tensor MaybeNorm(const Tensor& x, bool on, const Tensor& s, const Tensor& b, Arena& arena) {
  return on ? LayerNormalize(x, s, b, arena) : x;
}

// The input side of a GRU with input, x (n, in) -> rz (n, 2d) and h (n, d) with their biases:
// Nematus' LN(x W) + b with layer normalization, x W + b without.
void Project(const GruWeights& g, const Tensor& x, Arena& arena, Tensor* rz, Tensor* h) {
  if (!g.layer_norm) {
    *rz = Linear(x, g.w, g.b, arena);
    *h = Linear(x, g.wx, g.bx, arena);
    return;
  }
  *rz = LayerNormalize(Linear(x, g.w, Tensor(), arena), g.w_lns, g.w_lnb, arena);
  AddBias(rz->Flatten2D(), g.b);
  *h = LayerNormalize(Linear(x, g.wx, Tensor(), arena), g.wx_lns, g.wx_lnb, arena);
  AddBias(h->Flatten2D(), g.bx);
}

// The recurrent side, s (n, d) -> LN(s U) (n, 2d), LN(s Ux) (n, d).
void StateProducts(const GruWeights& g, const Tensor& s, Arena& arena, Tensor* rz, Tensor* h) {
  *rz = MaybeNorm(Linear(s, g.u, Tensor(), arena), g.layer_norm, g.u_lns, g.u_lnb, arena);
  *h = MaybeNorm(Linear(s, g.ux, Tensor(), arena), g.layer_norm, g.ux_lns, g.ux_lnb, arena);
}

// The GRU update of models/rnn_layers.h for rows of width d:
//   r, z = sigmoid(in_rz + su_rz);  h = tanh(in_h + r * su_h);  s' = h + z (s - h)
// and with a row mask m, s + m (s' - s). in_rz/in_h advance by their strides per row (0: one
// bias row for a transition cell). su_rz/su_h rows are found through su_row (null: row i).
TERN_MULTIVERSION void GruUpdate(const GruInputs& in, const float* s, const float* row_mask,
                                 int64_t rows, int64_t d, bool approx, float* out,
                                 std::vector<float>* scratch) {
  scratch->resize(3 * d);
  float* rz = scratch->data();
  float* h = rz + 2 * d;
  for (int64_t i = 0; i < rows; ++i) {
    const int64_t k = in.su_row ? in.su_row[i] : i;
    const float* a = in.in_rz + i * in.rz_stride;
    const float* u = in.su_rz + k * 2 * d;
    for (int64_t j = 0; j < 2 * d; ++j) rz[j] = a[j] + u[j];
    SigmoidRange(rz, 2 * d, approx);
    const float* ah = in.in_h + i * in.h_stride;
    const float* uh = in.su_h + k * d;
    for (int64_t j = 0; j < d; ++j) h[j] = ah[j] + rz[j] * uh[j];
    TanhRange(h, d, approx);
    const float* si = s + i * d;
    float* o = out + i * d;
    const float* z = rz + d;
    for (int64_t j = 0; j < d; ++j) o[j] = h[j] + z[j] * (si[j] - h[j]);
    if (row_mask != nullptr && row_mask[i] != 1.f) {
      const float m = row_mask[i];
      for (int64_t j = 0; j < d; ++j) o[j] = si[j] + m * (o[j] - si[j]);
    }
  }
}

void TanhTensor(const Tensor& x, RnnCompute how) {
  if (how.tensor_ops) {
    Unary(kTanh, x, x);
  } else {
    TanhInPlace(x.f32(), x.numel(), how.approx);
  }
}

// One step of a stack of cells (the first with input projections in_rz, in_h) from states s.
Tensor CellStack(const GruWeights* cells, size_t count, const Tensor& in_rz, const Tensor& in_h,
                 const Tensor& s, const Tensor& row_mask, RnnCompute how, Arena& arena,
                 std::vector<float>* scratch) {
  const int64_t rows = s.dim(0), d = s.dim(1);
  Tensor state = s;
  for (size_t j = 0; j < count; ++j) {
    const GruWeights& g = cells[j];
    Tensor su_rz, su_h;
    StateProducts(g, state, arena, &su_rz, &su_h);
    Tensor next = arena.Alloc({rows, d});
    // A transition cell's input is its bias row alone.
    const Tensor rz = j == 0 ? in_rz.Flatten2D() : g.b.Reshape({1, 2 * d});
    const Tensor h = j == 0 ? in_h.Flatten2D() : g.bx.Reshape({1, d});
    if (how.tensor_ops) {
      GruCell(rz, h, su_rz.Flatten2D(), su_h.Flatten2D(), state, row_mask, next);
    } else {
      const int64_t rz_stride = rz.dim(0) == 1 ? 0 : 2 * d, h_stride = h.dim(0) == 1 ? 0 : d;
      GruUpdate({rz.f32(), rz_stride, h.f32(), h_stride, su_rz.f32(), su_h.f32(), nullptr},
                state.f32(), row_mask.defined() ? row_mask.f32() : nullptr, rows, d, how.approx,
                next.f32(), scratch);
    }
    state = next;
  }
  return state;
}

// The context side of the attention, context (n, S, c) -> LN(context Wc) + b.
Tensor MapContext(const RnnAttentionWeights& a, const Tensor& context, Arena& arena) {
  Tensor m =
      MaybeNorm(Linear(context, a.wc, Tensor(), arena), a.layer_norm, a.c_lns, a.c_lnb, arena);
  AddBias(m.Flatten2D(), a.b);
  return m;
}

// One row of the MLP attention: scores tanh(mapped_t + q) . u over the unmasked t, softmax,
// out = sum_t alpha_t context_t.
TERN_MULTIVERSION void AttendRow(const float* q, const float* mapped, const float* context,
                                 const float* mask, const float* u, int64_t len, int64_t c,
                                 bool approx, float* scores, float* e, float* out) {
  float best = -std::numeric_limits<float>::infinity();
  for (int64_t t = 0; t < len; ++t) {
    if (mask[t] == 0.f) continue;
    const float* mt = mapped + t * c;
    for (int64_t j = 0; j < c; ++j) e[j] = mt[j] + q[j];
    TanhRange(e, c, approx);
    float score = 0;
    for (int64_t j = 0; j < c; ++j) score += e[j] * u[j];
    scores[t] = score;
    best = std::max(best, score);
  }
  float sum = 0;
  for (int64_t t = 0; t < len; ++t) {
    scores[t] = mask[t] == 0.f ? 0.f : std::exp(scores[t] - best);
    sum += scores[t];
  }
  std::fill(out, out + c, 0.f);
  if (sum == 0.f) return;
  const float inv = 1.f / sum;
  for (int64_t t = 0; t < len; ++t) {
    if (scores[t] == 0.f) continue;
    const float w = scores[t] * inv;
    const float* ct = context + t * c;
    for (int64_t j = 0; j < c; ++j) out[j] += w * ct[j];
  }
}

}  // namespace rnn_internal
}  // namespace tern::inference
