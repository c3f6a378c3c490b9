// The host reference of a whole GRU layer (KernelTable::gru_layer): the CUDA path's steps with
// cuDNN's call replaced by a plain model of what cuDNN documents, so that everything around cuDNN
// runs where there is no GPU. Like tensor/cuda/cudnn_gru.cc it packs Tern's parameters into a
// weight space (the canonical layout, through the same segments), runs cuDNN's GRU formula on it
// over each column's valid steps (padded outputs 0, the final state of each column kept), then
// repeats the left-to-right final state over the padded positions; the backward pass moves the
// padded positions' gradient onto that final state, runs the formula's backward, and unpacks the
// weight-space gradient into Tern's. With bf16/fp16 it rounds what cuDNN holds in its data type:
// the input, the packed weights, and each step's output (which the next step reads as its state).
// Plain loops in double: for tests, not for training on the CPU.
#include <cmath>
#include <vector>

#include "common/error.h"
#include "tensor/cpu/cpu_kernels.h"
#include "tensor/gru_weight_layout.h"
#include "tensor/low_precision.h"

namespace tern::cpu {
namespace {

double Sigmoid(double v) { return 1.0 / (1.0 + std::exp(-v)); }

float ReadAsFloat(const Tensor& t, int64_t i) {
  switch (t.dtype()) {
    case DType::kBFloat16:
      return FromBFloat16Bits(t.data<uint16_t>()[i]);
    case DType::kFloat16:
      return FromFloat16Bits(t.data<uint16_t>()[i]);
    default:
      return t.f32()[i];
  }
}

// What the layer's call fixes: sizes, each column's steps, the packed weights.
struct Layer {
  int64_t len, batch, in, d;
  int dirs;
  DType type;
  std::vector<int32_t> steps;  // (batch)
  GruWeightLayout layout;
  std::vector<GruPackSegment> segments;
  std::vector<float> space;  // the weight space, rounded to `type`
  std::vector<float> x;      // (len, batch, in), rounded to `type`

