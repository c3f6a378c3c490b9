// DataConfig → options.
#include "data/data_options.h"

#include <glog/logging.h>

#include "common/error.h"
#include "common/file_io.h"

namespace tern::data {

CorpusOptions CorpusOptionsFromConfig(const config::DataConfig& data, bool validation) {
  CorpusOptions options;
  options.src_path = validation ? data.valid_src() : data.train_src();
  options.tgt_path = validation ? data.valid_tgt() : data.train_tgt();
  const char* field = validation ? "data.valid_src/valid_tgt" : "data.train_src/train_tgt";
  if (options.src_path.empty() || options.tgt_path.empty()) Fail(field, " must both be set");
  if (data.max_length() < 0) Fail("data.max_length must be >= 0, not ", data.max_length());
  options.max_length = data.max_length();
  options.on_bad_line = ParseBadLinePolicy(data.on_bad_line(), "data.on_bad_line");
  return options;
}

BatcherOptions BatcherOptionsFromConfig(const config::DataConfig& data, uint64_t seed, int rank,
                                        int num_ranks) {
  BatcherOptions options;
  options.corpus = CorpusOptionsFromConfig(data);
  if (data.batch_tokens() > 0) options.batch_tokens = data.batch_tokens();
  if (data.maxi_batch() > 0) options.maxi_batch = data.maxi_batch();
  if (data.shuffle_window() < 0) {
    Fail("data.shuffle_window must be >= 0 (0 = whole corpus in memory), not ",
         data.shuffle_window());
  }
  options.streaming = data.shuffle_window() > 0;
  options.shuffle_window = data.shuffle_window();
  options.seed = seed;
  options.rank = rank;
  options.num_ranks = num_ranks;
  ValidateBatcherOptions(options);
  return options;
}

BatcherOptions ValidationBatcherOptionsFromConfig(const config::DataConfig& data) {
  BatcherOptions options;
  options.corpus = CorpusOptionsFromConfig(data, /*validation=*/true);
  // A dev set is never silently shortened by the length limit.
  options.corpus.max_length = 0;
  options.corpus.on_bad_line = BadLinePolicy::kError;
  if (data.batch_tokens() > 0) options.batch_tokens = data.batch_tokens();
  options.shuffle = false;
  options.max_epochs = 1;
  ValidateBatcherOptions(options);
  return options;
}

VocabTrainOptions VocabTrainOptionsFromConfig(const config::DataConfig& data, uint64_t seed) {
  VocabTrainOptions options;
  if (data.vocab_size() > 0) options.vocab_size = data.vocab_size();
  options.seed = static_cast<uint32_t>(seed);
  return options;
}

Vocab LoadOrTrainVocab(const config::DataConfig& data, uint64_t seed) {
  if (data.vocab().empty()) Fail("data.vocab must name the SentencePiece model file");
  if (FileExists(data.vocab())) return Vocab::Load(data.vocab());
  LOG(INFO) << "training vocabulary " << data.vocab() << " (" << data.vocab_size() << " pieces) on "
            << data.train_src() << " + " << data.train_tgt();
  CorpusOptions corpus = CorpusOptionsFromConfig(data);
  return Vocab::Train({corpus.src_path, corpus.tgt_path}, VocabTrainOptionsFromConfig(data, seed),
                      data.vocab());
}

}  // namespace tern::data
