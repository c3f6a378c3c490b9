// Filling the data pipeline's options from a config (tern::config::DataConfig), so the trainer
// and the programs agree on what each data.* field means.
#pragma once

#include <cstdint>

#include "configs/tern.pb.h"
#include "data/batcher.h"
#include "data/corpus.h"
#include "data/vocab.h"

namespace tern::data {

// data.train_src/train_tgt (or valid_src/valid_tgt), data.max_length, data.on_bad_line.
CorpusOptions CorpusOptionsFromConfig(const config::DataConfig& data, bool validation = false);

// Training batches for `rank` of `num_ranks`: data.batch_tokens, data.maxi_batch; streaming when
// data.shuffle_window > 0 (0 = whole corpus in memory). `seed` is training.seed.
BatcherOptions BatcherOptionsFromConfig(const config::DataConfig& data, uint64_t seed, int rank,
                                        int num_ranks);

// Validation batches: the dev set in corpus order, unshuffled, one pass, on one rank.
BatcherOptions ValidationBatcherOptionsFromConfig(const config::DataConfig& data);

// data.vocab_size; training draws on `seed`.
VocabTrainOptions VocabTrainOptionsFromConfig(const config::DataConfig& data, uint64_t seed);

// Loads data.vocab, or trains it on train_src + train_tgt jointly when the file is missing.
// REQUIRES (multi-rank): only one rank trains; the others call after it finished.
Vocab LoadOrTrainVocab(const config::DataConfig& data, uint64_t seed);

}  // namespace tern::data
