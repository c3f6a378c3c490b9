// The interface every trainable architecture implements. Parameter names and layouts are the
// contract with inference/ (which computes the same function forward-only from the same names):
// see models/transformer.h for the Transformer's.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "configs/tern.pb.h"
#include "graph/graph.h"
#include "graph/params.h"
#include "tensor/tensor.h"

namespace tern::models {

// One mini-batch as tensors on the model's device.
struct BatchTensors {
  Tensor src;       // (batch, src_len) int32, padded with pad id 0
  Tensor src_mask;  // (batch, src_len) float, 1 = token, 0 = pad
  Tensor tgt_in;    // (batch, tgt_len) int32: bos + y
  Tensor tgt_out;   // (batch, tgt_len) int32: y + eos, padded with 0
  // (batch) on the host: each row's ones in src_mask (a run of ones, then the padding's zeros),
  // for the layers that take lengths (a whole GRU layer: cuDNN's); empty where not made.
  std::vector<int32_t> src_lengths;
};

class Model {
 public:
  virtual ~Model() = default;
  // Registers every parameter (names, shapes, initializers) in `store`.
  virtual void AddParams(graph::ParamStore* store) const = 0;
  // Logits (batch, tgt_len, vocab) for teacher-forced decoding.
  virtual graph::Var Logits(graph::Graph& g, const graph::ParamStore& params,
                            const BatchTensors& batch) const = 0;
};

// The summed label-smoothed cross-entropy over the batch's target tokens (pads ignored).
graph::Var TokenLoss(graph::Graph& g, graph::Var logits, const Tensor& tgt_out, float smoothing);

// Builds the architecture named by config.arch(). Throws tern::Error for an unknown one.
std::unique_ptr<Model> CreateModel(const config::ModelConfig& config, int vocab_size);

}  // namespace tern::models
