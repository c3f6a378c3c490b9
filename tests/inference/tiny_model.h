// Tiny random Transformers for the runtime's tests, with parameters named and shaped as models/
// creates them (see inference/transformer/transformer.h), plus a plain-loop reference forward pass
// that spells out the function the runtime must compute.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "configs/tern.pb.h"
#include "inference/format/model_file.h"
#include "inference/format/weights.h"
#include "tensor/tensor.h"

namespace tern::inference::testing {

struct TinyModelSpec {
  bool tied = true;
  bool pre_norm = false;
  std::string activation = "relu";
  std::string positions = "marian";  // model.positions
  float layer_norm_eps = 1e-6f;      // model.layer_norm_eps
  int vocab = 29;
  int dim = 16;
  int heads = 4;
  int ffn = 24;
  int enc_depth = 2;
  int dec_depth = 2;
  float eos_bias = 1.0f;  // added to the eos output bias so hypotheses end now and then
  uint32_t seed = 7;
  float emb_scale = 0.5f;  // embeddings uniform in [-emb_scale, emb_scale]
  bool aan = false;        // arch "aan" (no ReferenceLogits for it), with or without FFN and gate
  bool aan_ffn = true, aan_gate = true;
  // Tokens 4 and 5, 6 and 7, ... twins: the same embeddings and output bias, so a step scores a
  // twin exactly as its sibling and hypotheses that differ only by twins tie exactly.
  bool twins = false;
};

struct TinyModel {
  config::TrainConfig config;
  std::vector<NamedTensor> tensors;  // owning tensors
  Weights weights{"tiny test model"};
};

TinyModel MakeTinyModel(const TinyModelSpec& spec);

// For gtest's parameter names in failure messages.
inline void PrintTo(const TinyModelSpec& s, std::ostream* os) {
  *os << (s.tied ? "tied" : "untied") << (s.pre_norm ? " pre-norm " : " post-norm ") << s.activation
      << " d" << s.dim << " h" << s.heads << " eos_bias " << s.eos_bias << (s.aan ? " aan" : "")
      << (s.aan && !s.aan_ffn ? " no-ffn" : "") << (s.aan && !s.aan_gate ? " no-gate" : "")
      << (s.twins ? " twins" : "");
}

// Logits (T, V) of one sentence pair computed with plain loops: src (S) ids, tgt_in (T) ids.
std::vector<float> ReferenceLogits(const TinyModel& model, const std::vector<int32_t>& src,
                                   const std::vector<int32_t>& tgt_in);

}  // namespace tern::inference::testing
