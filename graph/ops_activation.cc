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
  bool accumulate;
  const Tensor dx = g.GradToWrite(n.inputs[0], &accumulate);
  UnaryBackward(static_cast<tern::UnaryOp>(n.i[0]), n.value, n.grad, dx, accumulate);
}

// GELU and swish: their derivatives are functions of the input, which the backward reads.
Var MakeUnaryOfInput(Var x, tern::UnaryOp op) {
  Graph* g = x.graph();
  Tensor y = g->arena()->Alloc(x.shape());
  Unary(op, x.value(), y);
  Var out = g->AddNode(OpKind::kUnaryOfInput, y, {x});
  g->node(out).i[0] = op;
  return out;
}

Var Gelu(Var x) { return MakeUnaryOfInput(x, kGelu); }
Var Swish(Var x) { return MakeUnaryOfInput(x, kSwish); }

void UnaryOfInputBackward(Graph& g, Node& n) {
  bool accumulate;
  const Tensor dx = g.GradToWrite(n.inputs[0], &accumulate);
  UnaryBackward(static_cast<tern::UnaryOp>(n.i[0]), g.node(n.inputs[0]).value, n.grad, dx,
                accumulate);
}

// The mask is made in the pass that applies it, from the seed kept in the node, forward and
// backward: never stored, written or read (two passes over x's size fewer forward, one backward).
namespace {

// y = Dropout(f) (+ x, the node's second input, when given).
Var DropoutNode(Var f, Var x, float p) {
  Graph* g = f.graph();
  const uint64_t seed = g->NextSeed();
  Tensor y = g->arena()->Alloc(f.shape());
  tern::Dropout(f.value(), y, 1.f - p, seed, x.valid() ? x.value() : Tensor());
  Var out =
      x.valid() ? g->AddNode(OpKind::kDropout, y, {f, x}) : g->AddNode(OpKind::kDropout, y, {f});
  Node& n = g->node(out);
  n.f[0] = 1.f - p;
  n.i[0] = static_cast<int64_t>(seed);
  return out;
}

}  // namespace

Var Dropout(Var x, float p) {
  if (!x.graph()->training() || p <= 0.f) return x;
  return DropoutNode(x, Var(), p);
}

Var DropoutAdd(Var x, Var f, float p) {
  if (!x.graph()->training() || p <= 0.f) return Add(x, f);
  CHECK(x.shape() == f.shape()) << "DropoutAdd: x " << x.shape().ToString() << ", f "
                                << f.shape().ToString();
  return DropoutNode(f, x, p);
}

void DropoutBackward(Graph& g, Node& n) {
  if (n.num_inputs == 2 && NeedsGrad(g, n, 1)) g.AccumulateGrad(n.inputs[1], n.grad);
  if (!NeedsGrad(g, n, 0)) return;
  float beta;  // 0 while the input's gradient is new: written, not added to zeros
  const Tensor df = g.GradForProduct(n.inputs[0], &beta);
  tern::Dropout(n.grad, df, n.f[0], static_cast<uint64_t>(n.i[0]), beta != 0.f ? df : Tensor());
}

}  // namespace tern::graph
