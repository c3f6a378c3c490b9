// The average attention network (Zhang et al. 2018), the decoder sublayer of arch "aan" that
// replaces self-attention; the same function as models/transformer.cc's AverageAttention.
//
// Parameters (decoder_l{l}_aan_*, d = emb_dim): W1 (d, ffn), b1 (ffn), W2 (ffn, d), b2 (d) unless
// aan_no_ffn; Wi, Wf (d, d), bi, bf (d) unless aan_no_gate; ln_{scale,bias} (d).
// For the sublayer input y_1..y_t: g = (y_1 + ... + y_t) / t; g = FFN(g) with the FFN; then with
// the gate g = sigmoid(y_t Wi + bi) * y_t + sigmoid(g Wf + bf) * g. Incremental decoding carries
// the running sum per row, so each step costs the same whatever its position.
#pragma once

#include <cstdint>

#include "inference/layers/layers.h"
#include "tensor/arena.h"
#include "tensor/tensor.h"

namespace tern::inference {

struct AanParams {
  bool has_ffn = false, has_gate = false;
  FfnParams ffn;             // W1, b1, W2, b2 (ln fields unused)
  LinearWeights wi, wf;      // (d, d)
  Tensor bi, bf;             // (d)
  Tensor ln_scale, ln_bias;  // (d)
};

// avg (B, T, d): avg[b, t] = mean of y[b, 0..t]; y (B, T, d).
Tensor CumulativeAverage(const Tensor& y, Arena& arena);

// The sublayer's body from its input y (..., d) and the average avg (same shape) of the inputs up
// to each position: FFN and gate as configured. Returns (..., d).
Tensor AverageAttentionBody(const AanParams& p, const Tensor& y, const Tensor& avg, Activation act,
                            Arena& arena);

}  // namespace tern::inference
