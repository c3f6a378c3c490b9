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

Var Dropout(Var x, float p) {
  Graph* g = x.graph();
  if (!g->training() || p <= 0.f) return x;
  Tensor mask = g->arena()->Alloc(x.shape());
  DropoutMask(mask, 1.f - p, g->NextSeed());
  Tensor y = g->arena()->Alloc(x.shape());
  tern::Mul(x.value(), mask, y);
  Var out = g->AddNode(OpKind::kDropout, y, {x});
  g->node(out).saved[0] = mask;
  return out;
}

void DropoutBackward(Graph& g, Node& n) {
  tern::Mul(n.grad, n.saved[0], g.Grad(n.inputs[0]), /*accumulate=*/true);
}

}  // namespace tern::graph
