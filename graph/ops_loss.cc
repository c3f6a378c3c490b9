// Embedding lookup, cross-entropy and reduction to a scalar.
#include "graph/backward.h"
#include "graph/ops.h"
#include "tensor/allocator.h"
#include "tensor/ops.h"

namespace tern::graph {

Var Embedding(Var table, const Tensor& ids, float scale) {
  Graph* g = table.graph();
  std::vector<int64_t> dims = ids.shape().dims();
  dims.push_back(table.dim(1));
  Tensor y = g->arena()->Alloc(Shape(dims));
  GatherRows(table.value(), ids.Reshape({ids.numel()}), y.Flatten2D(), scale);
  Var out = g->AddNode(OpKind::kEmbedding, y, {table});
  Node& n = g->node(out);
  n.saved[0] = ids.Reshape({ids.numel()});
  n.f[0] = scale;
  return out;
}

void EmbeddingBackward(Graph& g, Node& n) {
  ScatterAddRows(n.grad.Flatten2D(), n.saved[0], g.Grad(n.inputs[0]), n.f[0]);
}

Var CrossEntropy(Var logits, const Tensor& targets, float smoothing, int32_t ignore_id) {
  Graph* g = logits.graph();
  const int64_t rows = logits.value().rows();
  Tensor loss = g->arena()->Alloc({rows}), lse = g->arena()->Alloc({rows});
  Tensor t = targets.Reshape({rows});
  tern::CrossEntropy(logits.value().Flatten2D(), t, smoothing, ignore_id, loss, lse);
  Var out = g->AddNode(OpKind::kCrossEntropy, loss, {logits});
  Node& n = g->node(out);
  n.saved = {t, lse, Tensor()};
  n.f[0] = smoothing;
  n.i[0] = ignore_id;
  return out;
}

void CrossEntropyOpBackward(Graph& g, Node& n) {
  const Tensor logits = g.node(n.inputs[0]).value.Flatten2D();
  bool accumulate;
  const Tensor dlogits = g.GradToWrite(n.inputs[0], &accumulate);
  CrossEntropyBackward(logits, n.saved[0], n.f[0], static_cast<int32_t>(n.i[0]), n.saved[1], n.grad,
                       dlogits.Flatten2D(), accumulate);
}

Var Sum(Var x) {
  Graph* g = x.graph();
  Tensor flat = x.value().Reshape({1, x.value().numel()});
  Tensor y = g->arena()->Alloc({1});
  SumRows(flat.Reshape({x.value().numel(), 1}), y, 0.f);
  return g->AddNode(OpKind::kSum, y, {x});
}

// dx += dy, the one value read where it lives (as a bias of one column): bringing it to the
// host would make a GPU's step wait for its forward pass.
void SumBackward(Graph& g, Node& n) {
  Tensor dx = g.Grad(n.inputs[0]);
  AddBias(dx.Reshape({dx.numel(), 1}), n.grad.Reshape({1}));
}

}  // namespace tern::graph
