// Maxi-batch sorting, budgeted cutting, batch-order shuffling, sharding and positions.
#include "data/batcher.h"

#include <algorithm>
#include <charconv>
#include <sstream>

#include "common/error.h"
#include "data/shuffle.h"

namespace tern::data {
namespace {

constexpr uint64_t kBatchOrderShuffle = 3;
constexpr std::string_view kStateMagic = "tern-data-position";

}  // namespace

void ValidateBatcherOptions(const BatcherOptions& o) {
  if (o.batch_tokens < 2) Fail("data.batch_tokens must be at least 2, not ", o.batch_tokens);
  if (o.maxi_batch < 1) Fail("data.maxi_batch must be at least 1, not ", o.maxi_batch);
  if (o.streaming && o.shuffle_window < 1) {
    Fail("data.shuffle_window must be positive when streaming, not ", o.shuffle_window);
  }
  if (o.num_ranks < 1 || o.rank < 0 || o.rank >= o.num_ranks) {
    Fail("rank ", o.rank, " of ", o.num_ranks, " ranks is out of range");
  }
  if (o.corpus.max_length < 0) Fail("data.max_length must be >= 0, not ", o.corpus.max_length);
}

std::string BatcherState::Serialize() const {
  return StrCat(kStateMagic, " v1 epoch=", epoch, " offset=", offset, " seed=", seed);
}

BatcherState BatcherState::Parse(std::string_view text) {
  std::istringstream in{std::string(text)};
  std::string magic, version, epoch, offset, seed, extra;
  in >> magic >> version >> epoch >> offset >> seed;
  auto number = [&](const std::string& field, std::string_view key, auto* out) {
    std::string_view v(field);
    if (v.substr(0, key.size()) != key) return false;
    v.remove_prefix(key.size());
    auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), *out);
    return ec == std::errc() && end == v.data() + v.size();
  };
  BatcherState state;
  if (magic != kStateMagic || version != "v1" || !number(epoch, "epoch=", &state.epoch) ||
      !number(offset, "offset=", &state.offset) || !number(seed, "seed=", &state.seed) ||
      (in >> extra) || state.epoch < 0 || state.offset < 0) {
    Fail("saved data position \"", text, "\" is not a ", kStateMagic,
         " v1 line; the checkpoint is damaged or from another version");
  }
  return state;
}

Batcher::Batcher(const BatcherOptions& options, const Vocab& vocab) : options_(options) {
  ValidateBatcherOptions(options_);
  // A pair whose target cannot fit the budget even alone is a bad line like any too long one.
  int fit = options_.batch_tokens - 1;
  if (options_.corpus.max_length == 0 || options_.corpus.max_length > fit) {
    options_.corpus.max_length = fit;
  }
  source_ = options_.streaming
                ? MakeStreamingSource(options_.corpus, vocab, options_.shuffle_window,
                                      options_.shuffle, options_.seed)
                : MakeInMemorySource(options_.corpus, vocab, options_.shuffle, options_.seed);
  StartEpoch(0);
}

void Batcher::StartEpoch(int64_t epoch) {
  epoch_ = epoch;
  offset_ = 0;
  maxi_index_ = 0;
  maxi_.clear();
  ranges_.clear();
  next_range_ = 0;
  source_->StartEpoch(epoch);
}

bool Batcher::FillMaxiBatch() {
  maxi_.clear();
  ranges_.clear();
  next_range_ = 0;
  const int64_t budget = static_cast<int64_t>(options_.maxi_batch) * options_.batch_tokens;
  int64_t tokens = 0;
  Example example;
  while (tokens < budget && source_->Next(&example)) {
    tokens += static_cast<int64_t>(example.tgt.size()) + 1;
    maxi_.push_back(std::move(example));
  }
  if (maxi_.empty()) return false;
  std::sort(maxi_.begin(), maxi_.end(), [](const Example& a, const Example& b) {
    if (a.tgt.size() != b.tgt.size()) return a.tgt.size() < b.tgt.size();
    if (a.src.size() != b.src.size()) return a.src.size() < b.src.size();
    return a.id < b.id;
  });
  // Sorted by target length, so the newest sentence sets the batch's tgt_len.
  size_t begin = 0;
  for (size_t i = 0; i < maxi_.size(); ++i) {
    const int64_t tgt_len = static_cast<int64_t>(maxi_[i].tgt.size()) + 1;
    CHECK_LE(tgt_len, options_.batch_tokens) << "max_length should have excluded this pair";
    if (static_cast<int64_t>(i - begin + 1) * tgt_len > options_.batch_tokens) {
      ranges_.emplace_back(begin, i);
      begin = i;
    }
  }
  ranges_.emplace_back(begin, maxi_.size());
  if (options_.shuffle) {
    Shuffle(&ranges_, DeriveSeed(options_.seed, epoch_, kBatchOrderShuffle, maxi_index_));
  }
  ++maxi_index_;
  return true;
}

bool Batcher::NextRange(std::pair<size_t, size_t>* range) {
  if (next_range_ == ranges_.size() && !FillMaxiBatch()) return false;
  *range = ranges_[next_range_++];
  return true;
}

bool Batcher::Next(Batch* batch) {
  for (;;) {
    if (options_.max_epochs > 0 && epoch_ >= options_.max_epochs) return false;
    std::pair<size_t, size_t> range;
    if (!NextRange(&range)) {
      if (offset_ == 0) {
        Fail("no usable sentence pairs in ", options_.corpus.src_path, " + ",
             options_.corpus.tgt_path, " (", source_->stats().Summary(), ")");
      }
      if (offset_ <= options_.rank) {
        Fail("the corpus gives only ", offset_, " batches per epoch, too few for ",
             options_.num_ranks, " ranks; use more data or a smaller data.batch_tokens");
      }
      if (options_.max_epochs > 0 && epoch_ + 1 >= options_.max_epochs) {
        epoch_ = options_.max_epochs;
        offset_ = 0;
        return false;
      }
      StartEpoch(epoch_ + 1);
      continue;
    }
    const int64_t number = offset_++;
    if (number % options_.num_ranks != options_.rank) continue;
    std::vector<const Example*> examples;
    examples.reserve(range.second - range.first);
    for (size_t i = range.first; i < range.second; ++i) examples.push_back(&maxi_[i]);
    BuildBatch(examples, batch);
    return true;
  }
}

void Batcher::Restore(const BatcherState& state) {
  if (state.seed != options_.seed) {
    Fail("the saved data position was made with seed ", state.seed, " but this run's seed is ",
         options_.seed, "; resume with the same training.seed");
  }
  StartEpoch(state.epoch);
  std::pair<size_t, size_t> range;
  while (offset_ < state.offset) {
    if (!NextRange(&range)) {
      Fail("the saved data position (epoch ", state.epoch, ", batch ", state.offset,
           ") lies past the end of that epoch (", offset_,
           " batches); the corpus or data.batch_tokens/maxi_batch changed since it was saved");
    }
    ++offset_;
  }
}

}  // namespace tern::data
