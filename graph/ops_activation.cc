// Activations and dropout.
#include "graph/backward.h"
#include "graph/ops.h"
#include "tensor/ops.h"

namespace tern::graph {
namespace {

Var MakeUnary(Var x, tern::UnaryOp op) {
  Graph* g = x.graph();
  Tensor y = g->arena()->Alloc(x.shape());
  Unary(op, x.value(), y);
  Var out = g->AddNode(OpKind::kUnary, y, {x});
  g->node(out).i[0] = op;
  return out;
}

}  // namespace

Var Relu(Var x) { return MakeUnary(x, kRelu); }
Var Tanh(Var x) { return MakeUnary(x, kTanh); }
Var Sigmoid(Var x) { return MakeUnary(x, kSigmoid); }

// Backward from the output y: relu' = [y > 0], tanh' = 1 - y², sigmoid' = y (1 - y).
void UnaryOpBackward(Graph& g, Node& n) {
  UnaryBackward(static_cast<tern::UnaryOp>(n.i[0]), n.value, n.grad, g.Grad(n.inputs[0]));
}

Var Gelu(Var x) {
  Graph* g = x.graph();
  Tensor y = g->arena()->Alloc(x.shape());
  Unary(kGelu, x.value(), y);
  return g->AddNode(OpKind::kGelu, y, {x});
}

void GeluBackward(Graph& g, Node& n) {
  UnaryBackward(kGelu, g.node(n.inputs[0]).value, n.grad, g.Grad(n.inputs[0]));
}

// The mask is made in the pass that applies it, from the seed kept in the node, forward and
// backward: never stored, written or read (two passes over x's size fewer forward, one backward).
Var Dropout(Var x, float p) {
  Graph* g = x.graph();
  if (!g->training() || p <= 0.f) return x;
  const uint64_t seed = g->NextSeed();
  Tensor y = g->arena()->Alloc(x.shape());
  tern::Dropout(x.value(), y, 1.f - p, seed);
  Var out = g->AddNode(OpKind::kDropout, y, {x});
  Node& n = g->node(out);
  n.f[0] = 1.f - p;
  n.i[0] = static_cast<int64_t>(seed);
  return out;
}

void DropoutBackward(Graph& g, Node& n) {
  if (!NeedsGrad(g, n, 0)) return;
  float beta;  // 0 while the input's gradient is new: written, not added to zeros
  const Tensor dx = g.GradForProduct(n.inputs[0], &beta);
  tern::Dropout(n.grad, dx, n.f[0], static_cast<uint64_t>(n.i[0]), /*accumulate=*/beta != 0.f);
}

}  // namespace tern::graph
