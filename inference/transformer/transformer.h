// The forward-only Transformer (Vaswani et al.; Marian's "transformer" layout), computing the same
// function as the training graph in models/ on the same parameters.
//
// Parameters (names as models/ creates them; d = emb_dim, V = vocabulary size):
//   Wemb (V, d) when tied_embeddings, else encoder_Wemb (V, d) and decoder_Wemb (V, d); the output
//   layer uses the (decoder) embedding transposed, plus decoder_ff_logit_out_b (V).
//   encoder_l{l}_ / decoder_l{l}_ (l = 1..depth):
//     self_{Wq,Wk,Wv,Wo} (d, d), self_{bq,bk,bv,bo} (d), self_Wo_ln_{scale,bias} (d)
//     decoder only: context_* likewise (queries from the decoder, keys/values from the encoder)
//     ffn_W1 (d, ffn), ffn_b1 (ffn), ffn_W2 (ffn, d), ffn_b2 (d), ffn_ffn_ln_{scale,bias} (d)
//   pre_norm only: encoder_final_ln_{scale,bias}, decoder_final_ln_{scale,bias} (d).
//   arch "aan": decoder_l{l}_aan_* (inference/transformer/aan.h) instead of decoder_l{l}_self_*.
// Linear layers are y = x W + b with W (in, out); their W may be int16/int8 (an integer export,
// inference/format/export.h IsLinearWeightName) and then run through the integer GEMM, as does the
// output layer (a packed copy of the embedding, made at load) in such a model. Embeddings are
// scaled by sqrt(d) and get sinusoidal positions added. Post-norm: x = LN(x + f(x)); pre-norm: x =
// x + f(LN(x)). Special ids: pad 0, unk 1, bos 2, eos 3.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "configs/tern.pb.h"
#include "inference/format/weights.h"
#include "inference/layers/decoder_model.h"
#include "inference/layers/layers.h"
#include "inference/transformer/aan.h"
#include "tensor/arena.h"
#include "tensor/tensor.h"

namespace tern::inference {

struct AttentionParams {
  LinearWeights wq, wk, wv, wo;  // (d, d)
  Tensor bq, bk, bv, bo;         // (d)
  Tensor ln_scale, ln_bias;      // (d)
  // A GPU decoder's self-attention: wq, wk, wv stacked (3, d, d) with bq, bk, bv (3, d), so that
  // a step's queries, keys and values are one product (GemmBias of a batch); else undefined.
  Tensor w_qkv, b_qkv;
};

struct EncoderLayerParams {
  AttentionParams self;
  FfnParams ffn;
};

struct DecoderLayerParams {
  AttentionParams self, context;  // self unset with arch "aan"
  AanParams aan;                  // arch "aan" only
  FfnParams ffn;
};

// Every parameter the runtime reads for `config` and a vocabulary of `vocab_size`, with its shape,
// in a fixed order: for exporters and for tests that hold models/ and the runtime to one naming.
std::vector<std::pair<std::string, Shape>> TransformerParameterShapes(
    const config::ModelConfig& config, int64_t vocab_size);

class Transformer : public DecoderModel {
 public:
  // Looks up every parameter in `weights` and checks its shape: tern::Error naming a missing or
  // misshapen parameter. The views must outlive this object. `linear` says whether to quantize
  // float weights at load and whether to auto-tune float against integer products.
  Transformer(const config::ModelConfig& config, const Weights& weights,
              const LinearOptions& linear = {});

  int64_t dim() const { return dim_; }
  int heads() const { return heads_; }
  int64_t vocab_size() const override { return vocab_size_; }
  const config::ModelConfig& config() const override { return config_; }
  // Whether the decoder uses the average attention network (arch "aan") instead of self-attention.
  bool aan() const { return aan_; }
  Activation activation() const { return activation_; }
  Positions positions() const { return positions_style_; }

  // src int32 (B, S) padded with 0; src_mask float (B, S), 1 for tokens, 0 for padding.
  // Returns the encoder output (B, S, d) from `arena`.
  Tensor Encode(const Tensor& src, const Tensor& src_mask, Arena& arena) const override;
  // An IncrementalDecoder over this model.
  std::unique_ptr<DecoderState> NewDecoder() const override;
  Device device() const override { return tgt_emb_.device(); }
  DType product_inputs() const override { return output_.inputs; }
  // Whether NewDecoder's decoders keep the self-attention history as device tensors (the GPU's
  // way, always on a GPU) rather than in the CPU's KvCache; settable for the CPU's tests.
  bool tensor_cache() const { return tensor_cache_ || device() != Device::kCpu; }
  void set_tensor_cache(bool on) { tensor_cache_ = on; }

