// Where the batcher's sentence pairs come from, one epoch at a time, already shuffled:
//  - InMemorySource reads and encodes the corpus once and shuffles all of it each epoch;
//  - StreamingSource reads the files again each epoch and shuffles windows of sentences, so a
//    corpus larger than memory needs only one window (plus a maxi-batch) at a time.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "data/corpus.h"

namespace tern::data {

// Where in an epoch's stream a source stands, cheap to return to: in memory, `pos` pairs of the
// epoch's order are passed; streaming, the current window starts after `skip_lines` raw lines,
// is the epoch's window number `window`, and `pos` of its (shuffled) pairs are passed.
struct SourcePosition {
  int64_t skip_lines = 0;
  int64_t window = 0;
  int64_t pos = 0;
};

class SentenceSource {
 public:
  virtual ~SentenceSource() = default;
  // Starts `epoch` from its first sentence; the order is a function of (seed, epoch).
  virtual void StartEpoch(int64_t epoch) = 0;
  // The next pair of this epoch; false at its end.
  virtual bool Next(Example* example) = 0;
  // The position of the pair Next returns next.
  virtual SourcePosition position() const = 0;
  // StartEpoch(epoch), then on to `position` (as position() returned it in that epoch), reading
  // at most one window. Throws tern::Error when the corpus is too short for it (it changed).
  virtual void Seek(int64_t epoch, const SourcePosition& position) = 0;
  // Counts of the corpus pass that is under way (or of the load, in memory).
  virtual CorpusStats stats() const = 0;
};

// `vocab` must outlive the source. shuffle = false keeps corpus order.
std::unique_ptr<SentenceSource> MakeInMemorySource(const CorpusOptions& options, const Vocab& vocab,
                                                   bool shuffle, uint64_t seed);
// REQUIRES: window > 0.
std::unique_ptr<SentenceSource> MakeStreamingSource(const CorpusOptions& options,
                                                    const Vocab& vocab, int64_t window,
                                                    bool shuffle, uint64_t seed);

}  // namespace tern::data
