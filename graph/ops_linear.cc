// Matrix products, affine layers and the elementwise arithmetic ops.
#include "graph/backward.h"
#include "graph/ops.h"
#include "tensor/ops.h"

namespace tern::graph {
namespace {

Shape MatMulShape(const Tensor& a, const Tensor& b, bool ta, bool tb) {
  if (a.rank() > 2 && b.rank() == 2) {
    Shape s = a.shape();
    s.set_dim(-1, tb ? b.dim(0) : b.dim(1));
    return s;
  }
  int64_t m = ta ? a.dim(-1) : a.dim(-2), n = tb ? b.dim(-2) : b.dim(-1);
  if (a.rank() == 3) return Shape{a.dim(0), m, n};
  return Shape{m, n};
}

// MatMulBackward's products: a, b its operands and dc the output's gradient, as Gemm takes them.
void MatMulProducts(Graph& g, const Node& n, const Tensor& a, const Tensor& b, const Tensor& dc) {
  const bool ta = n.b[0], tb = n.b[1];
  const float alpha = n.f[0];
  const DType in = g.matmul_inputs();
  if (a.rank() > 2 && b.rank() == 2) {  // (rows, k) @ (k, n) with flattened a
    Tensor a2 = a.Flatten2D(), dc2 = dc.Flatten2D();
    if (NeedsGrad(g, n, 0)) {
      float beta;
      Tensor da2 = g.GradForProduct(n.inputs[0], &beta).Flatten2D();
      Gemm(dc2, false, b, !tb, da2, alpha, beta, in);
    }
    if (NeedsGrad(g, n, 1)) {
      Tensor db = g.Grad(n.inputs[1]);
      if (tb)
        Gemm(dc2, true, a2, false, db, alpha, 1.f, in);
      else
        Gemm(a2, true, dc2, false, db, alpha, 1.f, in);
    }
    return;
  }
  if (NeedsGrad(g, n, 0)) {
    float beta;  // 0 for a new gradient: the product writes it
    Tensor da = g.GradForProduct(n.inputs[0], &beta);
    if (ta)
      Gemm(b, tb, dc, true, da, alpha, beta, in);  // da = op(b) dc^T
    else
      Gemm(dc, false, b, !tb, da, alpha, beta, in);  // da = dc op(b)^T
  }
  if (NeedsGrad(g, n, 1)) {
    float beta;
    Tensor db = g.GradForProduct(n.inputs[1], &beta);
    if (tb)
      Gemm(dc, true, a, ta, db, alpha, beta, in);  // db = dc^T op(a)
    else
      Gemm(a, !ta, dc, false, db, alpha, beta, in);  // db = op(a)^T dc
  }
}

}  // namespace

// c = alpha * op(a) op(b).
Var MatMul(Var a, Var b, bool trans_a, bool trans_b, float alpha) {
  Graph* g = a.graph();
  Tensor c = g->arena()->Alloc(MatMulShape(a.value(), b.value(), trans_a, trans_b));
  Gemm(g->MatMulOperand(a.id()), trans_a, g->MatMulOperand(b.id()), trans_b, c, alpha, 0.f,
       g->matmul_inputs());
  Var out = g->AddNode(OpKind::kMatMul, c, {a, b});
  Node& n = g->node(out);
  n.b = {trans_a, trans_b};
  n.f[0] = alpha;
  return out;
}

// For c = op(a) op(b): da = dc op(b)^T (or its transpose), db likewise. With mixed precision the
// operands are the forward's rounded ones and dc is rounded once for both products.
void MatMulBackward(Graph& g, Node& n) {
  if (!NeedsGrad(g, n, 0) && !NeedsGrad(g, n, 1)) return;
  const Tensor a = g.MatMulOperand(n.inputs[0]);
  const Tensor b = g.MatMulOperand(n.inputs[1]);
  const Tensor dc = g.RoundOperand(n.grad);
  MatMulProducts(g, n, a, b, dc);
  g.ReleaseRounded(n.grad, dc);
}

Var Linear(Var x, Var w, Var b, bool trans_w, bool relu) {
  Graph* g = x.graph();
  Shape s = x.shape();
  s.set_dim(-1, trans_w ? w.dim(0) : w.dim(1));
  Tensor y = g->arena()->Alloc(s);
  const Tensor x_operand = g->MatMulOperand(x.id()), w_operand = g->MatMulOperand(w.id());
  Var out;
  if (b.valid()) {  // the bias (and ReLU) in the product's own pass where the device can
    GemmBias(x_operand, false, w_operand, trans_w, b.value(), y, g->matmul_inputs(), Tensor(),
             relu ? kRelu : kNoActivation);
    out = g->AddNode(OpKind::kLinear, y, {x, w, b});
  } else {
    Gemm(x_operand, false, w_operand, trans_w, y, 1.f, 0.f, g->matmul_inputs());
    if (relu) Unary(kRelu, y, y);
    out = g->AddNode(OpKind::kLinear, y, {x, w});
  }
  g->node(out).b = {trans_w, relu};
  return out;
}

// dx = dy op(w)^T, dw = x^T dy (or dy^T x when w is stored transposed), db = Σrows dy. With mixed
// precision x and w are the forward's rounded operands and dy is rounded once for both products
// (the bias gradient sums it in float32, in the pass that rounds it). With ReLU, dy is first the
// gradient before it, from the output (Relu's backward).
void LinearBackward(Graph& g, Node& n) {
  const bool trans_w = n.b[0];
  const DType in = g.matmul_inputs();
  Tensor grad = n.grad;
  if (n.b[1]) {
    grad = g.arena()->Alloc(n.grad.shape());
    UnaryBackward(kRelu, n.value, n.grad, grad, /*accumulate=*/false);
  }
  const bool bias_grad = n.num_inputs == 3 && NeedsGrad(g, n, 2);
  const bool products = NeedsGrad(g, n, 0) || NeedsGrad(g, n, 1);
  if (products) {
    const Tensor x = g.MatMulOperand(n.inputs[0]).Flatten2D();
    const Tensor w = g.MatMulOperand(n.inputs[1]);
    // The bias's gradient sums dy in the pass that rounds it.
    const Tensor rounded_dy =
        bias_grad
            ? g.RoundOperandSumRows(grad.Flatten2D(), g.Grad(n.inputs[2])).Reshape(grad.shape())
            : g.RoundOperand(grad);
    const Tensor dy = rounded_dy.Flatten2D();
    if (NeedsGrad(g, n, 0)) {
      float beta;
      const Tensor dx = g.GradForProduct(n.inputs[0], &beta).Flatten2D();
      Gemm(dy, false, w, !trans_w, dx, 1.f, beta, in);
    }
    if (NeedsGrad(g, n, 1)) {
      if (trans_w)
        Gemm(dy, true, x, false, g.Grad(n.inputs[1]), 1.f, 1.f, in);
      else
        Gemm(x, true, dy, false, g.Grad(n.inputs[1]), 1.f, 1.f, in);
    }
    g.ReleaseRounded(grad, rounded_dy);
  }
  if (bias_grad && !products) SumRows(grad.Flatten2D(), g.Grad(n.inputs[2]), 1.f);
  if (n.b[1]) g.arena()->Release(grad);
}

Var Add(Var a, Var b) {
  Graph* g = a.graph();
  Tensor y = g->arena()->Alloc(a.shape());
  tern::Add(a.value(), b.value(), y);
  return g->AddNode(OpKind::kAdd, y, {a, b});
}

void AddBackward(Graph& g, Node& n) {
  for (int k = 0; k < 2; ++k)
    if (NeedsGrad(g, n, k)) g.AccumulateGrad(n.inputs[k], n.grad);
}

Var Mul(Var a, Var b) {
  Graph* g = a.graph();
  Tensor y = g->arena()->Alloc(a.shape());
  tern::Mul(a.value(), b.value(), y);
  return g->AddNode(OpKind::kMul, y, {a, b});
}

// da += dy * b, db += dy * a (each written while new; a square x*x adds its second).
void MulBackward(Graph& g, Node& n) {
  for (int k : {0, 1}) {
    if (!NeedsGrad(g, n, k)) continue;
    bool accumulate;
    const Tensor d = g.GradToWrite(n.inputs[k], &accumulate);
    tern::Mul(n.grad, g.node(n.inputs[1 - k]).value, d, accumulate);
  }
}

Var Scale(Var x, float alpha) {
  Graph* g = x.graph();
  Tensor y = g->arena()->Alloc(x.shape());
  tern::Add(x.value(), x.value(), y, alpha, 0.f);
  Var out = g->AddNode(OpKind::kScale, y, {x});
  g->node(out).f[0] = alpha;
  return out;
}

void ScaleBackward(Graph& g, Node& n) { Axpy(n.f[0], n.grad, g.Grad(n.inputs[0])); }

Var Reshape(Var x, const Shape& shape) {
  return x.graph()->AddNode(OpKind::kReshape, x.value().Reshape(shape), {x});
}

// The reshape's gradient block becomes its input's when that has none yet (Backward then does
// not release it).
void ReshapeBackward(Graph& g, Node& n) {
  g.GiveGrad(n.inputs[0], n.grad);
  n.grad = Tensor();
}

}  // namespace tern::graph
