// Batching: the token budget, exactly-once coverage per epoch, determinism, sharding over ranks,
// save/restore of the position, in memory and streaming.
#include "data/batcher.h"

#include <gtest/gtest.h>

#include <map>
#include <set>

#include "common/error.h"
#include "tests/data/test_corpus.h"

namespace tern::data {
namespace {

using testing::ScratchDir;

bool SameBatch(const Batch& a, const Batch& b) {
  return a.batch_size == b.batch_size && a.src_len == b.src_len && a.tgt_len == b.tgt_len &&
         a.src == b.src && a.src_mask == b.src_mask && a.tgt_in == b.tgt_in &&
         a.tgt_out == b.tgt_out && a.target_tokens == b.target_tokens &&
         a.sentence_ids == b.sentence_ids;
}

std::vector<Batch> Take(Batcher* batcher, int n) {
  std::vector<Batch> out;
  Batch batch;
  while (static_cast<int>(out.size()) < n && batcher->Next(&batch)) out.push_back(batch);
  return out;
}

std::vector<Batch> TakeAll(Batcher* batcher) { return Take(batcher, 1 << 30); }

void ExpectSameSequence(const std::vector<Batch>& a, const std::vector<Batch>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(SameBatch(a[i], b[i])) << "batch " << i;
}

class BatcherTest : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    corpus_ = testing::GenerateCorpus(kPairs, 12, 21);
    // Line 10 is empty on the target side: skipped, so never in a batch.
    corpus_.tgt[10] = "";
    testing::WriteLines(dir_.File("train.de.gz"), corpus_.src, /*gzip=*/true);
    testing::WriteLines(dir_.File("train.en"), corpus_.tgt);
  }

  // In memory or streaming, by the test parameter.
  BatcherOptions Options() const {
    BatcherOptions options;
    options.corpus.src_path = dir_.File("train.de.gz");
    options.corpus.tgt_path = dir_.File("train.en");
    options.batch_tokens = 96;
    options.maxi_batch = 5;
    options.streaming = GetParam();
    options.shuffle_window = 170;
    options.seed = 99;
    return options;
  }

  static constexpr int kPairs = 600;
  ScratchDir dir_;
  testing::GeneratedCorpus corpus_;
  const Vocab& vocab_ = testing::SmallVocab();
};

TEST_P(BatcherTest, BatchesRespectBudgetAndCoverEverySentenceOncePerEpoch) {
  BatcherOptions options = Options();
  options.max_epochs = 2;
  Batcher batcher(options, vocab_);
  std::map<int64_t, std::multiset<int64_t>> seen_by_epoch;
  int64_t padded = 0, real = 0;
  Batch batch;
  while (batcher.Next(&batch)) {
    const int64_t epoch = batcher.epoch();  // the epoch of the batch just returned
    ASSERT_LE(static_cast<int64_t>(batch.batch_size) * batch.tgt_len, options.batch_tokens);
    ASSERT_EQ(batch.src.size(), static_cast<size_t>(batch.batch_size * batch.src_len));
    ASSERT_EQ(batch.tgt_in.size(), static_cast<size_t>(batch.batch_size * batch.tgt_len));
    int64_t tokens = 0;
    for (int b = 0; b < batch.batch_size; ++b) {
      const int64_t id = batch.sentence_ids[b];
      seen_by_epoch[epoch].insert(id);
      // Source row: the sentence, eos, then padding, with the mask to match.
      std::vector<int32_t> src;
      int s = 0;
      for (; s < batch.src_len && batch.src[b * batch.src_len + s] != kEosId; ++s) {
        src.push_back(batch.src[b * batch.src_len + s]);
        EXPECT_EQ(batch.src_mask[b * batch.src_len + s], 1.0f);
      }
      ASSERT_LT(s, batch.src_len);
      EXPECT_EQ(batch.src_mask[b * batch.src_len + s], 1.0f);
      for (++s; s < batch.src_len; ++s) {
        EXPECT_EQ(batch.src[b * batch.src_len + s], kPadId);
        EXPECT_EQ(batch.src_mask[b * batch.src_len + s], 0.0f);
      }
      EXPECT_EQ(vocab_.Decode(src), corpus_.src[id]);
      // Target rows: tgt_in = bos + y, tgt_out = y + eos, both padded.
      const int32_t* in = &batch.tgt_in[b * batch.tgt_len];
      const int32_t* out = &batch.tgt_out[b * batch.tgt_len];
      EXPECT_EQ(in[0], kBosId);
      std::vector<int32_t> y;
      int t = 0;
      for (; t < batch.tgt_len && out[t] != kEosId; ++t) {
        y.push_back(out[t]);
        EXPECT_EQ(in[t + 1], out[t]);
      }
      ASSERT_LT(t, batch.tgt_len);
      tokens += t + 1;
      for (int p = t + 1; p < batch.tgt_len; ++p) {
        EXPECT_EQ(out[p], kPadId);
        EXPECT_EQ(in[p], kPadId);
      }
      EXPECT_EQ(vocab_.Decode(y), corpus_.tgt[id]);
    }
    EXPECT_EQ(batch.target_tokens, tokens);
    real += tokens;
    padded += static_cast<int64_t>(batch.batch_size) * batch.tgt_len;
  }
  EXPECT_EQ(batcher.epoch(), 2);
  ASSERT_EQ(seen_by_epoch.size(), 2u);
  for (const auto& [e, ids] : seen_by_epoch) {
    EXPECT_EQ(ids.size(), static_cast<size_t>(kPairs - 1)) << "epoch " << e;
    EXPECT_EQ(std::set<int64_t>(ids.begin(), ids.end()).size(), ids.size()) << "epoch " << e;
    EXPECT_EQ(ids.count(10), 0u);
  }
  EXPECT_EQ(batcher.corpus_stats().empty, 1);
  // Maxi-batch sorting keeps padding low.
  EXPECT_GT(static_cast<double>(real) / padded, 0.8);
}

