// Recurrent building blocks for the GRU encoder-decoders (models/s2s.h, models/devlin.h): the
// Nematus GRU cell, stacks of cells run over a time-major sequence, and MLP (Bahdanau) attention.
//
// Parameter names follow Marian's rnn/cells.h and rnn/attention.h (W stored (in, out)):
//   GRU {p}: {p}_W (in, 2d), {p}_b (2d), {p}_U (d, 2d) for the reset and update gates [r | z];
//            {p}_Wx (in, d), {p}_bx (d), {p}_Ux (d, d) for the candidate state. A transition cell
//            (input size 0) has no W, Wx. With layer normalization: {p}_{W,Wx,U,Ux}_ln{s,b}.
//   attention {p}: {p}_W_comb_att (d, c), {p}_Wc_att (c, c), {p}_b_att (c), {p}_U_att (c, 1).
// The GRU (Cho et al. 2014, as in Nematus):
//   r, z = sigmoid(x W + b + s U);  h = tanh(x Wx + bx + r * (s Ux));  s' = z * s + (1 - z) * h,
// and where the step's mask is 0 (padding) the state is carried over: s' = s.
#pragma once

#include <string>
#include <vector>

#include "graph/graph.h"
#include "graph/params.h"
#include "tensor/tensor.h"

namespace tern::models {

// input_dim 0 = a transition cell, which reads only its state.
void AddGruParams(graph::ParamStore* store, const std::string& prefix, int input_dim, int state_dim,
                  bool layer_norm);
void AddAttentionParams(graph::ParamStore* store, const std::string& prefix, int state_dim,
                        int context_dim, bool layer_norm);

// The per-call context the layers share.
struct RnnCtx {
  graph::Graph& g;
  const graph::ParamStore& params;
  bool layer_norm = false;
  // Dropout on a layer's input, and on the recurrent state with one mask for every step
  // (variational, Gal & Ghahramani 2016, as Marian's dropout-rnn).
  float dropout = 0.f;
  graph::Var P(const std::string& name) const { return g.Param(params, name); }
};

// One GRU cell bound to its parameters.
class GruCell {
 public:
  GruCell(const RnnCtx& c, const std::string& prefix, bool has_input);
  // x (..., in) -> the input's share of the gates: rz (..., 2d), h (..., d). A whole sequence at
  // once, so the steps need only the recurrent products.
  struct Projected {
    graph::Var rz, h;
  };
  Projected Project(graph::Var x) const;
  // One step, one fused op (graph::GruStep). in: rows of Project for this step ({} for a
  // transition cell); s (batch, d); mask (batch) 1/0 or undefined (no padding).
  graph::Var Step(const Projected& in, graph::Var s, const Tensor& mask) const;

 private:
  graph::Var Norm(graph::Var x, const std::string& name) const;
  const RnnCtx& c_;
  std::string prefix_;
  graph::Var u_, ux_, b_, bx_;
};

// Runs a stack of cells (a deep-transition layer: cell 1 reads x, the others only the state)
// over x (T, batch, in), from the left or (reverse) from the right, starting from a zero state.
// mask (T, batch) or undefined; lengths (batch) int32 on the host, the ones of each column of
// mask, or undefined. Returns the last cell's states (T, batch, d). A layer that can runs whole
// (graph::GruLayer: cuDNN's on a GPU; WholeGruLayerRefusal says when), else step by step.
graph::Var RunGruLayer(const RnnCtx& c, const std::vector<std::string>& cells, graph::Var x,
                       int state_dim, const Tensor& mask, bool reverse,
                       const Tensor& lengths = Tensor());
// A bidirectional layer over one input: [left to right | right to left] (T, batch, 2d), from the
// cells `forward` and `backward`. One whole-layer op where it can run whole, else the two
// directions' RunGruLayer and ConcatEqualLastDim.
graph::Var RunBiGruLayer(const RnnCtx& c, const std::vector<std::string>& forward,
                         const std::vector<std::string>& backward, graph::Var x, int state_dim,
                         const Tensor& mask, const Tensor& lengths);

// What decides whether a GRU layer runs as one whole-layer op (cuDNN's GRU computes the function
// of models/rnn_layers.h's cell only without the extras Tern's cells have).
struct GruLayerCase {
  bool device_runs_whole_layers = false;  // tensor/ops.h WholeGruLayers on the layer's device
  bool layer_norm = false;                // model.layer_normalization
  bool state_dropout = false;             // training with rnn_dropout: a mask on the state
  size_t cells = 1;                       // a deep transition has more than one
  bool right_to_left_alone = false;       // a reverse layer without its left-to-right twin
  int64_t steps = 0, batch = 0;           // x's first two dims
  bool masked = false;
  Tensor lengths;  // (batch) int32 on the host with a mask, or undefined
};
// Why the layer cannot run whole (one line), or nullptr when it can: whole layers on the device,
// no layer normalization, no state dropout, one cell, not right to left alone, and with a mask
// every column's length on the host, from 1 to steps.
const char* WholeGruLayerRefusal(const GruLayerCase& layer);

// Source mask (batch, T) 1/0 -> time-major (T, batch) for RunGruLayer.
Tensor TimeMajorMask(Arena* arena, const Tensor& src_mask);
// A host view of a batch's source lengths (models/model.h BatchTensors::src_lengths); undefined
// when there are none.
Tensor HostLengths(const std::vector<int32_t>& lengths);

// MLP attention over a fixed source context.
class MlpAttention {
 public:
  // context_bm (batch, Ts, c); src_mask (batch, Ts).
  MlpAttention(const RnnCtx& c, const std::string& prefix, graph::Var context_bm,
               const Tensor& src_mask);
  // state (batch, d) -> the attended context (batch, c).
  graph::Var Step(graph::Var state) const;

 private:
  const RnnCtx& c_;
  std::string prefix_;
  graph::Var mapped_;  // (batch, Ts, c) = context Wc_att + b_att
  graph::Var context_bm_, w_comb_, u_att_;
  Tensor src_mask_;
};

// Masked mean over time: context_bm (batch, Ts, c), src_mask (batch, Ts) -> (batch, c).
graph::Var MaskedMean(graph::Graph& g, graph::Var context_bm, const Tensor& src_mask);

// a (..., d1), b (..., d2) with the same leading dims -> (..., d1 + d2) when d1 == d2.
graph::Var ConcatEqualLastDim(graph::Var a, graph::Var b);

}  // namespace tern::models
