#include "graph/graph.h"

#include "graph/backward.h"
#include "tensor/ops.h"

namespace tern::graph {
namespace {

BackwardFn BackwardOf(OpKind op) {
  static const BackwardFn table[] = {
      nullptr,  // kLeaf
      &MatMulBackward,
      &LinearBackward,
      &AddBackward,
      &ScaleBackward,
      &ReshapeBackward,
      &UnaryOpBackward,
      &UnaryOfInputBackward,
      &DropoutBackward,
      &LayerNormOpBackward,
      &SoftmaxOpBackward,
      &SplitHeadsBackward,
      &MergeHeadsBackward,
      &EmbeddingBackward,
      &CrossEntropyOpBackward,
      &SumBackward,
      &MulBackward,
      &SliceBackward,
      &StackBackward,
      &Transpose01Backward,
      &AddBroadcastBackward,
      &AttentionScoresBackward,
      &GruStepBackward,
      &GruLayerOpBackward,
  };
  static_assert(sizeof(table) / sizeof(table[0]) == static_cast<size_t>(OpKind::kCount));
  return table[static_cast<int>(op)];
}

}  // namespace

Graph::Graph(Arena* arena, bool training, uint64_t seed)
    : arena_(arena), training_(training), seed_(seed) {
  nodes_.reserve(4096);
}

Var Graph::Param(const ParamStore& store, int index) {
  Node n;
  n.op = OpKind::kLeaf;
  n.requires_grad = true;
  n.value = store.value(index);
  n.grad = store.grad(index);
  nodes_.push_back(std::move(n));
  return Var(this, size() - 1);
}

Var Graph::Constant(const Tensor& value) {
  Node n;
  n.value = value;
  nodes_.push_back(std::move(n));
  return Var(this, size() - 1);
}

Var Graph::AddNode(OpKind op, const Tensor& value, std::initializer_list<Var> inputs) {
  Node n;
  n.op = op;
  n.value = value;
  CHECK_LE(inputs.size(), n.inputs.size());
  for (const Var& in : inputs) {
    CHECK(in.graph() == this) << "op input from another graph";
    n.inputs[n.num_inputs++] = in.id();
    n.requires_grad |= nodes_[in.id()].requires_grad;
  }
  nodes_.push_back(std::move(n));
  return Var(this, size() - 1);
}

Var Graph::AddNodeN(OpKind op, const Tensor& value, const std::vector<Var>& inputs) {
  Node n;
  n.op = op;
  n.value = value;
  n.i = {static_cast<int64_t>(multi_inputs_.size()), static_cast<int64_t>(inputs.size())};
  for (const Var& in : inputs) {
    CHECK(in.graph() == this) << "op input from another graph";
    multi_inputs_.push_back(in.id());
    n.requires_grad |= nodes_[in.id()].requires_grad;
  }
  nodes_.push_back(std::move(n));
  return Var(this, size() - 1);
}

Tensor Graph::Grad(int id) {
  Node& n = nodes_[id];
  if (!n.grad.defined()) n.grad = arena_->AllocZeros(n.value.shape());
  return n.grad;
}

void Graph::AccumulateGrad(int id, const Tensor& d) {
  Node& n = nodes_[id];
  CHECK_EQ(d.numel(), n.value.numel()) << "AccumulateGrad: a gradient of another size";
  if (n.grad.defined()) {
    Axpy(1.f, d, n.grad.Reshape(d.shape()));
  } else {
    n.grad = arena_->Alloc(n.value.shape());
    Copy(d, n.grad);
  }
}

void Graph::GiveGrad(int id, const Tensor& d) {
  Node& n = nodes_[id];
  CHECK_EQ(d.numel(), n.value.numel()) << "GiveGrad: a gradient of another size";
  if (n.grad.defined()) {
    Axpy(1.f, d, n.grad.Reshape(d.shape()));
    arena_->Release(d);
  } else {
    n.grad = d.Reshape(n.value.shape());
  }
}

Tensor Graph::GradToWrite(int id, bool* accumulate) {
  Node& n = nodes_[id];
  *accumulate = n.grad.defined();
  if (!n.grad.defined()) n.grad = arena_->Alloc(n.value.shape());
  return n.grad;
}

Tensor Graph::GradForProduct(int id, float* beta) {
  bool accumulate;
  Tensor grad = GradToWrite(id, &accumulate);
  *beta = accumulate ? 1.f : 0.f;
  return grad;
}

void Graph::Backward(Var loss, float seed, const Tensor& seed_factor) {
  CHECK_EQ(loss.value().numel(), 1) << "Backward needs a scalar loss";
  Tensor g = Grad(loss);
  Fill(g, seed);
  if (seed_factor.defined()) ScaleBy(g, seed_factor);
  for (int id = loss.id(); id >= 0; --id) {
    Node& n = nodes_[id];
    if (n.op == OpKind::kLeaf || !n.requires_grad || !n.grad.defined()) continue;
    BackwardOf(n.op)(*this, n);
    // Consumed: only n's inputs (lower ids, still to come) read gradients from here on. Its
    // block serves their gradients, so the step's memory peaks at the live frontier of
    // gradients instead of all of them. (Non-leaf gradients are whole blocks, from Grad,
    // AccumulateGrad, GradToWrite or GradForProduct, or handed down whole by GiveGrad; a reshape
    // that handed its block to its input has none left to release.)
    arena_->Release(n.grad);
    n.grad = Tensor();
  }
}

Tensor Graph::MatMulOperand(int id) {
  Node& n = nodes_[id];
  if (matmul_inputs_ == DType::kFloat32 || !round_operands_once_) return n.value;
  if (!n.rounded.defined()) n.rounded = RoundOperand(n.value);
  return n.rounded;
}

Tensor Graph::RoundOperand(const Tensor& t) {
  if (matmul_inputs_ == DType::kFloat32 || !round_operands_once_) return t;
  Tensor rounded = arena_->Alloc(t.shape(), matmul_inputs_);
  tern::RoundOperand(t, rounded);
  return rounded;
}

Tensor Graph::RoundOperandSumRows(const Tensor& t, const Tensor& sums) {
  if (matmul_inputs_ == DType::kFloat32 || !round_operands_once_) {
    SumRows(t, sums, 1.f);
    return t;
  }
  Tensor rounded = arena_->Alloc(t.shape(), matmul_inputs_);
  tern::RoundOperandSumRows(t, rounded, sums);
  return rounded;
}

void Graph::ReleaseRounded(const Tensor& t, const Tensor& rounded) {
  if (rounded.raw() != t.raw()) arena_->Release(rounded);
}

void Graph::Clear(uint64_t seed) {
  nodes_.clear();
  multi_inputs_.clear();
  seed_ = seed;
  seed_counter_ = 0;
}

}  // namespace tern::graph
