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

  SourcePosition position() const override { return {0, 0, static_cast<int64_t>(pos_)}; }

  void Seek(int64_t epoch, const SourcePosition& position) override {
    StartEpoch(epoch);
    if (position.pos > static_cast<int64_t>(order_.size())) {
      Fail("saved data position (pair ", position.pos, ") lies past the corpus (", order_.size(),
           " pairs); the corpus changed since it was saved");
    }
    pos_ = static_cast<size_t>(position.pos);
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
    window_start_line_ = 0;
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

  SourcePosition position() const override {
    CHECK(reader_ != nullptr) << "StartEpoch first";
    if (pos_ < buffer_.size()) {
      return {window_start_line_, window_index_ - 1, static_cast<int64_t>(pos_)};
    }
    return {reader_->lines_read(), window_index_, 0};  // the next window's first pair
  }

  void Seek(int64_t epoch, const SourcePosition& position) override {
    StartEpoch(epoch);
    if (!reader_->SkipLines(position.skip_lines)) {
      Fail("saved data position (line ", position.skip_lines, ") lies past the end of ",
           options_.src_path, "; the corpus changed since it was saved");
    }
    window_index_ = position.window;
    if (position.pos == 0) return;  // Next fills the window
    if (!FillWindow() || position.pos > static_cast<int64_t>(buffer_.size())) {
      Fail("saved data position (window ", position.window, ", pair ", position.pos,
           ") lies past the end of ", options_.src_path,
           "; the corpus or data.shuffle_window changed since it was saved");
    }
    pos_ = static_cast<size_t>(position.pos);
  }

  CorpusStats stats() const override { return reader_ ? reader_->stats() : CorpusStats(); }

 private:
  bool FillWindow() {
    buffer_.clear();
    pos_ = 0;
    window_start_line_ = reader_->lines_read();
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
  int64_t window_index_ = 0;       // of the next window to fill
  int64_t window_start_line_ = 0;  // raw lines before the current window
  std::vector<Example> buffer_;    // (window): the current window, shuffled
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
