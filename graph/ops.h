// Differentiable ops. Each records a node on its inputs' Graph; its backward (next to its forward
// in graph/ops_*.cc) accumulates into the inputs' gradients. All float32.
#pragma once

#include <vector>

#include "graph/graph.h"

namespace tern::graph {

// c = alpha * op(a) @ op(b). a, b 2-D, or both 3-D (batched), or a of rank > 2 with 2-D b.
Var MatMul(Var a, Var b, bool trans_a = false, bool trans_b = false, float alpha = 1.f);
// y (..., out) = x (..., in) @ w (in, out) + b (out); b may be invalid (no bias). With trans_w,
// w is (out, in) (a tied output embedding). With relu, y = Relu(x @ w + b) in the product's own
// pass where the device can (GemmBias' activation: a feed-forward layer's first product).
Var Linear(Var x, Var w, Var b, bool trans_w = false, bool relu = false);
Var Add(Var a, Var b);  // same shape
Var Mul(Var a, Var b);  // same shape, elementwise
Var Scale(Var x, float alpha);
Var Reshape(Var x, const Shape& shape);

Var Relu(Var x);
Var Tanh(Var x);
Var Sigmoid(Var x);
Var Gelu(Var x);   // tanh approximation
Var Swish(Var x);  // x sigmoid(x) (SiLU)
// Inverted dropout: identity when the graph is not training or p == 0.
Var Dropout(Var x, float p);
// x + Dropout(f, p) in one pass (a sublayer's output and its residual connection); Add(x, f)
// when the graph is not training or p == 0.
Var DropoutAdd(Var x, Var f, float p);

// Over the last dim; gamma, beta (n).
Var LayerNorm(Var x, Var gamma, Var beta, float eps = 1e-6f);
// Row softmax of scale * x. For attention: x (batch, heads, tq, tk), key_mask (batch, tk) float
// 1/0 (may be undefined), causal masks future keys.
Var Softmax(Var x, const Tensor& key_mask = Tensor(), bool causal = false, float scale = 1.f);

// (batch, time, heads*dk) -> (batch*heads, time, dk) and back.
Var SplitHeads(Var x, int heads);
Var MergeHeads(Var x, int heads);

// out (n..., d) = scale * table[ids]; ids int32 of any shape.
Var Embedding(Var table, const Tensor& ids, float scale = 1.f);
// Per-row label-smoothed cross-entropy: logits (..., V), targets int32 (...) → loss (rows).
// Rows whose target is ignore_id have loss 0.
Var CrossEntropy(Var logits, const Tensor& targets, float smoothing, int32_t ignore_id);
// Sum of all elements → (1).
Var Sum(Var x);

// Sequence ops (graph/ops_sequence.cc), for recurrent networks run step by step over
// time-major tensors, where one time step is a contiguous slice along dim 0.
// x (n, rest...) -> (end - begin, rest...), a view.
Var Slice(Var x, int64_t begin, int64_t end);
// xs: k tensors of one shape s -> (k, s...).
Var Stack(const std::vector<Var>& xs);
// x (a, b, rest...) -> (b, a, rest...): batch-major <-> time-major.
Var Transpose01(Var x);
// x (lead..., rest...) + y (rest...) broadcast over the leading dims.
Var AddBroadcast(Var x, Var y);

// The GRU models' fused ops (graph/ops_recurrent.cc), each one kernel forward and one backward.
// The MLP attention's scores: q (B, c), mapped (B, S, c), u (c, 1) -> (B, S) with
// [b, t] = tanh(mapped[b, t] + q[b]) . u (tensor/ops.h's AdditiveAttentionScores).
Var AttentionScores(Var q, Var mapped, Var u);
// One GRU update (tensor/ops.h's GruCell): in_rz (rows or 1, 2d), in_h (rows or 1, d), su_rz
// (rows, 2d), su_h and s (rows, d); row_mask (rows) 1/0 keeps a padded row's state, or undefined.
// r, z, h are recomputed in the backward pass, not kept.
Var GruStep(Var in_rz, Var in_h, Var su_rz, Var su_h, Var s, const Tensor& row_mask);
// A whole GRU layer as one op (tensor/ops.h GruLayerForward: cuDNN's RNN on a GPU): x (T, B, in)
// -> (T, B, directions d), left to right and, with two directions, right to left in the second
// half. Each direction's parameters in Tern's layout (models/rnn_layers.h: W (in, 2d), Wx (in, d),
// U (d, 2d), Ux (d, d), b (2d), bx (d)); mask (T, B) 1/0, a run of ones then zeros per column, with
// lengths (B) int32 on the host its columns' ones (both undefined: no padding). The same function
// as the steps (GruStep) over the masked sequence. With mixed precision x enters as the graph's
// rounded operand and the weights are rounded as the device packs them for its kernel.
// REQUIRES: tern::WholeGruLayers(x's device).
struct GruLayerParams {
  Var w, wx, u, ux, b, bx;
};
Var GruLayer(Var x, const std::vector<GruLayerParams>& directions, const Tensor& mask,
             const Tensor& lengths);

}  // namespace tern::graph
