// The correspondence between Tern's Transformer and Marian's ("type: transformer"): parameter
// names and shapes, and the model options Marian keeps in the "special:model.yml" entry of its
// .npz files. Checked against Marian's src/models/transformer.h and src/common/io.cpp:
//
//  - Names are Marian's: Wemb (tied-embeddings-all) or encoder_Wemb / decoder_Wemb, each (V, d),
//    one row per token; encoder_l1_self_Wq ..., decoder_l1_context_Wo_ln_scale,
//    decoder_l1_ffn_W1, decoder_ff_logit_out_b. Tern uses the same names, except:
//      pre-norm sublayer norms are "<name>_pre" in Marian (encoder_l1_self_Wo_ln_scale_pre,
//      encoder_l1_ffn_ffn_ln_bias_pre), and the final norms are encoder_top_ln_* /
//      decoder_top_ln_* in Marian, encoder_final_ln_* / decoder_final_ln_* in Tern.
//  - Linear weights are (in, out) in both (y = x W + b). Biases and layer-norm scales/biases are
//    (1, n) in Marian and (n) in Tern; 1-D arrays are read as (1, n) by Marian and accepted as
//    either by Tern.
//  - Output layer: Tern always ties it to the (target) embedding, transposed, as Marian does with
//    tied-embeddings or tied-embeddings-all; untied Marian models (decoder_ff_logit_out_W) and
//    layer-stacking variants Tern does not run are refused by name.
//  - Positions: both add sqrt(d) * embedding + the sinusoid with the sin half first, then the cos
//    half, timescale 10000^(i / (d/2 - 1)); layer-norm epsilon 1e-6 in both.
//  - Vocabulary ids differ (Marian: eos 0, unk 1, no bos; Tern: pad 0, unk 1, bos 2, eos 3), and
//    Marian's decoder starts from a zero vector, Tern's from the bos row: vocab.h moves the
//    rows of a Marian-trained model; the names and shapes here are id-order agnostic.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "configs/tern.pb.h"
#include "tensor/tensor.h"

namespace tern::inference {

inline constexpr char kMarianConfigEntry[] = "special:model.yml";

struct MarianParameter {
  std::string tern_name;
  std::string marian_name;
  Shape shape;                        // Tern's
  std::vector<int64_t> marian_shape;  // (1, n) for Tern's (n)
};

// Every parameter of Tern's Transformer for `config` and the vocabulary size, in
// TransformerParameterShapes' order, with its Marian name and shape.
std::vector<MarianParameter> MarianParameters(const config::ModelConfig& config,
                                              int64_t vocab_size);

// The model.yml Marian reads: type, dimensions, depths, heads, tying, pre/post-norm operations,
// activation, dropouts and max-length.
std::string MarianModelYaml(const config::ModelConfig& config, int64_t vocab_size);

// The Tern model config of a Marian model.yml, with the (joint) vocabulary size from dim-vocabs
// (0 when absent). tern::Error naming `source` and the option for anything Tern's Transformer
// cannot run (another model type, an untied output layer, swish, other pre/post-processing, ...).
config::ModelConfig ModelConfigFromMarianYaml(const std::string& yaml, const std::string& source,
                                              int64_t* vocab_size);

}  // namespace tern::inference
