#include "inference/load_model.h"

#include <string>

#include "common/error.h"
#include "inference/rnn/rnn.h"
#include "inference/transformer/transformer.h"

namespace tern::inference {

std::unique_ptr<DecoderModel> LoadDecoderModel(const config::ModelConfig& config,
                                               const Weights& weights, const LinearOptions& linear,
                                               const RnnOptions& rnn) {
  const std::string& arch = config.arch();
  if (arch == "s2s" || arch == "devlin") {
    return std::make_unique<RnnModel>(config, weights, linear, rnn);
  }
  if (arch.empty() || arch == "transformer" || arch == "aan") {
    return std::make_unique<Transformer>(config, weights, linear);
  }
  Fail("model.arch '", arch, "' cannot be run by this runtime (known: transformer, aan, s2s, ",
       "devlin)");
}

}  // namespace tern::inference
