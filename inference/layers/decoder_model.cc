#include "inference/layers/decoder_model.h"

#include "common/error.h"
#include "inference/layers/layers.h"
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

}  // namespace tern::inference
