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

Var GruStep(Var in_rz, Var in_h, Var su_rz, Var su_h, Var s, const Tensor& row_mask) {
  Graph* g = s.graph();
  Tensor out = g->arena()->Alloc(s.shape());
  GruCell(in_rz.value(), in_h.value(), su_rz.value(), su_h.value(), s.value(), row_mask, out);
  Var v = g->AddNodeN(OpKind::kGruStep, out, {in_rz, in_h, su_rz, su_h, s});
  g->node(v).saved[0] = row_mask;
  return v;
}

// The pre-activations' gradients go to the input projections (or, summed over the rows, to the
// bias row they share) and to the state products; su_h's and s's are accumulated in the kernel.
void GruStepBackward(Graph& g, Node& n) {
  const int* ids = g.MultiInputs(n);
  auto value = [&](int k) -> const Tensor& { return g.node(ids[k]).value; };
  auto needs = [&](int k) { return g.node(ids[k]).requires_grad; };
  const Tensor& s = value(4);
  Tensor d_rz = g.arena()->Alloc(value(2).shape()), d_h = g.arena()->Alloc(s.shape());
  GruCellBackward(value(0), value(1), value(2), value(3), s, n.saved[0], n.grad, d_rz, d_h,
                  needs(3) ? g.Grad(ids[3]) : Tensor(), needs(4) ? g.Grad(ids[4]) : Tensor());
  // d_rz is both inputs' gradient (their sum's): the inputs' rows, or a row broadcast to all
  // (summed). d_h and then d_rz's last use become gradients themselves where they are the first.
  auto add = [&](int k, const Tensor& d, bool last_use) {
    if (!needs(k)) return;
    if (g.node(ids[k]).value.numel() != d.numel()) {
      Tensor grad = g.Grad(ids[k]);
      SumRows(d, grad.Reshape({grad.numel()}), 1.f);
    } else if (last_use) {
      g.GiveGrad(ids[k], d);
    } else {
      g.AccumulateGrad(ids[k], d);
    }
  };
  add(0, d_rz, /*last_use=*/!needs(2));
  add(1, d_h, /*last_use=*/true);
  add(2, d_rz, /*last_use=*/true);
}

namespace {

// The GruLayerForward call of a GruLayer node, from its inputs (x, then each direction's w, wx, u,
// ux, b, bx) and what it saved (mask, lengths, the kernel's own).
GruLayerCall LayerCall(Graph& g, const Node& n) {
  const int* ids = g.MultiInputs(n);
  GruLayerCall call;
  call.directions = static_cast<int>((n.i[1] - 1) / 6);
  call.x = g.MatMulOperand(ids[0]);
  for (int k = 0; k < call.directions; ++k) {
    GruWeights& w = call.weights[k];
    Tensor* parts[6] = {&w.w, &w.wx, &w.u, &w.ux, &w.b, &w.bx};
    for (int p = 0; p < 6; ++p) *parts[p] = g.node(ids[1 + 6 * k + p]).value;
  }
  call.mask = n.saved[0];
  call.lengths = n.saved[1];
  call.saved = n.saved[2];
  call.inputs = g.matmul_inputs();
  call.arena = g.arena();
  call.out = n.value;
  return call;
}

}  // namespace

Var GruLayer(Var x, const std::vector<GruLayerParams>& directions, const Tensor& mask,
             const Tensor& lengths) {
  Graph* g = x.graph();
  CHECK(x.value().rank() == 3 && (directions.size() == 1 || directions.size() == 2))
      << "GruLayer: x " << x.shape().ToString() << ", " << directions.size() << " directions";
  std::vector<Var> inputs = {x};
  for (const GruLayerParams& p : directions)
    for (Var v : {p.w, p.wx, p.u, p.ux, p.b, p.bx}) inputs.push_back(v);
  const int64_t d = directions[0].ux.dim(0);
  Tensor out = g->arena()->Alloc({x.dim(0), x.dim(1), static_cast<int64_t>(directions.size()) * d});
  Var v = g->AddNodeN(OpKind::kGruLayer, out, inputs);
  Node& n = g->node(v);
  n.saved[0] = mask;
  n.saved[1] = lengths;
  GruLayerCall call = LayerCall(*g, n);
  call.training =
      n.requires_grad;  // keep cuDNN's reserve space only where a backward pass may come
  GruLayerForward(call);
  g->node(v).saved[2] = call.saved;
  return v;
}

// cuDNN's backward data and weights passes from the node's gradient: x's gradient written while
// new, the parameters' accumulated into the store's gradient buffer.
void GruLayerOpBackward(Graph& g, Node& n) {
  const int* ids = g.MultiInputs(n);
  GruLayerCall call = LayerCall(g, n);
  GruLayerGrads grads;
  grads.dout = n.grad;
  if (g.node(ids[0]).requires_grad) grads.dx = g.GradToWrite(ids[0], &grads.dx_accumulate);
  for (int k = 0; k < call.directions; ++k) {
    GruWeights& w = grads.dweights[k];
    Tensor* parts[6] = {&w.w, &w.wx, &w.u, &w.ux, &w.b, &w.bx};
    for (int p = 0; p < 6; ++p) {
      const int id = ids[1 + 6 * k + p];
      if (g.node(id).requires_grad) *parts[p] = g.Grad(id);
    }
  }
  GruLayerBackward(call, grads);
}

}  // namespace tern::graph
