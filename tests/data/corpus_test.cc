// Corpus reading: plain and gzip input, mismatched sides, and each kind of bad line under both
// policies.
#include "data/corpus.h"

#include <gtest/gtest.h>

#include <fstream>

#include "common/error.h"
#include "tests/data/test_corpus.h"

namespace tern::data {
namespace {

using testing::ScratchDir;
using testing::WriteLines;

std::vector<SentencePair> ReadAll(CorpusReader* reader, std::vector<std::string>* src = nullptr) {
  std::vector<SentencePair> out;
  SentencePair pair;
  while (reader->NextRaw(&pair)) {
    if (src) src->emplace_back(pair.src);
    out.push_back(pair);
  }
  return out;
}

// Runs `fn` and returns the tern::Error message it throws ("" when it does not throw).
template <typename Fn>
std::string ErrorOf(Fn fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

CorpusOptions Options(const ScratchDir& dir, BadLinePolicy policy = BadLinePolicy::kSkip) {
  CorpusOptions options;
  options.src_path = dir.File("train.de");
  options.tgt_path = dir.File("train.en");
  options.on_bad_line = policy;
  return options;
}

TEST(Utf8Test, AcceptsWellFormedAndRejectsMalformed) {
  EXPECT_TRUE(IsValidUtf8(""));
  EXPECT_TRUE(IsValidUtf8("plain ascii"));
  EXPECT_TRUE(IsValidUtf8("Straße über 日本 😀"));
  EXPECT_FALSE(IsValidUtf8("\xff"));
  EXPECT_FALSE(IsValidUtf8("abc\xc3"));           // cut 2-byte sequence
  EXPECT_FALSE(IsValidUtf8("\xc0\xaf"));          // overlong '/'
  EXPECT_FALSE(IsValidUtf8("\xe0\x80\xaf"));      // overlong 3-byte
  EXPECT_FALSE(IsValidUtf8("\xed\xa0\x80"));      // surrogate U+D800
  EXPECT_FALSE(IsValidUtf8("\xf4\x90\x80\x80"));  // past U+10FFFF
  EXPECT_FALSE(IsValidUtf8("\x80"));              // lone continuation
  EXPECT_FALSE(IsValidUtf8("\xe2\x82"));          // cut 3-byte sequence at end
}

TEST(LineReaderTest, HandlesCrLfMissingFinalNewlineAndLongLines) {
  ScratchDir dir;
  {
    std::ofstream out(dir.File("a.txt"), std::ios::binary);
    out << "one\r\ntwo\n" << std::string(200000, 'x') << "\nlast";
  }
  LineReader reader(dir.File("a.txt"), 1000);
  std::string_view line;
  ASSERT_TRUE(reader.Next(&line));
  EXPECT_EQ(line, "one");
  ASSERT_TRUE(reader.Next(&line));
  EXPECT_EQ(line, "two");
  EXPECT_FALSE(reader.truncated());
  ASSERT_TRUE(reader.Next(&line));
  EXPECT_TRUE(reader.truncated());
  EXPECT_EQ(line.size(), 1000u);
  ASSERT_TRUE(reader.Next(&line));
  EXPECT_EQ(line, "last");
  EXPECT_EQ(reader.line_number(), 4);
  EXPECT_FALSE(reader.Next(&line));
}

TEST(LineReaderTest, MissingFileNamesThePath) {
  ScratchDir dir;
  std::string message = ErrorOf([&] { LineReader reader(dir.File("nope.txt"), 100); });
  EXPECT_NE(message.find("nope.txt"), std::string::npos) << message;
}

TEST(CorpusReaderTest, ReadsPlainAndGzipAlike) {
  ScratchDir dir;
  testing::GeneratedCorpus corpus = testing::GenerateCorpus(3000, 10, 1);
  WriteLines(dir.File("train.de"), corpus.src);
  WriteLines(dir.File("train.en"), corpus.tgt);
  WriteLines(dir.File("train.de.gz"), corpus.src, /*gzip=*/true);
  WriteLines(dir.File("train.en.gz"), corpus.tgt, /*gzip=*/true);

  CorpusOptions plain = Options(dir);
  CorpusReader plain_reader(plain, nullptr);
  std::vector<std::string> plain_src;
  std::vector<SentencePair> pairs = ReadAll(&plain_reader, &plain_src);
  ASSERT_EQ(pairs.size(), 3000u);
  EXPECT_EQ(pairs[1234].line, 1234);
  EXPECT_EQ(plain_src[1234], corpus.src[1234]);

  CorpusOptions gz = plain;
  gz.src_path += ".gz";
  gz.tgt_path += ".gz";
  CorpusReader gz_reader(gz, nullptr);
  std::vector<std::string> gz_src;
  ReadAll(&gz_reader, &gz_src);
  EXPECT_EQ(gz_src, plain_src);
  EXPECT_EQ(gz_reader.stats().pairs_kept, 3000);
  EXPECT_EQ(gz_reader.stats().skipped(), 0);
}

TEST(CorpusReaderTest, MismatchedLengthsNameBothFilesAndTheLine) {
  ScratchDir dir;
  WriteLines(dir.File("train.de"), {"a", "b", "c"});
  WriteLines(dir.File("train.en"), {"x", "y"});
  CorpusReader reader(Options(dir), nullptr);
  std::string message = ErrorOf([&] { ReadAll(&reader); });
  EXPECT_NE(message.find("train.en ends after line 2"), std::string::npos) << message;
  EXPECT_NE(message.find("train.de goes on (line 3)"), std::string::npos) << message;

  WriteLines(dir.File("train.en.gz"), {"x", "y", "z", "w"}, /*gzip=*/true);
  CorpusOptions options = Options(dir);
  options.tgt_path += ".gz";
  CorpusReader gz_reader(options, nullptr);
  message = ErrorOf([&] { ReadAll(&gz_reader); });
  EXPECT_NE(message.find("train.de ends after line 3"), std::string::npos) << message;
  EXPECT_NE(message.find("train.en.gz goes on (line 4)"), std::string::npos) << message;
}

class BadLineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // Lines 2 (invalid UTF-8), 4 (empty target), 5 (too long) are bad.
    WriteLines(dir_.File("train.de"),
               {"gut", "kaputt \xc3\x28", "auch gut", "leer", std::string(300, 'a'), "ende"});
    WriteLines(dir_.File("train.en"), {"good", "broken", "also good", "", "long", "end"});
  }
  ScratchDir dir_;
};

TEST_F(BadLineTest, SkipCountsEachReason) {
  CorpusOptions options = Options(dir_);
  options.max_line_bytes = 100;
  CorpusReader reader(options, nullptr);
  std::vector<std::string> src;
  std::vector<SentencePair> pairs = ReadAll(&reader, &src);
  EXPECT_EQ(src, (std::vector<std::string>{"gut", "auch gut", "ende"}));
  EXPECT_EQ(pairs[2].line, 5);
  const CorpusStats& stats = reader.stats();
  EXPECT_EQ(stats.pairs_read, 6);
  EXPECT_EQ(stats.pairs_kept, 3);
  EXPECT_EQ(stats.invalid_utf8, 1);
  EXPECT_EQ(stats.empty, 1);
  EXPECT_EQ(stats.too_long_bytes, 1);
  EXPECT_EQ(stats.too_long_pieces, 0);
  EXPECT_NE(stats.Summary().find("1 invalid UTF-8, 1 empty, 1 too long in bytes"),
            std::string::npos)
      << stats.Summary();
}

TEST_F(BadLineTest, ErrorPolicyNamesFileAndLine) {
  CorpusOptions options = Options(dir_, BadLinePolicy::kError);
  options.max_line_bytes = 100;
  {
    CorpusReader reader(options, nullptr);
    std::string message = ErrorOf([&] { ReadAll(&reader); });
    EXPECT_NE(message.find("train.de:2: invalid UTF-8"), std::string::npos) << message;
  }
  // Without the invalid line, the empty target on line 4 is the first error.
  WriteLines(dir_.File("train.de"),
             {"gut", "gut", "auch gut", "leer", std::string(300, 'a'), "ende"});
  {
    CorpusReader reader(options, nullptr);
    std::string message = ErrorOf([&] { ReadAll(&reader); });
    EXPECT_NE(message.find("train.en:4: empty line"), std::string::npos) << message;
  }
  WriteLines(dir_.File("train.en"), {"good", "broken", "also good", "x", "long", "end"});
  {
    CorpusReader reader(options, nullptr);
    std::string message = ErrorOf([&] { ReadAll(&reader); });
    EXPECT_NE(message.find("train.de:5: line longer than 100 bytes"), std::string::npos) << message;
  }
}

// Issue 38, 12: an all-whitespace corpus trained and exited 0, its lines counted as kept.
TEST(CorpusReaderTest, BlankLinesAreEmptyLines) {
  ScratchDir dir;
  WriteLines(dir.File("train.de"), {"gut", "  \t ", "auch gut", "\xc2\xa0\xe3\x80\x80"});
  WriteLines(dir.File("train.en"), {"good", "blank", "also good", "nbsp"});
  CorpusReader reader(Options(dir), nullptr);
  std::vector<std::string> src;
  ReadAll(&reader, &src);
  EXPECT_EQ(src, (std::vector<std::string>{"gut", "auch gut"}));
  EXPECT_EQ(reader.stats().empty, 2);
  CorpusReader strict(Options(dir, BadLinePolicy::kError), nullptr);
  const std::string message = ErrorOf([&] { ReadAll(&strict); });
  EXPECT_NE(message.find("train.de:2: blank line"), std::string::npos) << message;
}

// Found by fuzz_corpus: a line of control characters passed as text and encoded to no pieces, an
// empty sentence kept for training.
TEST(CorpusReaderTest, LinesWithoutPiecesAreBlankLines) {
  ScratchDir dir;
  WriteLines(dir.File("train.de"), {"das Haus.", "\x01\x02", "die T\xc3\xbcr."});
  WriteLines(dir.File("train.en"), {"the house.", "something", "the door."});
  CorpusReader reader(Options(dir), &testing::SmallVocab());
  Example example;
  int kept = 0;
  while (reader.Next(&example)) {
    EXPECT_FALSE(example.src.empty());
    ++kept;
  }
  EXPECT_EQ(kept, 2);
  EXPECT_EQ(reader.stats().empty, 1);
  EXPECT_EQ(reader.stats().pairs_kept, 2);
}

TEST(CorpusReaderTest, TooManyPiecesSkippedOrError) {
  ScratchDir dir;
  const Vocab& vocab = testing::SmallVocab();
  std::string long_line;
  for (int i = 0; i < 30; ++i) long_line += "Haus Wasser Stadt ";
  WriteLines(dir.File("train.de"), {"das Haus.", long_line, "die Tür."});
  WriteLines(dir.File("train.en"), {"the house.", "water.", "the door."});
  CorpusOptions options = Options(dir);
  options.max_length = 20;
  {
    CorpusReader reader(options, &vocab);
    Example example;
    std::vector<int64_t> ids;
    while (reader.Next(&example)) {
      ids.push_back(example.id);
      EXPECT_LE(example.src.size(), 20u);
      EXPECT_EQ(vocab.Decode(example.src), example.id == 0 ? "das Haus." : "die Tür.");
    }
    EXPECT_EQ(ids, (std::vector<int64_t>{0, 2}));
    EXPECT_EQ(reader.stats().too_long_pieces, 1);
    EXPECT_EQ(reader.stats().pairs_kept, 2);
  }
  options.on_bad_line = BadLinePolicy::kError;
  CorpusReader reader(options, &vocab);
  Example example;
  std::string message = ErrorOf([&] {
    while (reader.Next(&example)) {
    }
  });
  EXPECT_NE(message.find("train.de:2:"), std::string::npos) << message;
  EXPECT_NE(message.find("more than max_length 20"), std::string::npos) << message;
}

TEST(CorpusReaderTest, CorruptGzipIsAnError) {
  ScratchDir dir;
  testing::GeneratedCorpus corpus = testing::GenerateCorpus(2000, 10, 3);
  WriteLines(dir.File("full.gz"), corpus.src, /*gzip=*/true);
  std::string bytes;
  {
    std::ifstream in(dir.File("full.gz"), std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  {
    std::ofstream out(dir.File("train.de"), std::ios::binary);
    out << bytes.substr(0, bytes.size() / 2);
  }
  WriteLines(dir.File("train.en"), corpus.tgt);
  CorpusReader reader(Options(dir), nullptr);
  std::string message = ErrorOf([&] { ReadAll(&reader); });
  EXPECT_NE(message.find("train.de: read error"), std::string::npos) << message;
}

TEST(BadLinePolicyTest, ParsesNamesAndRejectsOthers) {
  EXPECT_EQ(ParseBadLinePolicy("skip", "data.on_bad_line"), BadLinePolicy::kSkip);
  EXPECT_EQ(ParseBadLinePolicy("error", "data.on_bad_line"), BadLinePolicy::kError);
  std::string message = ErrorOf([] { ParseBadLinePolicy("ignore", "data.on_bad_line"); });
  EXPECT_NE(message.find("data.on_bad_line"), std::string::npos) << message;
}

}  // namespace
}  // namespace tern::data