TEST_P(BatcherTest, SameSeedSameBatchesOtherSeedOrEpochOthers) {
  BatcherOptions options = Options();
  options.max_epochs = 2;
  Batcher a(options, vocab_), b(options, vocab_);
  std::vector<Batch> first = TakeAll(&a);
  ExpectSameSequence(first, TakeAll(&b));

  options.seed = 100;
  Batcher c(options, vocab_);
  std::vector<Batch> other = TakeAll(&c);
  ASSERT_FALSE(other.empty());
  EXPECT_FALSE(first.size() == other.size() && SameBatch(first[0], other[0]) &&
               SameBatch(first[1], other[1]));

  // Epoch 1 is shuffled differently from epoch 0.
  options.seed = 99;
  options.max_epochs = 1;
  Batcher d(options, vocab_);
  const size_t epoch0 = TakeAll(&d).size();
  ASSERT_LT(epoch0, first.size());
  EXPECT_FALSE(SameBatch(first[0], first[epoch0]) && SameBatch(first[1], first[epoch0 + 1]));
}

TEST_P(BatcherTest, RanksGetDisjointCompleteShares) {
  BatcherOptions options = Options();
  options.max_epochs = 1;
  Batcher single(options, vocab_);
  std::vector<Batch> all = TakeAll(&single);
  const int kRanks = 3;
  std::multiset<int64_t> union_ids;
  for (int r = 0; r < kRanks; ++r) {
    options.rank = r;
    options.num_ranks = kRanks;
    Batcher batcher(options, vocab_);
    std::vector<Batch> mine = TakeAll(&batcher);
    // Rank r's share is every kRanks-th batch of the single-rank sequence, starting at r.
    std::vector<Batch> expected;
    for (size_t i = r; i < all.size(); i += kRanks) expected.push_back(all[i]);
    ExpectSameSequence(mine, expected);
    for (const Batch& b : mine) union_ids.insert(b.sentence_ids.begin(), b.sentence_ids.end());
  }
  EXPECT_EQ(union_ids.size(), static_cast<size_t>(kPairs - 1));
  EXPECT_EQ(std::set<int64_t>(union_ids.begin(), union_ids.end()).size(), union_ids.size());
}

TEST_P(BatcherTest, RestoredPositionGivesTheSameFollowingBatches) {
  BatcherOptions options = Options();
  options.max_epochs = 2;
  for (int ranks : {1, 2}) {
    options.num_ranks = ranks;
    options.rank = ranks - 1;
    Batcher uninterrupted(options, vocab_);
    std::vector<Batch> reference = TakeAll(&uninterrupted);
    ASSERT_GT(reference.size(), 20u);
    // Stop mid-epoch and right after an epoch ends (when epoch 0's batches are all taken).
    Batcher probe(options, vocab_);
    size_t epoch0 = 0;
    Batch batch;
    while (probe.Next(&batch) && probe.epoch() == 0) ++epoch0;
    for (size_t stop : {size_t{1}, size_t{7}, size_t{22}, epoch0 - 1, epoch0, epoch0 + 5}) {
      Batcher first(options, vocab_);
      Take(&first, static_cast<int>(stop));
      const std::string saved = first.state().Serialize();

      Batcher resumed(options, vocab_);
      resumed.Restore(BatcherState::Parse(saved));
      EXPECT_EQ(resumed.state(), first.state());
      std::vector<Batch> rest = TakeAll(&resumed);
      ExpectSameSequence(rest, std::vector<Batch>(reference.begin() + stop, reference.end()));
    }
  }
}