  const float* W(int dir, int gate) const { return &space[layout.matrix[dir][gate]]; }
  const float* R(int dir, int gate) const { return &space[layout.matrix[dir][3 + gate]]; }
  const float* BW(int dir, int gate) const { return &space[layout.bias[dir][gate]]; }
  const float* BR(int dir, int gate) const { return &space[layout.bias[dir][3 + gate]]; }
  // The positions of column b in the order direction dir visits them.
  int64_t Position(int dir, int64_t b, int64_t k) const { return dir == 0 ? k : steps[b] - 1 - k; }
};

Layer Prepare(const GruLayerCall& c) {
  Layer l;
  l.len = c.x.dim(0);
  l.batch = c.x.dim(1);
  l.in = c.x.dim(2);
  l.d = c.weights[0].ux.dim(0);
  l.dirs = c.directions;
  l.type = c.inputs;
  l.steps.assign(l.batch, static_cast<int32_t>(l.len));
  if (c.lengths.defined())
    for (int64_t b = 0; b < l.batch; ++b) l.steps[b] = c.lengths.i32()[b];
  l.layout = CanonicalGruWeightLayout(l.in, l.d, l.dirs);
  l.segments = GruPackSegments(l.layout);
  const float* sources[2][kGruSourceCount] = {};
  for (int k = 0; k < l.dirs; ++k) {
    const GruWeights& w = c.weights[k];
    sources[k][kGruW] = w.w.f32();
    sources[k][kGruWx] = w.wx.f32();
    sources[k][kGruU] = w.u.f32();
    sources[k][kGruUx] = w.ux.f32();
    sources[k][kGruB] = w.b.f32();
    sources[k][kGruBx] = w.bx.f32();
  }
  l.space.assign(l.layout.size, 0.f);
  PackGruWeights(l.segments, sources, l.space.data());
  for (float& v : l.space) v = RoundTo(l.type, v);
  l.x.resize(c.x.numel());
  for (int64_t i = 0; i < c.x.numel(); ++i) l.x[i] = RoundTo(l.type, ReadAsFloat(c.x, i));
  return l;
}

// One step's gates for direction dir: a_r, a_z (pre-activations), n_in = W_n x + b_Wn and
// n_rec = R_n h + b_Rn, from x (in) and h (d).
struct Gates {
  std::vector<double> r, z, n, n_rec;
};

Gates StepGates(const Layer& l, int dir, const float* x, const float* h) {
  const int64_t d = l.d, in = l.in;
  Gates g{std::vector<double>(d), std::vector<double>(d), std::vector<double>(d),
          std::vector<double>(d)};
  for (int64_t j = 0; j < d; ++j) {
    double a[3], rec[3];
    for (int gate = 0; gate < 3; ++gate) {
      const float* w = l.W(dir, gate) + j * in;
      const float* r = l.R(dir, gate) + j * d;
      double sx = l.BW(dir, gate)[j], sh = l.BR(dir, gate)[j];
      for (int64_t k = 0; k < in; ++k) sx += double{w[k]} * x[k];
      for (int64_t k = 0; k < d; ++k) sh += double{r[k]} * h[k];
      a[gate] = sx;
      rec[gate] = sh;
    }
    g.r[j] = Sigmoid(a[0] + rec[0]);
    g.z[j] = Sigmoid(a[1] + rec[1]);
    g.n_rec[j] = rec[2];
    g.n[j] = std::tanh(a[2] + g.r[j] * rec[2]);
  }
  return g;
}

// cuDNN's forward: y (len, batch, dirs d) with each column's valid positions (0 at the padded
// ones), and hy (dirs, batch, d) the state each direction ends with.
void Forward(const Layer& l, std::vector<float>* y, std::vector<float>* hy) {
  const int64_t d = l.d, width = l.dirs * d;
  y->assign(l.len * l.batch * width, 0.f);
  hy->assign(l.dirs * l.batch * d, 0.f);
  std::vector<float> h(d);
  for (int dir = 0; dir < l.dirs; ++dir) {
    for (int64_t b = 0; b < l.batch; ++b) {
      h.assign(d, 0.f);
      for (int64_t k = 0; k < l.steps[b]; ++k) {
        const int64_t t = l.Position(dir, b, k);
        const Gates g = StepGates(l, dir, &l.x[(t * l.batch + b) * l.in], h.data());
        float* out = &(*y)[(t * l.batch + b) * width + dir * d];
        for (int64_t j = 0; j < d; ++j) {
          out[j] = RoundTo(l.type, static_cast<float>((1 - g.z[j]) * g.n[j] + g.z[j] * h[j]));
          h[j] = out[j];
        }
      }
      for (int64_t j = 0; j < d; ++j) (*hy)[(dir * l.batch + b) * d + j] = h[j];
    }
  }
}

}  // namespace

void GruLayer(GruLayerCall& call) {
  const Layer l = Prepare(call);
  std::vector<float> y, hy;
  Forward(l, &y, &hy);
  // The padded positions: left to right repeats its final state (the step path's carry-over),
  // right to left stays 0 (cuDNN's padding fill).
  const int64_t d = l.d, width = l.dirs * d;
  float* out = call.out.f32();
  for (int64_t t = 0; t < l.len; ++t)
    for (int64_t b = 0; b < l.batch; ++b) {
      const float* row = &y[(t * l.batch + b) * width];
      float* o = out + (t * l.batch + b) * width;
      for (int64_t j = 0; j < width; ++j) o[j] = t >= l.steps[b] && j < d ? hy[b * d + j] : row[j];
    }
  call.saved = Tensor();  // the backward pass recomputes the forward's
}

void GruLayerBackward(const GruLayerCall& call, const GruLayerGrads& grads) {
  const Layer l = Prepare(call);
  std::vector<float> y, hy;
  Forward(l, &y, &hy);
  const int64_t d = l.d, in = l.in, width = l.dirs * d;
  float* dout = grads.dout.f32();
  // The padded positions' gradient: left to right's is its final state's; both are then zeros
  // in dout, as the CUDA path leaves them.
  std::vector<double> dhy(l.batch * d, 0.0);
  for (int64_t t = 0; t < l.len; ++t)
    for (int64_t b = 0; b < l.batch; ++b) {
      if (t < l.steps[b]) continue;
      float* row = dout + (t * l.batch + b) * width;
      for (int64_t j = 0; j < d; ++j) dhy[b * d + j] += row[j];
      for (int64_t j = 0; j < width; ++j) row[j] = 0.f;
    }
  std::vector<double> dspace(l.layout.size, 0.0), dx(l.len * l.batch * in, 0.0);
  std::vector<double> dh(d), dh_prev(d);
  std::vector<float> zero(d, 0.f);
  for (int dir = 0; dir < l.dirs; ++dir) {
    double* dW[3];
    double* dR[3];
    double* dBW[3];
    double* dBR[3];
    for (int gate = 0; gate < 3; ++gate) {
      dW[gate] = &dspace[l.layout.matrix[dir][gate]];
      dR[gate] = &dspace[l.layout.matrix[dir][3 + gate]];
      dBW[gate] = &dspace[l.layout.bias[dir][gate]];
      dBR[gate] = &dspace[l.layout.bias[dir][3 + gate]];
    }
    for (int64_t b = 0; b < l.batch; ++b) {
      for (int64_t j = 0; j < d; ++j) dh[j] = dir == 0 ? dhy[b * d + j] : 0.0;
      for (int64_t k = l.steps[b] - 1; k >= 0; --k) {
        const int64_t t = l.Position(dir, b, k);
        const float* x = &l.x[(t * l.batch + b) * in];
        const float* h =
            k == 0 ? zero.data() : &y[(l.Position(dir, b, k - 1) * l.batch + b) * width + dir * d];
        const Gates g = StepGates(l, dir, x, h);
        const float* dy = dout + (t * l.batch + b) * width + dir * d;
        double* dxt = &dx[(t * l.batch + b) * in];
        std::vector<double> da[3];  // pre-activation gradients: reset, update, candidate
        std::vector<double> dn_rec(d);
        for (int gate = 0; gate < 3; ++gate) da[gate].assign(d, 0.0);
        for (int64_t j = 0; j < d; ++j) {
          const double dout_j = dh[j] + dy[j];
          const double dn = dout_j * (1 - g.z[j]);
          const double dz = dout_j * (h[j] - g.n[j]);
          dh_prev[j] = dout_j * g.z[j];
          da[2][j] = dn * (1 - g.n[j] * g.n[j]);
          dn_rec[j] = da[2][j] * g.r[j];
          da[0][j] = da[2][j] * g.n_rec[j] * g.r[j] * (1 - g.r[j]);
          da[1][j] = dz * g.z[j] * (1 - g.z[j]);
        }
        for (int gate = 0; gate < 3; ++gate) {
          // The recurrent product's gradient: the candidate's is inside r * (...).
          const std::vector<double>& drec = gate == 2 ? dn_rec : da[gate];
          const float* w = l.W(dir, gate);
          const float* r = l.R(dir, gate);
          for (int64_t j = 0; j < d; ++j) {
            dBW[gate][j] += da[gate][j];
            dBR[gate][j] += drec[j];
            for (int64_t i = 0; i < in; ++i) {
              dW[gate][j * in + i] += da[gate][j] * x[i];
              dxt[i] += da[gate][j] * w[j * in + i];
            }
            for (int64_t i = 0; i < d; ++i) {
              dR[gate][j * d + i] += drec[j] * h[i];
              dh_prev[i] += drec[j] * r[j * d + i];
            }
          }
        }
        dh = dh_prev;
      }
    }
  }
  // Into Tern's gradients: the weight space's (rounded as cuDNN's would be) unpacked and added.
  std::vector<float> dspace_f(dspace.size());
  for (size_t i = 0; i < dspace.size(); ++i)
    dspace_f[i] = RoundTo(l.type, static_cast<float>(dspace[i]));
  float* targets[2][kGruSourceCount] = {};
  for (int k = 0; k < l.dirs; ++k) {
    const GruWeights& g = grads.dweights[k];
    const Tensor* t[kGruZero] = {&g.w, &g.wx, &g.u, &g.ux, &g.b, &g.bx};
    for (int s = 0; s < kGruZero; ++s) targets[k][s] = t[s]->defined() ? t[s]->f32() : nullptr;
  }
  UnpackGruWeightGrads(l.segments, dspace_f.data(), targets);
  if (grads.dx.defined()) {
    float* out = grads.dx.f32();
    for (int64_t i = 0; i < grads.dx.numel(); ++i) {
      const float v = RoundTo(l.type, static_cast<float>(dx[i]));
      out[i] = grads.dx_accumulate ? out[i] + v : v;
    }
  }
}

}  // namespace tern::cpu
