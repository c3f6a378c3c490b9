// Padding and framing (bos/eos) of a mini-batch.
#include "data/batch.h"

#include <glog/logging.h>

#include <algorithm>

namespace tern::data {

void BuildBatch(std::span<const Example* const> examples, Batch* batch) {
  CHECK(!examples.empty());
  const int n = static_cast<int>(examples.size());
  int src_len = 0, tgt_len = 0;
  for (const Example* e : examples) {
    src_len = std::max(src_len, static_cast<int>(e->src.size()) + 1);
    tgt_len = std::max(tgt_len, static_cast<int>(e->tgt.size()) + 1);
  }
  batch->batch_size = n;
  batch->src_len = src_len;
  batch->tgt_len = tgt_len;
  batch->src.assign(static_cast<size_t>(n) * src_len, kPadId);
  batch->src_mask.assign(static_cast<size_t>(n) * src_len, 0.0f);
  batch->tgt_in.assign(static_cast<size_t>(n) * tgt_len, kPadId);
  batch->tgt_out.assign(static_cast<size_t>(n) * tgt_len, kPadId);
  batch->sentence_ids.resize(n);
  batch->target_tokens = 0;
  for (int b = 0; b < n; ++b) {
    const Example& e = *examples[b];
    int32_t* src = batch->src.data() + static_cast<size_t>(b) * src_len;
    float* mask = batch->src_mask.data() + static_cast<size_t>(b) * src_len;
    std::copy(e.src.begin(), e.src.end(), src);
    src[e.src.size()] = kEosId;
    std::fill(mask, mask + e.src.size() + 1, 1.0f);
    int32_t* tgt_in = batch->tgt_in.data() + static_cast<size_t>(b) * tgt_len;
    int32_t* tgt_out = batch->tgt_out.data() + static_cast<size_t>(b) * tgt_len;
    tgt_in[0] = kBosId;
    std::copy(e.tgt.begin(), e.tgt.end(), tgt_in + 1);
    std::copy(e.tgt.begin(), e.tgt.end(), tgt_out);
    tgt_out[e.tgt.size()] = kEosId;
    batch->target_tokens += static_cast<int64_t>(e.tgt.size()) + 1;
    batch->sentence_ids[b] = e.id;
  }
}

}  // namespace tern::data
