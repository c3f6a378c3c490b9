// Sequence ops for recurrent networks: a recurrence runs over time-major tensors (time, batch,
// ...), takes step t with Slice, and collects its per-step outputs with Stack. Transpose01 turns
// batch-major into time-major and back; AddBroadcast adds one (batch, d) query to every time step
// of a (time, batch, d) tensor (MLP attention) or a bias to every row.
#include "graph/backward.h"
#include "graph/ops.h"
#include "tensor/ops.h"

namespace tern::graph {
namespace {

// A (n, 1) column of ones from the arena, for broadcasts done as rank-1 products.
Tensor Ones(Arena* arena, int64_t n) {
  Tensor ones = arena->Alloc({n, 1});
  Fill(ones, 1.f);
  return ones;
}

}  // namespace

Var Slice(Var x, int64_t begin, int64_t end) {
  Var out = x.graph()->AddNode(OpKind::kSlice, x.value().Slice(begin, end), {x});
  x.graph()->node(out).i = {begin, end};
  return out;
}

void SliceBackward(Graph& g, Node& n) {
  Axpy(1.f, n.grad, g.Grad(n.inputs[0]).Slice(n.i[0], n.i[1]));
}

// out (k, s...): out[j] = xs[j].
Var Stack(const std::vector<Var>& xs) {
  CHECK(!xs.empty()) << "Stack of nothing";
  Graph* g = xs[0].graph();
  const Shape& s = xs[0].shape();
  std::vector<int64_t> dims = s.dims();
  dims.insert(dims.begin(), static_cast<int64_t>(xs.size()));
  Tensor y = g->arena()->Alloc(Shape(dims));
  for (size_t j = 0; j < xs.size(); ++j) {
    CHECK(xs[j].shape() == s) << "Stack: step " << j << " has shape " << xs[j].shape().ToString()
                              << ", step 0 " << s.ToString();
    Copy(xs[j].value(), y.Slice(j, j + 1).Reshape(s));
  }
  return g->AddNodeN(OpKind::kStack, y, xs);
}

// dxs[j] += dout[j].
void StackBackward(Graph& g, Node& n) {
  const int* ids = g.MultiInputs(n);
  for (int64_t j = 0; j < n.i[1]; ++j) {
    if (!g.node(ids[j]).requires_grad) continue;
    g.AccumulateGrad(ids[j], n.grad.Slice(j, j + 1));
  }
}

// As Permute0213 on x viewed as (1, a, b, rest).
Var Transpose01(Var x) {
  Graph* g = x.graph();
  const int64_t a = x.dim(0), b = x.dim(1), rest = x.value().numel() / (a * b);
  Shape shape = x.shape();
  shape.set_dim(0, b);
  shape.set_dim(1, a);
  Tensor y = g->arena()->Alloc(shape);
  Permute0213(x.value().Reshape({1, a, b, rest}), y.Reshape({1, b, a, rest}));
  return g->AddNode(OpKind::kTranspose01, y, {x});
}

// The permutation is its own inverse: dx += Transpose01(dy).
void Transpose01Backward(Graph& g, Node& n) {
  const Tensor& dy = n.grad;
  const int64_t b = dy.dim(0), a = dy.dim(1), rest = dy.numel() / (a * b);
  bool accumulate;
  const Tensor dx = g.GradToWrite(n.inputs[0], &accumulate);
  Permute0213(dy.Reshape({1, b, a, rest}), dx.Reshape({1, a, b, rest}), accumulate);
}

// out (n, m) = x (n, m) + ones (n, 1) @ y (1, m), with m = y's size.
Var AddBroadcast(Var x, Var y) {
  Graph* g = x.graph();
  const int64_t m = y.value().numel(), n = x.value().numel() / m;
  CHECK_EQ(x.value().numel(), n * m)
      << "AddBroadcast " << x.shape().ToString() << " + " << y.shape().ToString();
  Tensor out = g->arena()->Alloc(x.shape());
  Copy(x.value(), out);
  AddBias(out.Reshape({n, m}), y.value().Reshape({m}));
  return g->AddNode(OpKind::kAddBroadcast, out, {x, y});
}

// dx += dout; dy (1, m) += ones (n, 1)^T @ dout (n, m).
void AddBroadcastBackward(Graph& g, Node& n) {
  if (NeedsGrad(g, n, 0)) g.AccumulateGrad(n.inputs[0], n.grad);
  if (NeedsGrad(g, n, 1)) {
    Tensor dy = g.Grad(n.inputs[1]);
    const int64_t m = dy.numel(), rows = n.grad.numel() / m;
    Gemm(Ones(g.arena(), rows), true, n.grad.Reshape({rows, m}), false, dy.Reshape({1, m}), 1.f,
         1.f);
  }
}

}  // namespace tern::graph
