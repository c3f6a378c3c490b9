// Internal to graph/: each op's backward, defined next to its forward in graph/ops_*.cc.
// A backward reads node.grad and accumulates into the gradients of node's inputs that need them.
#pragma once

#include "graph/graph.h"

namespace tern::graph {

using BackwardFn = void (*)(Graph& g, Node& node);

void MatMulBackward(Graph& g, Node& node);
void LinearBackward(Graph& g, Node& node);
void AddBackward(Graph& g, Node& node);
void MulBackward(Graph& g, Node& node);
void ScaleBackward(Graph& g, Node& node);
void ReshapeBackward(Graph& g, Node& node);
void UnaryOpBackward(Graph& g, Node& node);
void UnaryOfInputBackward(Graph& g, Node& node);
void DropoutBackward(Graph& g, Node& node);
void LayerNormOpBackward(Graph& g, Node& node);
void SoftmaxOpBackward(Graph& g, Node& node);
void SplitHeadsBackward(Graph& g, Node& node);
void MergeHeadsBackward(Graph& g, Node& node);
void EmbeddingBackward(Graph& g, Node& node);
void CrossEntropyOpBackward(Graph& g, Node& node);
void SumBackward(Graph& g, Node& node);
void SliceBackward(Graph& g, Node& node);
void StackBackward(Graph& g, Node& node);
void Transpose01Backward(Graph& g, Node& node);
void AddBroadcastBackward(Graph& g, Node& node);
void AttentionScoresBackward(Graph& g, Node& node);
void GruStepBackward(Graph& g, Node& node);
void GruLayerOpBackward(Graph& g, Node& node);

// True when input k of node needs a gradient.
inline bool NeedsGrad(Graph& g, const Node& node, int k) {
  return g.node(node.inputs[k]).requires_grad;
}

}  // namespace tern::graph
