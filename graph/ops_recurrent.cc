// The GRU models' fused ops: one kernel forward and one backward each, where a composition of
// elementwise ops would launch a dozen and keep their intermediates for the backward pass.
#include "graph/backward.h"
#include "graph/ops.h"
#include "tensor/ops.h"

namespace tern::graph {

Var AttentionScores(Var q, Var mapped, Var u) {
  Graph* g = q.graph();
  CHECK(q.value().rank() == 2 && mapped.value().rank() == 3 && q.dim(0) == mapped.dim(0))
      << "AttentionScores: q " << q.shape().ToString() << ", mapped " << mapped.shape().ToString();
  Tensor scores = g->arena()->Alloc({mapped.dim(0), mapped.dim(1)});
  AdditiveAttentionScores(q.value(), mapped.value(), u.value(), scores);
  return g->AddNode(OpKind::kAttentionScores, scores, {q, mapped, u});
}

// tanh(mapped + q) is recomputed rather than kept: (B, S, c) a target step would hold otherwise.
void AttentionScoresBackward(Graph& g, Node& n) {
  auto grad = [&](int k) { return NeedsGrad(g, n, k) ? g.Grad(n.inputs[k]) : Tensor(); };
  AdditiveAttentionScoresBackward(g.node(n.inputs[0]).value, g.node(n.inputs[1]).value,
                                  g.node(n.inputs[2]).value, n.grad, grad(0), grad(1), grad(2));
}

}  // namespace tern::graph
