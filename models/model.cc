#include "models/model.h"

#include "common/error.h"
#include "graph/ops.h"
#include "models/devlin.h"
#include "models/s2s.h"
#include "models/transformer.h"

namespace tern::models {

graph::Var TokenLoss(graph::Graph& g, graph::Var logits, const Tensor& tgt_out, float smoothing) {
  constexpr int32_t kPadId = 0;
  return graph::Sum(graph::CrossEntropy(logits, tgt_out, smoothing, kPadId));
}

std::unique_ptr<Model> CreateModel(const config::ModelConfig& config, int vocab_size) {
  if (config.arch() == "transformer" || config.arch() == "aan")
    return std::make_unique<Transformer>(config, vocab_size);
  if (config.arch() == "s2s") return std::make_unique<S2S>(config, vocab_size);
  if (config.arch() == "devlin") return std::make_unique<Devlin>(config, vocab_size);
  Fail("model.arch: unknown architecture '", config.arch(),
       "' (known: transformer, aan, s2s, devlin)");
}

}  // namespace tern::models
