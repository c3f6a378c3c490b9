// The prefetcher: the same batches and positions as direct iteration, clean shutdown while its
// thread is blocked, and errors from the thread surfacing in Next.
#include "data/prefetcher.h"

#include <gtest/gtest.h>

#include "common/error.h"
#include "tests/data/test_corpus.h"

namespace tern::data {
namespace {

using testing::ScratchDir;

class PrefetcherTest : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::GeneratedCorpus corpus = testing::GenerateCorpus(500, 10, 4);
    testing::WriteLines(dir_.File("s"), corpus.src);
    testing::WriteLines(dir_.File("t"), corpus.tgt);
    options_.corpus.src_path = dir_.File("s");
    options_.corpus.tgt_path = dir_.File("t");
    options_.batch_tokens = 80;
    options_.maxi_batch = 4;
    options_.streaming = true;
    options_.shuffle_window = 100;
    options_.max_epochs = 2;
  }
  ScratchDir dir_;
  BatcherOptions options_;
  const Vocab& vocab_ = testing::SmallVocab();
};

TEST_F(PrefetcherTest, YieldsTheSameBatchesAndPositionsAsDirectIteration) {
  Batcher direct(options_, vocab_);
  Prefetcher prefetcher(std::make_unique<Batcher>(options_, vocab_), 3);
  EXPECT_EQ(prefetcher.state(), direct.state());
  Batch a, b;
  int n = 0;
  while (direct.Next(&a)) {
    ASSERT_TRUE(prefetcher.Next(&b)) << "batch " << n;
    EXPECT_EQ(a.sentence_ids, b.sentence_ids);
    EXPECT_EQ(a.src, b.src);
    EXPECT_EQ(a.tgt_in, b.tgt_in);
    EXPECT_EQ(a.tgt_out, b.tgt_out);
    EXPECT_EQ(a.src_mask, b.src_mask);
    EXPECT_EQ(prefetcher.state(), direct.state());
    ++n;
  }
  EXPECT_GT(n, 20);
  EXPECT_FALSE(prefetcher.Next(&b));
  EXPECT_FALSE(prefetcher.Next(&b));
}

TEST_F(PrefetcherTest, ResumesFromARestoredBatcher) {
  Batcher direct(options_, vocab_);
  Batch a, b;
  for (int i = 0; i < 9; ++i) ASSERT_TRUE(direct.Next(&a));
  auto restored = std::make_unique<Batcher>(options_, vocab_);
  restored->Restore(direct.state());
  Prefetcher prefetcher(std::move(restored), 2);
  for (int i = 0; i < 15; ++i) {
    ASSERT_TRUE(direct.Next(&a));
    ASSERT_TRUE(prefetcher.Next(&b));
    EXPECT_EQ(a.sentence_ids, b.sentence_ids);
  }
}

TEST_F(PrefetcherTest, StopsCleanlyWithAFullQueue) {
  options_.max_epochs = 0;  // endless: the thread is blocked on the full queue at destruction
  for (int taken : {0, 1, 5}) {
    Prefetcher prefetcher(std::make_unique<Batcher>(options_, vocab_), 2);
    Batch batch;
    for (int i = 0; i < taken; ++i) ASSERT_TRUE(prefetcher.Next(&batch));
  }
}

TEST_F(PrefetcherTest, ErrorsInTheThreadSurfaceInNext) {
  testing::GeneratedCorpus corpus = testing::GenerateCorpus(300, 10, 4);
  corpus.src[250] = "kaputt \xff";
  testing::WriteLines(dir_.File("s"), corpus.src);
  testing::WriteLines(dir_.File("t"), corpus.tgt);
  options_.corpus.on_bad_line = BadLinePolicy::kError;
  options_.shuffle_window = 50;
  options_.maxi_batch = 1;
  Prefetcher prefetcher(std::make_unique<Batcher>(options_, vocab_), 2);
  Batch batch;
  try {
    while (prefetcher.Next(&batch)) {
    }
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("s:251: invalid UTF-8"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tern::data