TEST_P(BatcherTest, RestoreRereadsAtMostAWindowAndAMaxiBatch) {
  BatcherOptions options = Options();
  Batcher first(options, vocab_);
  Take(&first, 40);  // late in epoch 0
  ASSERT_EQ(first.epoch(), 0);
  Batcher resumed(options, vocab_);
  const int64_t read_at_start = resumed.corpus_stats().pairs_read;  // in memory: the load
  resumed.Restore(first.state());
  Batch batch;
  ASSERT_TRUE(resumed.Next(&batch));
  if (GetParam()) {
    // Streaming: the pairs before the maxi-batch's window were passed over, not read again.
    EXPECT_LE(resumed.corpus_stats().pairs_read, 2 * options.shuffle_window);
  } else {
    EXPECT_EQ(resumed.corpus_stats().pairs_read, read_at_start);
  }
}

INSTANTIATE_TEST_SUITE_P(InMemoryAndStreaming, BatcherTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? "Streaming" : "InMemory";
                         });

TEST(BatcherStateTest, SerializesAndRejectsDamage) {
  BatcherState state;
  state.epoch = 3;
  state.offset = 1234;
  state.seed = 42;
  state.maxi_index = 17;
  state.maxi_offset = 1200;
  state.maxi_start = {5000, 4, 321};
  const std::string text = state.Serialize();
  EXPECT_EQ(text,
            "tern-data-position v1 epoch=3 offset=1234 seed=42 maxi=17 maxi_offset=1200 "
            "skip_lines=5000 window=4 pos=321");
  EXPECT_EQ(BatcherState::Parse(text), state);
  const std::string tail = " maxi=17 maxi_offset=1200 skip_lines=5000 window=4 pos=321";
  for (const std::string& bad :
       {std::string(), "tern-data-position v2 epoch=3 offset=1234 seed=42" + tail,
        "tern-data-position v1 epoch=x offset=1234 seed=42" + tail,
        "tern-data-position v1 epoch=3 offset=-1 seed=42" + tail,
        "tern-data-position v1 epoch=3 offset=1234 seed=42" + tail + " more",
        "tern-data-position v1 offset=1234 epoch=3 seed=42" + tail,
        "tern-data-position v1 epoch=3 offset=1000 seed=42" + tail,  // maxi starts later
        std::string("tern-data-position v1 epoch=3 offset=1234 seed=42 maxi=17")}) {
    EXPECT_THROW(BatcherState::Parse(bad), Error) << bad;
  }
}

class BatcherErrorTest : public ::testing::Test {
 protected:
  BatcherOptions Options(const std::vector<std::string>& src, const std::vector<std::string>& tgt) {
    testing::WriteLines(dir_.File("s"), src);
    testing::WriteLines(dir_.File("t"), tgt);
    BatcherOptions options;
    options.corpus.src_path = dir_.File("s");
    options.corpus.tgt_path = dir_.File("t");
    options.batch_tokens = 64;
    return options;
  }
  ScratchDir dir_;
  const Vocab& vocab_ = testing::SmallVocab();
};

TEST_F(BatcherErrorTest, RestoreWithAnotherSeedOrPastTheEpochFails) {
  BatcherOptions options = Options({"das Haus.", "die Tür."}, {"the house.", "the door."});
  Batcher batcher(options, vocab_);
  BatcherState state = batcher.state();
  state.seed += 1;
  EXPECT_THROW(batcher.Restore(state), Error);
  state = batcher.state();
  state.offset = 50;
  EXPECT_THROW(batcher.Restore(state), Error);
}

TEST_F(BatcherErrorTest, EmptyCorpusAndTooFewBatchesForRanksFail) {
  BatcherOptions options = Options({"", ""}, {"x", "y"});
  Batcher empty(options, vocab_);
  Batch batch;
  try {
    empty.Next(&batch);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no usable sentence pairs"), std::string::npos);
  }
  options = Options({"das Haus."}, {"the house."});
  options.num_ranks = 2;
  options.rank = 1;
  Batcher starved(options, vocab_);
  EXPECT_THROW(starved.Next(&batch), Error);
}

TEST_F(BatcherErrorTest, OptionsOutOfRangeNameTheField) {
  BatcherOptions options = Options({"a"}, {"b"});
  options.batch_tokens = 1;
  try {
    ValidateBatcherOptions(options);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("data.batch_tokens"), std::string::npos);
  }
  options.batch_tokens = 64;
  options.streaming = true;
  options.shuffle_window = 0;
  EXPECT_THROW(ValidateBatcherOptions(options), Error);
}

TEST_F(BatcherErrorTest, TargetLongerThanTheBudgetIsSkippedAsTooLong) {
  std::string long_tgt;
  for (int i = 0; i < 40; ++i) long_tgt += "tomorrow water ";
  BatcherOptions options = Options({"das Haus.", "die Tür."}, {"the house.", long_tgt});
  options.batch_tokens = 16;
  options.max_epochs = 1;
  Batcher batcher(options, vocab_);
  std::vector<Batch> batches = TakeAll(&batcher);
  ASSERT_EQ(batches.size(), 1u);
  EXPECT_EQ(batches[0].sentence_ids, std::vector<int64_t>{0});
  EXPECT_EQ(batcher.corpus_stats().too_long_pieces, 1);
}

}  // namespace
}  // namespace tern::data
