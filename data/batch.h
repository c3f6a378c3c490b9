// One mini-batch as plain vectors (no tensors: data/ does not use tensor/), and how it is built
// from encoded sentence pairs.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "data/corpus.h"

namespace tern::data {

struct Batch {
  int batch_size = 0;
  int src_len = 0;                    // longest source + 1 (eos)
  int tgt_len = 0;                    // longest target + 1 (bos or eos)
  std::vector<int32_t> src;           // (batch, src_len): x + kEosId, padded with kPadId
  std::vector<float> src_mask;        // (batch, src_len): 1 = token, 0 = pad
  std::vector<int32_t> tgt_in;        // (batch, tgt_len): kBosId + y, padded with kPadId
  std::vector<int32_t> tgt_out;       // (batch, tgt_len): y + kEosId, padded with kPadId
  int64_t target_tokens = 0;          // non-pad entries of tgt_out
  std::vector<int64_t> sentence_ids;  // (batch): 0-based line index of each pair in the corpus
};

// Builds the padded batch of `examples` in the given order.
// REQUIRES: !examples.empty().
void BuildBatch(std::span<const Example* const> examples, Batch* batch);

}  // namespace tern::data
