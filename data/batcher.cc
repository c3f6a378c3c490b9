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
  return StrCat(kStateMagic, " v1 epoch=", epoch, " offset=", offset, " seed=", seed,
                " maxi=", maxi_index, " maxi_offset=", maxi_offset,
                " skip_lines=", maxi_start.skip_lines, " window=", maxi_start.window,
                " pos=", maxi_start.pos);
}

BatcherState BatcherState::Parse(std::string_view text) {
  BatcherState state;
  std::istringstream in{std::string(text)};
  std::string magic, version;
  in >> magic >> version;
  bool ok = magic == kStateMagic && version == "v1";
  // Every field once, in Serialize's order.
  const std::pair<std::string_view, int64_t*> fields[] = {
      {"epoch", &state.epoch},
      {"offset", &state.offset},
      {"seed", nullptr},
      {"maxi", &state.maxi_index},
      {"maxi_offset", &state.maxi_offset},
      {"skip_lines", &state.maxi_start.skip_lines},
      {"window", &state.maxi_start.window},
      {"pos", &state.maxi_start.pos}};
  for (const auto& [key, out] : fields) {
    std::string word;
    if (!ok || !(in >> word) || word.size() <= key.size() + 1 ||
        std::string_view(word).substr(0, key.size()) != key || word[key.size()] != '=') {
      ok = false;
      break;
    }
    const char* begin = word.data() + key.size() + 1;
    const char* end = word.data() + word.size();
    std::from_chars_result result =
        out ? std::from_chars(begin, end, *out) : std::from_chars(begin, end, state.seed);
    ok = result.ec == std::errc() && result.ptr == end && (out == nullptr || *out >= 0);
  }
  std::string extra;
  if (!ok || (in >> extra) || state.maxi_offset > state.offset) {
    Fail("saved data position \"", text, "\" is not a ", kStateMagic,
         " v1 line; the checkpoint is damaged or from another version");
  }
  return state;
}

bool BatcherState::operator==(const BatcherState& o) const {
  return epoch == o.epoch && offset == o.offset && seed == o.seed && maxi_index == o.maxi_index &&
         maxi_offset == o.maxi_offset && maxi_start.skip_lines == o.maxi_start.skip_lines &&
         maxi_start.window == o.maxi_start.window && maxi_start.pos == o.maxi_start.pos;
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
  maxi_offset_ = 0;
  maxi_.clear();
  ranges_.clear();
  next_range_ = 0;
  source_->StartEpoch(epoch);
  maxi_start_ = source_->position();
}

BatcherState Batcher::state() const {
  BatcherState state;
  state.epoch = epoch_;
  state.offset = offset_;
  state.seed = options_.seed;
  // Before the first maxi-batch of an epoch, "the one under way" is the first, not yet read.
  state.maxi_index = std::max<int64_t>(maxi_index_ - 1, 0);
  state.maxi_offset = maxi_offset_;
  state.maxi_start = maxi_start_;
  return state;
}

bool Batcher::FillMaxiBatch() {
  maxi_.clear();
  ranges_.clear();
  next_range_ = 0;
  maxi_start_ = source_->position();
  maxi_offset_ = offset_;
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
        offset_ = maxi_offset_ = maxi_index_ = 0;
        maxi_start_ = SourcePosition();
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
  source_->Seek(state.epoch, state.maxi_start);
  maxi_index_ = state.maxi_index;
  offset_ = state.maxi_offset;
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
