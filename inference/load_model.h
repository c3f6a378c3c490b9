// The one place that knows every architecture the runtime decodes: a config's arch to its
// DecoderModel (inference/transformer/ or inference/rnn/).
#pragma once

#include <memory>

#include "configs/tern.pb.h"
#include "inference/format/weights.h"
#include "inference/layers/decoder_model.h"
#include "inference/layers/linear.h"

namespace tern::inference {

// The runtime model for config.arch(): "transformer", "aan", "s2s" or "devlin"; tern::Error for
// any other architecture or a missing or misshapen parameter. `weights` must outlive it. Weights
// on a GPU (CopyWeightsTo) give a model that runs there, in float (or bf16/fp16 products).
std::unique_ptr<DecoderModel> LoadDecoderModel(const config::ModelConfig& config,
                                               const Weights& weights,
                                               const LinearOptions& linear = {},
                                               const RnnOptions& rnn = {});

}  // namespace tern::inference
