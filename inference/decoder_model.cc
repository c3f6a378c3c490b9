#include "inference/decoder_model.h"

#include "common/error.h"
#include "inference/layers.h"
#include "inference/rnn.h"
#include "inference/transformer.h"
#include "tensor/ops.h"

namespace tern::inference {

SentenceGather::SentenceGather(const std::vector<int32_t>& keep, int64_t sentences, Arena& arena,
                               StepUploader& upload)
    : arena_(arena) {
  const int64_t kept = static_cast<int64_t>(keep.size());
  for (int64_t i = 0; i < kept; ++i) {
    CHECK(keep[i] >= 0 && keep[i] < sentences && (i == 0 || keep[i] > keep[i - 1]))
        << "KeepSentences: bad index list";
  }
  ids_ = upload.Put(keep.data(), {kept}, DType::kInt32, arena);
}

Tensor SentenceGather::operator()(const Tensor& t) const {
  if (!t.defined()) return t;
  const int64_t kept = ids_.dim(0);
  Shape shape = t.shape();
  shape.set_dim(0, kept);
  Tensor out = arena_.Alloc(shape);
  if (kept > 0) {
    GatherRows(t.Reshape({t.dim(0), t.numel() / t.dim(0)}), ids_,
               out.Reshape({kept, out.numel() / kept}));
  }
  return out;
}

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