  // The whole model on a teacher-forced target, for validation and for the test that holds the
  // training graph's forward pass equal to the runtime's: tgt_in int32 (B, T) starts with bos
  // (the target shifted right). Returns logits (B, T, V) from `arena`; position t depends on
  // tgt_in[:, 0..t] only (causal), so padding after a sentence's end does not change its logits.
  Tensor ForwardLogits(const Tensor& src, const Tensor& src_mask, const Tensor& tgt_in,
                       Arena& arena) const;

  // --- building blocks shared with IncrementalDecoder ---
  const std::vector<DecoderLayerParams>& decoder_layers() const { return dec_; }
  const Tensor& target_embeddings() const { return tgt_emb_; }  // (V, d)
  // Position encodings (kDevicePositions, d) kept on a GPU, so that neither a batch's encoder nor
  // a decoder copies them up (a wait); undefined on the CPU.
  const Tensor& device_positions() const { return positions_; }
  static constexpr int64_t kDevicePositions = 1024;
  // The input of a sublayer: LN(x) with pre-norm, x with post-norm.
  Tensor SublayerInput(const Tensor& x, const Tensor& ln_scale, const Tensor& ln_bias,
                       Arena& arena) const;
  // The output of a sublayer f: x + f with pre-norm, LN(x + f) with post-norm.
  Tensor SublayerOutput(const Tensor& x, const Tensor& f, const Tensor& ln_scale,
                        const Tensor& ln_bias, Arena& arena) const;
  // The same from the sum x + f already made (by the sublayer's last product: Linear's
  // residual, one GPU launch fewer than a separate addition).
  Tensor SublayerNorm(const Tensor& sum, const Tensor& ln_scale, const Tensor& ln_bias,
                      Arena& arena) const;
  // Cross-attention keys and values of one decoder layer: encoded (B, S, d) -> k, v (B, H, S, dk).
  void ContextKeysValues(const AttentionParams& p, const Tensor& encoded, Arena& arena, Tensor* k,
                         Tensor* v) const;
  // The cross-attention sublayer: x (B, Tq, d) attends to k, v (B', H, S, dk) under src_mask
  // (B', S), sentence i to sentence kv_sentence[i] of them (null: B' = B, the identity; CPU
  // only, AttendHeads). Returns the new x (B, Tq, d).
  Tensor ContextBlock(const AttentionParams& p, const Tensor& x, const Tensor& k, const Tensor& v,
                      const Tensor& src_mask, Arena& arena,
                      const int32_t* kv_sentence = nullptr) const;
  // The feed-forward sublayer, x (..., d) -> new x.
  Tensor FfnBlock(const FfnParams& p, const Tensor& x, Arena& arena) const;
  // Final decoder norm (pre-norm only) and the output layer: h (rows, d) -> logits (rows, V).
  Tensor OutputLogits(const Tensor& h, Arena& arena) const;
  // The input of the output layer: h (rows, d) after the final decoder norm (pre-norm only).
  Tensor OutputInput(const Tensor& h, Arena& arena) const override;
  const Tensor& output_bias() const override { return out_bias_; }       // (V)
  const Tensor& output_embeddings() const override { return tgt_emb_; }  // (V, d)
  const Tensor& output_table() const override { return output_.w; }
  const LinearWeights* integer_output() const override {
    return output_.packed ? &output_ : nullptr;
  }
  const cpu::PackedFloatMatrix* packed_output() const override {
    return output_.packed_float.get();
  }

 private:
  // The AAN sublayer over the whole sequence: x (B, T, d) -> new x.
  Tensor AanBlock(const AanParams& p, const Tensor& x, Arena& arena) const;
  // Self-attention sublayer over the whole sequence: x (B, T, d) -> new x.
  Tensor SelfAttentionBlock(const AttentionParams& p, const Tensor& x, const Tensor& key_mask,
                            bool causal, Arena& arena) const;

  config::ModelConfig config_;
  int64_t dim_ = 0, ffn_dim_ = 0, vocab_size_ = 0;
  int heads_ = 0;
  bool pre_norm_ = false;
  bool aan_ = false;
  Activation activation_ = Activation::kRelu;
  Positions positions_style_ = Positions::kMarian;
  float ln_eps_ = kLayerNormEps;
  bool tensor_cache_ = false;
  Tensor src_emb_, tgt_emb_;  // (V, d); the same view when tied
  Tensor out_bias_;           // (V)
  LinearWeights output_;      // E^T (d, V): float view of tgt_emb_, maybe an integer copy
  std::vector<EncoderLayerParams> enc_;
  std::vector<DecoderLayerParams> dec_;
  Tensor enc_final_scale_, enc_final_bias_, dec_final_scale_, dec_final_bias_;  // pre-norm only
  Tensor positions_;  // device_positions()
};

}  // namespace tern::inference
