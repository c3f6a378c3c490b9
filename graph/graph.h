// Reverse-mode automatic differentiation over a tape built per batch.
//
// A Graph records nodes as ops run (define-by-run). Each node holds its value, its gradient
// (allocated lazily, zero-filled, from the step's Arena; parameters' gradients are views of the
// ParamStore's flat gradient buffer), the op that made it with a few attributes and saved
// tensors, and its inputs. Backward() walks the tape in reverse and calls each op's backward,
// which ACCUMULATES into its inputs' gradients. Nodes are plain structs in a vector that keeps its
// capacity across Clear(), so a training step does not call the general allocator.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "graph/params.h"
#include "tensor/arena.h"
#include "tensor/tensor.h"

namespace tern::graph {

enum class OpKind : uint8_t {
  kLeaf,  // parameter or constant
  kMatMul,
  kLinear,
  kAdd,
  kScale,
  kReshape,
  kUnary,
  kUnaryOfInput,  // GELU, swish: the backward reads the input
  kDropout,
  kLayerNorm,
  kSoftmax,
  kSplitHeads,
  kMergeHeads,
  kEmbedding,
  kCrossEntropy,
  kSum,
  kMul,
  kSlice,
  kStack,
  kTranspose01,
  kAddBroadcast,
  kAttentionScores,
  kGruStep,
  kGruLayer,
  kCount
};

struct Node {
  OpKind op = OpKind::kLeaf;
  bool requires_grad = false;
  int num_inputs = 0;
  std::array<int, 3> inputs{};
  Tensor value;
  Tensor grad;                  // undefined until first needed
  Tensor rounded;               // mixed precision: value rounded at its first product
  std::array<Tensor, 3> saved;  // op-specific (masks, statistics, ids)
  std::array<float, 3> f{};     // op-specific attributes
  std::array<int64_t, 2> i{};
  std::array<bool, 2> b{};
};

class Graph;

// A handle to a node of a Graph. Cheap to copy.
class Var {
 public:
  Var() = default;
  Var(Graph* g, int id) : graph_(g), id_(id) {}
  Graph* graph() const { return graph_; }
  int id() const { return id_; }
  bool valid() const { return graph_ != nullptr; }
  const Tensor& value() const;
  const Shape& shape() const { return value().shape(); }
  int64_t dim(int i) const { return value().dim(i); }

 private:
  Graph* graph_ = nullptr;
  int id_ = -1;
};

class Graph {
 public:
  // `training` enables dropout. The arena supplies every activation and gradient.
  Graph(Arena* arena, bool training, uint64_t seed = 0);
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;

  Var Param(const ParamStore& store, int index);
  Var Param(const ParamStore& store, const std::string& name) {
    return Param(store, store.Index(name));
  }
  Var Constant(const Tensor& value);

  // Records a new node; for ops (graph/ops_*.cc).
  Var AddNode(OpKind op, const Tensor& value, std::initializer_list<Var> inputs);
  // The same for ops with any number of inputs (Stack): their ids live in a pool that keeps its
  // capacity across Clear(); the node's i = {offset into the pool, count}.
  Var AddNodeN(OpKind op, const Tensor& value, const std::vector<Var>& inputs);
  const int* MultiInputs(const Node& n) const { return multi_inputs_.data() + n.i[0]; }
  Node& node(Var v) { return nodes_[v.id()]; }
  const Node& node(Var v) const { return nodes_[v.id()]; }
  Node& node(int id) { return nodes_[id]; }

  // The node's gradient, allocated zero-filled on first use.
  Tensor Grad(int id);
  Tensor Grad(Var v) { return Grad(v.id()); }
  // Adds d (as many values as node id's) into node id's gradient. The first contribution is
  // copied into a new block rather than added to a zero-filled one: one op instead of two (on a
  // GPU, one launch fewer; an RNN's backward pass is mostly such small ops).
  void AccumulateGrad(int id, const Tensor& d);
  // The same for a d made for it (a whole block of this graph's arena, read by nothing after):
  // as the first contribution it becomes the gradient itself, with no copy.
  void GiveGrad(int id, const Tensor& d);
  // For an op that adds into node id's whole gradient: the gradient, and whether to add into it;
  // false while the gradient is new (its block not yet written: the op writes it instead, with
  // no zero-filling first).
  Tensor GradToWrite(int id, bool* accumulate);
  // The same for a product: its beta, 0 while the gradient is new, else 1.
  Tensor GradForProduct(int id, float* beta);

  // Seeds d(loss)/d(loss) = seed (loss must hold one element) and runs backward over the tape.
  // seed_factor (one float on the graph's device, or undefined) multiplies the seed there: fp16's
  // loss scale, which the host does not read.
  void Backward(Var loss, float seed = 1.f, const Tensor& seed_factor = Tensor());

  // Forgets every node (keeps capacity) and starts the random ops over from `seed`, so one
  // Graph serves every step of a training run. The arena is reset by its owner.
  void Clear(uint64_t seed);

  Arena* arena() const { return arena_; }
  bool training() const { return training_; }
  // Mixed precision: MatMul and Linear (forward and backward) round their operands to this type
  // (kBFloat16 or kFloat16) for the product and accumulate in float32; every other op, the
  // parameters and the gradients stay float32. kFloat32 (the default) rounds nothing.
  DType matmul_inputs() const { return matmul_inputs_; }
  void set_matmul_inputs(DType inputs) { matmul_inputs_ = inputs; }
  // A product's operand: node `id`'s value, rounded to matmul_inputs() once per step. The copy
  // is made at the node's first product and serves the rest (a weight's every use, and the
  // backward pass's products reuse the forward's operands), so that each tensor is rounded once
  // instead of once per product. The value itself in float32.
  Tensor MatMulOperand(int id);
  // t rounded to matmul_inputs() in a tensor from the arena (t itself in float32): a gradient
  // that enters several products of one backward op. Give it back with ReleaseRounded(t, r).
  Tensor RoundOperand(const Tensor& t);
  // RoundOperand(t), and sums (t's columns) += Σrows t in the same pass where the device has one:
  // a bias's gradient from the output gradient that is rounded for the products.
  Tensor RoundOperandSumRows(const Tensor& t, const Tensor& sums);
  void ReleaseRounded(const Tensor& t, const Tensor& rounded);
  // Tests: false leaves every operand float32, so Gemm rounds it again for each product (the
  // same values: rounding is deterministic).
  void set_round_operands_once(bool once) { round_operands_once_ = once; }
  // A fresh seed for each random op (dropout), deterministic in the graph's seed.
  uint64_t NextSeed() { return seed_ + 0x9e3779b97f4a7c15ull * ++seed_counter_; }
  int size() const { return static_cast<int>(nodes_.size()); }

 private:
  Arena* arena_;
  bool training_;
  DType matmul_inputs_ = DType::kFloat32;
  bool round_operands_once_ = true;
  uint64_t seed_;
  uint64_t seed_counter_ = 0;
  std::vector<Node> nodes_;
  std::vector<int> multi_inputs_;
};

inline const Tensor& Var::value() const { return graph_->node(*this).value; }

}  // namespace tern::graph
