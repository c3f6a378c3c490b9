// Mini-batches for training: a target-token budget, maxi-batch sorting by length, deterministic
// shuffling, per-rank sharding, epochs, and a position that can be saved and restored exactly.
//
// The pipeline of one epoch: the sentence source yields the epoch's pairs shuffled (whole corpus
// in memory, or windows of shuffle_window when streaming); the batcher reads a maxi-batch of
// about maxi_batch × batch_tokens target tokens, sorts it by (target, source) length, cuts it into
// batches whose padded target size batch_size × tgt_len stays within batch_tokens, and shuffles
// their order. Batches are numbered through the epoch over all ranks; rank r of N takes the
// batches whose number is r mod N, so the ranks' shares are disjoint and together complete. Every
// rank reads the whole stream; only its own batches are padded and filled.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "data/batch.h"
#include "data/corpus.h"
#include "data/sentence_source.h"
#include "data/vocab.h"

namespace tern::data {

struct BatcherOptions {
  CorpusOptions corpus;
  int batch_tokens = 2048;  // padded target tokens of one batch at most
  int maxi_batch = 100;     // batches' worth of sentences sorted together
  // false: the corpus is read once into memory and shuffled whole each epoch. true: it is
  // streamed from disk each epoch and shuffled in windows of shuffle_window sentences.
  bool streaming = false;
  int64_t shuffle_window = 0;
  // false: no shuffling (validation): pairs in corpus order, batches in each maxi-batch's length
  // order; sentence_ids say where each pair came from.
  bool shuffle = true;
  uint64_t seed = 1234;
  int rank = 0;
  int num_ranks = 1;
  int64_t max_epochs = 0;  // Next returns false after this many epochs; 0 = never
};

// Throws tern::Error naming the data.* field that is out of range.
void ValidateBatcherOptions(const BatcherOptions& options);

// Where a batcher stands. Shuffles are counter-based (shuffle.h), so the position is the whole
// state, random streams included. Besides (epoch, offset) it names where the current maxi-batch
// began, so a restore reads at most one shuffle window and one maxi-batch again, not the epoch.
// Offsets count batches over all ranks, so a position means the same for any number of ranks: a
// job resumed on another rank count can restore every rank from one saved rank's position.
struct BatcherState {
  int64_t epoch = 0;          // 0-based epoch under way
  int64_t offset = 0;         // batches of this epoch (numbered over all ranks) already passed
  uint64_t seed = 0;          // the run's data seed, from which every shuffle's stream derives
  int64_t maxi_index = 0;     // the current maxi-batch's number in the epoch
  int64_t maxi_offset = 0;    // the offset at which it began
  SourcePosition maxi_start;  // the sentence source's position where it began

  // One line of text: "tern-data-position v1 epoch=2 offset=317 seed=1234 maxi=12 ...".
  std::string Serialize() const;
  // Throws tern::Error when `text` is not what Serialize writes.
  static BatcherState Parse(std::string_view text);
  bool operator==(const BatcherState& o) const;
};

class Batcher {
 public:
  // Reads the whole corpus now unless streaming. `vocab` must outlive the batcher.
  Batcher(const BatcherOptions& options, const Vocab& vocab);
  Batcher(const Batcher&) = delete;
  Batcher& operator=(const Batcher&) = delete;

  // This rank's next batch; moves on to the next epoch at the end of one. Returns false only
  // once max_epochs are done. Throws tern::Error when an epoch yields no batch at all.
  bool Next(Batch* batch);

  // The position after the last batch Next returned.
  BatcherState state() const;
  // Goes to `state`: the following batches are those an uninterrupted run would give. Replays
  // from the start of the maxi-batch under way (reading, not padding). Throws tern::Error when the
  // state was saved with another seed or lies past the end of its epoch (the corpus changed).
  void Restore(const BatcherState& state);

  // The epoch of the batch Next returned last (max_epochs once done).
  int64_t epoch() const { return epoch_; }
  // Counts of the corpus pass under way (of the load, in memory). After a Restore, streaming
  // counts leave out the lines passed over.
  CorpusStats corpus_stats() const { return source_->stats(); }
  const BatcherOptions& options() const { return options_; }

 private:
  void StartEpoch(int64_t epoch);
  // Reads and cuts the next maxi-batch; false at the end of the epoch.
  bool FillMaxiBatch();
  // The next batch of the epoch (any rank's) as a range of maxi_; false at the end.
  bool NextRange(std::pair<size_t, size_t>* range);

  BatcherOptions options_;
  std::unique_ptr<SentenceSource> source_;
  int64_t epoch_ = 0;
  int64_t offset_ = 0;
  int64_t maxi_index_ = 0;  // of the next maxi-batch to fill
  // Where the maxi-batch under way began (its number is maxi_index_ - 1).
  int64_t maxi_offset_ = 0;
  SourcePosition maxi_start_;
  std::vector<Example> maxi_;                      // (sentences): sorted by length
  std::vector<std::pair<size_t, size_t>> ranges_;  // (batches): [begin, end) of maxi_, shuffled
  size_t next_range_ = 0;
};

}  // namespace tern::data
