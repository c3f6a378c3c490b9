#include "models/rnn_layers.h"

#include <glog/logging.h>

#include <algorithm>

#include "graph/ops.h"
#include "tensor/ops.h"

namespace tern::models {

using graph::Init;
using graph::Var;

namespace {

void AddLayerNormParams(graph::ParamStore* s, const std::string& name, int dim) {
  s->Add(name + "_lns", {dim}, Init::kOnes);
  s->Add(name + "_lnb", {dim}, Init::kZeros);
}

// (rows, cols) of ones, for broadcasting a column.

}  // namespace

void AddGruParams(graph::ParamStore* s, const std::string& p, int input_dim, int state_dim,
                  bool layer_norm) {
  const int d = state_dim;
  if (input_dim > 0) {
    s->Add(p + "_W", {input_dim, 2 * d}, Init::kGlorotUniform);
    s->Add(p + "_Wx", {input_dim, d}, Init::kGlorotUniform);
  }
  s->Add(p + "_b", {2 * d}, Init::kZeros);
  s->Add(p + "_bx", {d}, Init::kZeros);
  s->Add(p + "_U", {d, 2 * d}, Init::kGlorotUniform);
  s->Add(p + "_Ux", {d, d}, Init::kGlorotUniform);
  if (layer_norm) {
    if (input_dim > 0) {
      AddLayerNormParams(s, p + "_W", 2 * d);
      AddLayerNormParams(s, p + "_Wx", d);
    }
    AddLayerNormParams(s, p + "_U", 2 * d);
    AddLayerNormParams(s, p + "_Ux", d);
  }
}

void AddAttentionParams(graph::ParamStore* s, const std::string& p, int state_dim, int context_dim,
                        bool layer_norm) {
  s->Add(p + "_W_comb_att", {state_dim, context_dim}, Init::kGlorotUniform);
  s->Add(p + "_Wc_att", {context_dim, context_dim}, Init::kGlorotUniform);
  s->Add(p + "_b_att", {context_dim}, Init::kZeros);
  s->Add(p + "_U_att", {context_dim, 1}, Init::kGlorotUniform);
  if (layer_norm) {
    AddLayerNormParams(s, p + "_W_comb_att", context_dim);
    AddLayerNormParams(s, p + "_Wc_att", context_dim);
  }
}

GruCell::GruCell(const RnnCtx& c, const std::string& prefix, bool /*has_input*/)
    : c_(c), prefix_(prefix) {
  u_ = c.P(prefix + "_U");
  ux_ = c.P(prefix + "_Ux");
  b_ = c.P(prefix + "_b");
  bx_ = c.P(prefix + "_bx");
}

Var GruCell::Norm(Var x, const std::string& name) const {
  if (!c_.layer_norm) return x;
  return graph::LayerNorm(x, c_.P(prefix_ + name + "_lns"), c_.P(prefix_ + name + "_lnb"));
}

// With layer normalization the bias is added after the norm (Nematus: LN(x W) + b).
GruCell::Projected GruCell::Project(Var x) const {
  if (!c_.layer_norm)
    return {graph::Linear(x, c_.P(prefix_ + "_W"), b_),
            graph::Linear(x, c_.P(prefix_ + "_Wx"), bx_)};
  Var rz = Norm(graph::Linear(x, c_.P(prefix_ + "_W"), Var()), "_W");
  Var h = Norm(graph::Linear(x, c_.P(prefix_ + "_Wx"), Var()), "_Wx");
  return {graph::AddBroadcast(rz, b_), graph::AddBroadcast(h, bx_)};
}

Var GruCell::Step(const Projected& in, Var s, const Tensor& mask) const {
  const int64_t d = s.dim(1);
  Var su_rz = Norm(graph::MatMul(s, u_), "_U");   // (batch, 2d)
  Var su_h = Norm(graph::MatMul(s, ux_), "_Ux");  // (batch, d)
  // A transition cell's input is its biases alone, one row shared by every row of the batch.
  Var in_rz = in.rz.valid() ? in.rz : graph::Reshape(b_, {1, 2 * d});
  Var in_h = in.h.valid() ? in.h : graph::Reshape(bx_, {1, d});
  // r, z = sigmoid(in_rz + su_rz); h = tanh(in_h + r su_h); s' = h + z (s - h); with a mask
  // s + mask (s' - s).
  return graph::GruStep(in_rz, in_h, su_rz, su_h, s, mask);
}

Tensor TimeMajorMask(Arena* arena, const Tensor& src_mask) {
  const int64_t batch = src_mask.dim(0), len = src_mask.dim(1);
  Tensor tm = arena->Alloc({len, batch});
  Permute0213(src_mask.Reshape({1, batch, len, 1}), tm.Reshape({1, len, batch, 1}));
  return tm;
}

const char* WholeGruLayerRefusal(const GruLayerCase& layer) {
  if (!layer.device_runs_whole_layers) return "the device runs no whole GRU layers";
  if (layer.layer_norm) return "layer normalization inside the cell (model.layer_normalization)";
  if (layer.state_dropout) return "dropout on the recurrent state (model.rnn_dropout)";
  if (layer.cells != 1) return "a deep transition (more than one cell a layer)";
  if (layer.right_to_left_alone) return "a right-to-left layer apart from its left-to-right twin";
  if (layer.steps < 1 || layer.batch < 1) return "an empty sequence";
  if (layer.masked) {
    if (!layer.lengths.defined() || layer.lengths.numel() != layer.batch ||
        layer.lengths.device() != Device::kCpu || layer.lengths.dtype() != DType::kInt32)
      return "padding without the batch's lengths on the host";
    for (int64_t b = 0; b < layer.batch; ++b) {
      const int32_t n = layer.lengths.i32()[b];
      if (n < 1 || n > layer.steps) return "a sentence of no tokens, or longer than the batch";
    }
  }
  return nullptr;
}

Tensor HostLengths(const std::vector<int32_t>& lengths) {
  if (lengths.empty()) return Tensor();
  return Tensor(const_cast<int32_t*>(lengths.data()), {static_cast<int64_t>(lengths.size())},
                DType::kInt32, Device::kCpu);
}

namespace {

GruLayerCase CaseOf(const RnnCtx& c, size_t cells, bool right_to_left_alone, Var x,
                    const Tensor& mask, const Tensor& lengths) {
  GruLayerCase layer;
  layer.device_runs_whole_layers = WholeGruLayers(x.value().device());
  layer.layer_norm = c.layer_norm;
  layer.state_dropout = c.g.training() && c.dropout > 0.f;
  layer.cells = cells;
  layer.right_to_left_alone = right_to_left_alone;
  layer.steps = x.dim(0);
  layer.batch = x.dim(1);
  layer.masked = mask.defined();
  layer.lengths = lengths;
  return layer;
}

// Whether the layer runs whole; says once why not where the device could have.
bool RunsWhole(const GruLayerCase& layer) {
  const char* refusal = WholeGruLayerRefusal(layer);
  if (refusal != nullptr && layer.device_runs_whole_layers) {
    LOG_FIRST_N(INFO, 1) << "[model] a GRU layer runs Tern's step kernels, not a whole-layer "
                            "kernel (cuDNN): "
                         << refusal;
  }
  return refusal == nullptr;
}

graph::GruLayerParams LayerParams(const RnnCtx& c, const std::string& p) {
  return {c.P(p + "_W"),  c.P(p + "_Wx"), c.P(p + "_U"),
          c.P(p + "_Ux"), c.P(p + "_b"),  c.P(p + "_bx")};
}

}  // namespace

Var RunGruLayer(const RnnCtx& c, const std::vector<std::string>& cells, Var x, int state_dim,
                const Tensor& mask, bool reverse, const Tensor& lengths) {
  if (RunsWhole(CaseOf(c, cells.size(), reverse, x, mask, lengths)))
    return graph::GruLayer(x, {LayerParams(c, cells[0])}, mask, lengths);
  const int64_t len = x.dim(0), batch = x.dim(1);
  Arena* arena = c.g.arena();
  const bool drop = c.g.training() && c.dropout > 0.f;
  if (drop) x = graph::Dropout(x, c.dropout);
  std::vector<GruCell> stack;
  for (size_t j = 0; j < cells.size(); ++j) stack.emplace_back(c, cells[j], j == 0);
  GruCell::Projected in = stack[0].Project(x);  // (len, batch, 2d), (len, batch, d)
  Tensor state_mask;
  if (drop) {
    state_mask = arena->Alloc({batch, state_dim});
    DropoutMask(state_mask, 1.f - c.dropout, c.g.NextSeed());
  }
  Tensor zeros = arena->AllocZeros({batch, state_dim});
  Var s = c.g.Constant(zeros);
  std::vector<Var> states(len);
  for (int64_t k = 0; k < len; ++k) {
    const int64_t t = reverse ? len - 1 - k : k;
    Tensor step_mask = mask.defined() ? mask.Slice(t, t + 1).Reshape({batch}) : Tensor();
    if (drop) s = graph::Mul(s, c.g.Constant(state_mask));
    GruCell::Projected step{graph::Reshape(graph::Slice(in.rz, t, t + 1), {batch, 2 * state_dim}),
                            graph::Reshape(graph::Slice(in.h, t, t + 1), {batch, state_dim})};
    s = stack[0].Step(step, s, step_mask);
    for (size_t j = 1; j < stack.size(); ++j) s = stack[j].Step({}, s, step_mask);
    states[t] = s;
  }
  return graph::Stack(states);
}

Var RunBiGruLayer(const RnnCtx& c, const std::vector<std::string>& forward,
                  const std::vector<std::string>& backward, Var x, int state_dim,
                  const Tensor& mask, const Tensor& lengths) {
  if (RunsWhole(CaseOf(c, std::max(forward.size(), backward.size()), false, x, mask, lengths)))
    return graph::GruLayer(x, {LayerParams(c, forward[0]), LayerParams(c, backward[0])}, mask,
                           lengths);
  Var fw = RunGruLayer(c, forward, x, state_dim, mask, /*reverse=*/false, lengths);
  Var bw = RunGruLayer(c, backward, x, state_dim, mask, /*reverse=*/true, lengths);
  return ConcatEqualLastDim(fw, bw);
}

MlpAttention::MlpAttention(const RnnCtx& c, const std::string& prefix, Var context_bm,
                           const Tensor& src_mask)
    : c_(c), prefix_(prefix), context_bm_(context_bm), src_mask_(src_mask) {
  mapped_ = graph::Linear(context_bm, c.P(prefix + "_Wc_att"), Var());
  if (c.layer_norm)
    mapped_ = graph::LayerNorm(mapped_, c.P(prefix + "_Wc_att_lns"), c.P(prefix + "_Wc_att_lnb"));
  mapped_ = graph::AddBroadcast(mapped_, c.P(prefix + "_b_att"));
  w_comb_ = c.P(prefix + "_W_comb_att");
  u_att_ = c.P(prefix + "_U_att");
}

Var MlpAttention::Step(Var state) const {
  const int64_t batch = mapped_.dim(0), len = mapped_.dim(1), cdim = mapped_.dim(2);
  Var q = graph::MatMul(state, w_comb_);  // (batch, c)
  if (c_.layer_norm)
    q = graph::LayerNorm(q, c_.P(prefix_ + "_W_comb_att_lns"), c_.P(prefix_ + "_W_comb_att_lnb"));
  // tanh(mapped + q) . u in one fused op: the (batch, len, c) energies are never stored.
  Var scores = graph::Reshape(graph::AttentionScores(q, mapped_, u_att_), {batch, 1, 1, len});
  Var alpha = graph::Softmax(scores, src_mask_);  // (batch, 1, 1, len)
  Var ctx = graph::MatMul(graph::Reshape(alpha, {batch, 1, len}), context_bm_);  // (batch, 1, c)
  return graph::Reshape(ctx, {batch, cdim});
}

// The softmax of zeros under the mask is 1/length on the tokens: the masked mean's weights.
Var MaskedMean(graph::Graph& g, Var context_bm, const Tensor& src_mask) {
  const int64_t batch = context_bm.dim(0), len = context_bm.dim(1);
  Tensor zeros = g.arena()->AllocZeros({batch, 1, 1, len});
  Tensor weights = g.arena()->Alloc({batch, 1, 1, len});
  Softmax(zeros, weights, src_mask);
  Var mean = graph::MatMul(g.Constant(weights.Reshape({batch, 1, len})), context_bm);
  return graph::Reshape(mean, {batch, context_bm.dim(2)});
}

// Stack (2, rows, d) -> Transpose01 (rows, 2, d) -> (..., 2d).
Var ConcatEqualLastDim(Var a, Var b) {
  const int64_t d = a.shape().cols(), rows = a.value().rows();
  Var both = graph::Transpose01(graph::Reshape(graph::Stack({a, b}), {2, rows, d}));
  Shape shape = a.shape();
  shape.set_dim(-1, 2 * d);
  return graph::Reshape(both, shape);
}

}  // namespace tern::models
