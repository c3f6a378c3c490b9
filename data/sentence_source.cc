// The in-memory and streaming sentence sources.
#include "data/sentence_source.h"

#include <numeric>

#include "common/error.h"
#include "data/shuffle.h"

namespace tern::data {
namespace {

enum Stage : uint64_t { kCorpusShuffle = 1, kWindowShuffle = 2 };

class InMemorySource : public SentenceSource {
 public:
  InMemorySource(const CorpusOptions& options, const Vocab& vocab, bool shuffle, uint64_t seed)
      : shuffle_(shuffle), seed_(seed) {
    CorpusReader reader(options, &vocab);
    Example example;
    while (reader.Next(&example)) examples_.push_back(std::move(example));
    stats_ = reader.stats();
    LOG(INFO) << options.src_path << " + " << options.tgt_path << ": " << stats_.Summary();
  }

  void StartEpoch(int64_t epoch) override {
    order_.resize(examples_.size());
    std::iota(order_.begin(), order_.end(), 0);
    if (shuffle_) Shuffle(&order_, DeriveSeed(seed_, epoch, kCorpusShuffle, 0));
    pos_ = 0;
  }

  bool Next(Example* example) override {
    if (pos_ == order_.size()) return false;
    *example = examples_[order_[pos_++]];
    return true;
  }

  CorpusStats stats() const override { return stats_; }

 private:
  bool shuffle_;
  uint64_t seed_;
  std::vector<Example> examples_;
  CorpusStats stats_;
  std::vector<uint32_t> order_;  // (examples): this epoch's order
  size_t pos_ = 0;
};

class StreamingSource : public SentenceSource {
 public:
  StreamingSource(const CorpusOptions& options, const Vocab& vocab, int64_t window, bool shuffle,
                  uint64_t seed)
      : options_(options), vocab_(vocab), window_(window), shuffle_(shuffle), seed_(seed) {
    CHECK_GT(window, 0);
  }

  void StartEpoch(int64_t epoch) override {
    reader_ = std::make_unique<CorpusReader>(options_, &vocab_);
    epoch_ = epoch;
    window_index_ = 0;
    buffer_.clear();
    pos_ = 0;
    logged_ = false;
  }

  bool Next(Example* example) override {
    CHECK(reader_ != nullptr) << "StartEpoch first";
    if (pos_ == buffer_.size() && !FillWindow()) return false;
    *example = std::move(buffer_[pos_++]);
    return true;
  }

  CorpusStats stats() const override { return reader_ ? reader_->stats() : CorpusStats(); }

 private:
  bool FillWindow() {
    buffer_.clear();
    pos_ = 0;
    Example example;
    while (static_cast<int64_t>(buffer_.size()) < window_ && reader_->Next(&example)) {
      buffer_.push_back(std::move(example));
    }
    if (buffer_.empty()) {
      if (!logged_) {
        LOG(INFO) << options_.src_path << " + " << options_.tgt_path << " (epoch " << epoch_
                  << "): " << reader_->stats().Summary();
        logged_ = true;
      }
      return false;
    }
    if (shuffle_) Shuffle(&buffer_, DeriveSeed(seed_, epoch_, kWindowShuffle, window_index_));
    ++window_index_;
    return true;
  }

  CorpusOptions options_;
  const Vocab& vocab_;
  int64_t window_;
  bool shuffle_;
  uint64_t seed_;
  std::unique_ptr<CorpusReader> reader_;
  int64_t epoch_ = 0;
  int64_t window_index_ = 0;
  std::vector<Example> buffer_;  // (window): the current window, shuffled
  size_t pos_ = 0;
  bool logged_ = false;
};

}  // namespace

std::unique_ptr<SentenceSource> MakeInMemorySource(const CorpusOptions& options, const Vocab& vocab,
                                                   bool shuffle, uint64_t seed) {
  return std::make_unique<InMemorySource>(options, vocab, shuffle, seed);
}

std::unique_ptr<SentenceSource> MakeStreamingSource(const CorpusOptions& options,
                                                    const Vocab& vocab, int64_t window,
                                                    bool shuffle, uint64_t seed) {
  return std::make_unique<StreamingSource>(options, vocab, window, shuffle, seed);
}

}  // namespace tern::data
