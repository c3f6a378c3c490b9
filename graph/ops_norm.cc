// Layer normalization, softmax and the reshuffles that split and merge attention heads.
#include "graph/backward.h"
#include "graph/ops.h"
#include "tensor/ops.h"

namespace tern::graph {

Var LayerNorm(Var x, Var gamma, Var beta, float eps) {
  Graph* g = x.graph();
  Arena* arena = g->arena();
  Tensor y = arena->Alloc(x.shape());
  Tensor mean = arena->Alloc({x.value().rows()}), rstd = arena->Alloc({x.value().rows()});
  tern::LayerNorm(x.value(), gamma.value(), beta.value(), y, mean, rstd, eps);
  Var out = g->AddNode(OpKind::kLayerNorm, y, {x, gamma, beta});
  Node& n = g->node(out);
  n.saved = {mean, rstd, Tensor()};
  return out;
}

void LayerNormOpBackward(Graph& g, Node& n) {
  const Tensor& x = g.node(n.inputs[0]).value;
  const Tensor& gamma = g.node(n.inputs[1]).value;
  // dx is always computed (an arena scratch when x needs no gradient is rare: inputs are
  // activations); gamma/beta gradients only when wanted.
  bool accumulate = false;
  Tensor dx =
      NeedsGrad(g, n, 0) ? g.GradToWrite(n.inputs[0], &accumulate) : g.arena()->Alloc(x.shape());
  Tensor dgamma = NeedsGrad(g, n, 1) ? g.Grad(n.inputs[1]) : Tensor();
  Tensor dbeta = NeedsGrad(g, n, 2) ? g.Grad(n.inputs[2]) : Tensor();
  LayerNormBackward(x.Flatten2D(), gamma, n.saved[0], n.saved[1], n.grad.Flatten2D(),
                    dx.Flatten2D(), dgamma, dbeta, accumulate);
}

Var Softmax(Var x, const Tensor& key_mask, bool causal, float scale) {
  Graph* g = x.graph();
  Tensor y = g->arena()->Alloc(x.shape());
  tern::Softmax(x.value(), y, key_mask, causal, scale);
  Var out = g->AddNode(OpKind::kSoftmax, y, {x});
  g->node(out).f[0] = scale;
  return out;
}

void SoftmaxOpBackward(Graph& g, Node& n) {
  bool accumulate;
  const Tensor dx = g.GradToWrite(n.inputs[0], &accumulate);
  SoftmaxBackward(n.value, n.grad, dx, n.f[0], accumulate);
}

// (B, T, H*dk) -> view (B, T, H, dk) -> permute (B, H, T, dk) -> view (B*H, T, dk).
Var SplitHeads(Var x, int heads) {
  Graph* g = x.graph();
  const int64_t b = x.dim(0), t = x.dim(1), dk = x.dim(2) / heads;
  Tensor y = g->arena()->Alloc({b, heads, t, dk});
  Permute0213(x.value().Reshape({b, t, heads, dk}), y);
  Var out = g->AddNode(OpKind::kSplitHeads, y.Reshape({b * heads, t, dk}), {x});
  g->node(out).i[0] = heads;
  return out;
}

void SplitHeadsBackward(Graph& g, Node& n) {
  const int64_t heads = n.i[0];
  const Tensor& dy = n.grad;  // (B*H, T, dk)
  const int64_t b = dy.dim(0) / heads, t = dy.dim(1), dk = dy.dim(2);
  bool accumulate;
  Tensor dx = g.GradToWrite(n.inputs[0], &accumulate);
  Permute0213(dy.Reshape({b, heads, t, dk}), dx.Reshape({b, t, heads, dk}), accumulate);
}

// (B*H, T, dk) -> (B, T, H*dk).
Var MergeHeads(Var x, int heads) {
  Graph* g = x.graph();
  const int64_t b = x.dim(0) / heads, t = x.dim(1), dk = x.dim(2);
  Tensor y = g->arena()->Alloc({b, t, heads, dk});
  Permute0213(x.value().Reshape({b, heads, t, dk}), y);
  Var out = g->AddNode(OpKind::kMergeHeads, y.Reshape({b, t, heads * dk}), {x});
  g->node(out).i[0] = heads;
  return out;
}

void MergeHeadsBackward(Graph& g, Node& n) {
  const int64_t heads = n.i[0];
  const Tensor& dy = n.grad;  // (B, T, H*dk)
  const int64_t b = dy.dim(0), t = dy.dim(1), dk = dy.dim(2) / heads;
  bool accumulate;
  Tensor dx = g.GradToWrite(n.inputs[0], &accumulate);
  Permute0213(dy.Reshape({b, t, heads, dk}), dx.Reshape({b, heads, t, dk}), accumulate);
}

}  // namespace tern::graph
