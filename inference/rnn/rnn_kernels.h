// The GRU models' building blocks (rnn.h), shared by the encoder (rnn.cc) and the step decoder
// (rnn_decoder.cc). Internal to inference/.
#pragma once

#include <cstdint>
#include <vector>

#include "inference/rnn/rnn.h"
#include "tensor/arena.h"
#include "tensor/tensor.h"

namespace tern::inference::rnn_internal {

// LN(x) * s + b when on, else x.
Tensor MaybeNorm(const Tensor& x, bool on, const Tensor& s, const Tensor& b, Arena& arena);

// The input side of a GRU with input, x (n, in) -> rz (n, 2d) and h (n, d) with their biases:
// Nematus' LN(x W) + b with layer normalization, x W + b without.
void Project(const GruWeights& g, const Tensor& x, Arena& arena, Tensor* rz, Tensor* h);

// The recurrent side, s (n, d) -> LN(s U) (n, 2d), LN(s Ux) (n, d).
void StateProducts(const GruWeights& g, const Tensor& s, Arena& arena, Tensor* rz, Tensor* h);

// The GRU update of models/rnn_layers.h for rows of width d:
//   r, z = sigmoid(in_rz + su_rz);  h = tanh(in_h + r * su_h);  s' = h + z (s - h)
// and with a row mask m, s + m (s' - s). in_rz/in_h advance by their strides per row (0: one
// bias row for a transition cell). su_rz/su_h rows are found through su_row (null: row i).
struct GruInputs {
  const float* in_rz;
  int64_t rz_stride;
  const float* in_h;
  int64_t h_stride;
  const float* su_rz;
  const float* su_h;
  const int32_t* su_row;
};
void GruUpdate(const GruInputs& in, const float* s, const float* row_mask, int64_t rows, int64_t d,
               bool approx, float* out, std::vector<float>* scratch);

// How the GRU runtime computes: the CPU's loops over rows (approx: the rational activations), or
// device-neutral tensor ops (RnnModel::tensor_ops(): the GPU's way, exact activations).
struct RnnCompute {
  bool approx = false;
  bool tensor_ops = false;
};

// tanh of x, in place, as `how` says.
void TanhTensor(const Tensor& x, RnnCompute how);

// One step of a stack of `count` cells (the first with input projections in_rz, in_h) from
// states s (rows, d); row_mask (rows, on s's device) may be undefined. scratch: the CPU loops'.
Tensor CellStack(const GruWeights* cells, size_t count, const Tensor& in_rz, const Tensor& in_h,
                 const Tensor& s, const Tensor& row_mask, RnnCompute how, Arena& arena,
                 std::vector<float>* scratch);

// The context side of the attention, context (n, S, c) -> LN(context Wc) + b.
Tensor MapContext(const RnnAttentionWeights& a, const Tensor& context, Arena& arena);

// One row of the MLP attention: scores tanh(mapped_t + q) . u over the unmasked t (mask 1),
// softmax, out = sum_t alpha_t context_t. scores (len) and e (c) are scratch.
void AttendRow(const float* q, const float* mapped, const float* context, const float* mask,
               const float* u, int64_t len, int64_t c, bool approx, float* scores, float* e,
               float* out);

}  // namespace tern::inference::rnn_internal
