// Forward-only building blocks of the runtime's models: linear layers (linear.h), layer norm,
// embeddings with sinusoidal positions, multi-head attention and the feed-forward block. Every
// result comes from the Arena the caller passes (reset per batch or per decoder step), never from
// the general allocator.
#pragma once

#include <cstdint>

#include "configs/config_io.h"
#include "inference/layers/linear.h"
#include "tensor/arena.h"
#include "tensor/staging.h"
#include "tensor/tensor.h"

namespace tern::inference {

// The layer norms' epsilon when model.layer_norm_eps is unset.
inline constexpr float kLayerNormEps = config::kDefaultLayerNormEps;

// The sinusoids' timescales (model.positions): Marian's 10000^(i / (d/2 - 1)) or Vaswani et al.'s
// 10000^(2i / d), i in [0, d/2).
enum class Positions { kMarian, kVaswani };
// model.positions ("" or "marian", "vaswani"); tern::Error naming the field for another value.
Positions ParsePositions(const std::string& name);

// Host values in a tensor of `arena` (on the arena's device): the runtime's way to hand ids,
// masks and positions to a GPU. On the CPU it is a plain copy.
Tensor Upload(const int32_t* values, const Shape& shape, Arena& arena);
Tensor Upload(const float* values, const Shape& shape, Arena& arena);
// `t` itself when it is on the CPU, else a copy of it in `host` (a CPU arena).
Tensor OnHost(const Tensor& t, Arena& host);

// Upload for what a decoder step sends each step (its ids, its mask): on a GPU the values go
// through a page-locked StagingRing in a copy the host does not wait for (Upload waits, since its
// source may be a temporary), so the step queues its kernels behind it at once.
class StepUploader {
 public:
  StepUploader() = default;
  StepUploader(const StepUploader&) = delete;
  StepUploader& operator=(const StepUploader&) = delete;
  // 4-byte values (int32 or float32) into a tensor of `arena`.
  Tensor Put(const void* values, const Shape& shape, DType dtype, Arena& arena);

 private:
  StagingRing staging_;
};

// The sinusoid of position `pos` (d values: sin half, then cos half) into out.
void PositionEncoding(int64_t pos, int64_t d, float* out, Positions style = Positions::kMarian);

// (x - mean) / sqrt(var + eps) * scale + bias over the last dim; x (..., d).
Tensor LayerNormalize(const Tensor& x, const Tensor& scale, const Tensor& bias, Arena& arena,
                      float eps = kLayerNormEps);

// out (B, T, d) = sqrt(d) * table[ids] + pe[start + t], ids int32 (B, T), table (V, d).
// pe is Marian's sinusoid: sin half first, then cos half (see AddPositions).
// With `positions` (P, d) on x's device (PositionTable's), the encodings are read from it where
// it reaches (start + T <= P): on a GPU no copy from the host, so no wait.
Tensor Embed(const Tensor& table, const Tensor& ids, int64_t start, Arena& arena,
             const Tensor& positions = Tensor(), Positions style = Positions::kMarian);
// x (B, T, d) += pe[start .. start + T). d must be even.
void AddPositions(const Tensor& x, int64_t start, Arena& arena,
                  Positions style = Positions::kMarian);
// The encodings of positions [0, count) (count, d), made on the host and copied to `device` once.
Tensor PositionTable(int64_t count, int64_t d, Device device, Positions style = Positions::kMarian);

// (B, T, H*dk) -> (B, H, T, dk): a view of x when T or H is 1 (the same bytes), else a copy.
Tensor SplitHeads(const Tensor& x, int heads, Arena& arena);

// Scaled dot-product attention over heads. q (B, H, Tq, dk); k, v (B, H, Tk, dk); key_mask
// (B, Tk) float 1/0 or undefined; causal masks key > query (needs Tq == Tk). Returns the merged
// context (B, Tq, H*dk). On the CPU it goes row by row (Attend, tensor/ops.h); on a GPU a decoder
// step's few queries go through Attend too, one op, and more through batched products and a masked
// softmax. kv_sentence (CPU only; null: the identity): query sentence i
// attends to sentence kv_sentence[i] of k, v and key_mask, which may hold more sentences than q
// (the decoder keeps finished sentences' cross-attention state in place instead of compacting it).
Tensor AttendHeads(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& key_mask,
                   bool causal, Arena& arena, const int32_t* kv_sentence = nullptr);

enum class Activation { kRelu, kGelu, kSwish };
Activation ParseActivation(const std::string& name);

struct FfnParams {
  LinearWeights w1;          // (d, ffn)
  Tensor b1;                 // (ffn)
  LinearWeights w2;          // (ffn, d)
  Tensor b2;                 // (d)
  Tensor ln_scale, ln_bias;  // (d)
};
// act(x W1 + b1) W2 + b2; x (..., d).
// With `residual` (x's shape): residual + FeedForward(x), the sum in the last product's pass
// (Linear's residual).
Tensor FeedForward(const Tensor& x, const FfnParams& p, Activation act, Arena& arena,
                   const Tensor& residual = Tensor());

}  // namespace tern::inference
