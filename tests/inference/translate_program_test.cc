// End to end with a real SentencePiece vocabulary: a .tern file written with the vocabulary
// embedded, translated through Translator::FromModelFile and through the tern-translate program.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <sstream>

#include "common/file_io.h"
#include "data/vocab.h"
#include "inference/format/model_file.h"
#include "inference/translator.h"
#include "tiny_model.h"

namespace tern::inference {
namespace {

class TranslateProgramTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    std::vector<std::string> corpus;
    const char* words[] = {"the", "house", "is",   "small", "green", "a",
                           "cat", "sees",  "dog",  "runs",  "over",  "river",
                           "we",  "walk",  "home", "today", "big",   "red"};
    for (int i = 0; i < 300; ++i) {
      std::string s;
      for (int j = 0; j < 3 + i % 5; ++j)
        s += std::string(j ? " " : "") + words[(i * 7 + j * 5) % 18];
      corpus.push_back(s);
    }
    data::VocabTrainOptions options;
    options.vocab_size = 48;
    vocab_ = new data::Vocab(data::Vocab::TrainFromSentences(corpus, options));
  }
  static void TearDownTestSuite() { delete vocab_; }

  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("tern_translate_test_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
    model_ = testing::MakeTinyModel({.vocab = vocab_->size(), .eos_bias = 2.5f, .emb_scale = 1.f});
    WriteModelFile(Path("m.tern"), model_.config, vocab_->serialized(), model_.tensors);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string Path(const std::string& name) const { return (dir_ / name).string(); }

  // Runs a shell command; returns its exit code.
  static int Shell(const std::string& command) {
    int status = std::system(command.c_str());
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
  static std::vector<std::string> Lines(const std::string& text) {
    std::vector<std::string> lines;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) lines.push_back(line);
    return lines;
  }

  static inline data::Vocab* vocab_ = nullptr;
  std::filesystem::path dir_;
  testing::TinyModel model_;
  const std::vector<std::string> input_ = {"the cat sees a dog", "", "we walk home today",
                                           "big red house", "runs"};
};

TEST_F(TranslateProgramTest, ModelFileTranslatesLikeTheWeightsItWasWrittenFrom) {
  TranslatorOptions options;
  options.search = {.beam_size = 2, .n_best = 2};
  std::unique_ptr<Translator> from_file = Translator::FromModelFile(Path("m.tern"), options);
  Translator from_weights(model_.config.model(), model_.weights,
                          MakeVocabCodec(vocab_->serialized()), options);
  auto a = from_file->Translate(input_);
  auto b = from_weights.Translate(input_);
  ASSERT_EQ(a.size(), input_.size());
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(a[i].size(), b[i].size());
    for (size_t j = 0; j < a[i].size(); ++j) {
      EXPECT_EQ(a[i][j].text, b[i][j].text);
      EXPECT_EQ(a[i][j].score, b[i][j].score);
    }
  }
}

TEST_F(TranslateProgramTest, ProgramWritesOneLinePerInputLineAndNBestOnRequest) {
  std::string in;
  for (const std::string& line : input_) in += line + "\n";
  WriteFileAtomic(Path("in.txt"), in);
  const std::string bin = TERN_TRANSLATE_BIN;
  ASSERT_EQ(Shell(bin + " --model " + Path("m.tern") + " --beam 2 --threads 1 < " + Path("in.txt") +
                  " > " + Path("out.txt")),
            0);
  TranslatorOptions options;
  options.search = {.beam_size = 2, .n_best = 1};
  auto expected = Translator::FromModelFile(Path("m.tern"), options)->Translate(input_);
  std::vector<std::string> out = Lines(ReadFile(Path("out.txt")));
  ASSERT_EQ(out.size(), input_.size());
  for (size_t i = 0; i < out.size(); ++i) EXPECT_EQ(out[i], expected[i][0].text) << i;

  // Workers (a batch each, on threads of their own) write the same lines in the same order.
  ASSERT_EQ(
      Shell(bin + " --model " + Path("m.tern") + " --beam 2 --workers 3 --max-batch-tokens 8 < " +
            Path("in.txt") + " > " + Path("workers.txt")),
      0);
  EXPECT_EQ(Lines(ReadFile(Path("workers.txt"))), out);

  ASSERT_EQ(Shell(bin + " --model=" + Path("m.tern") + " --beam 3 --n-best < " + Path("in.txt") +
                  " > " + Path("nbest.txt")),
            0);
  std::vector<std::string> nbest = Lines(ReadFile(Path("nbest.txt")));
  // The empty line gets one (empty) translation, the others three.
  ASSERT_EQ(nbest.size(), 3 * (input_.size() - 1) + 1);
  EXPECT_EQ(nbest[0].rfind("0 ||| ", 0), 0u) << nbest[0];
  EXPECT_EQ(nbest.back().rfind("4 ||| ", 0), 0u) << nbest.back();

  ASSERT_EQ(Shell(bin + " --model " + Path("m.tern") + " --scores < " + Path("in.txt") + " > " +
                  Path("scores.txt")),
            0);
  for (const std::string& line : Lines(ReadFile(Path("scores.txt")))) {
    EXPECT_NE(line.find(" ||| "), std::string::npos) << line;
  }
}

TEST_F(TranslateProgramTest, ProgramErrorsAreOneLineAndExitNonZero) {
  const std::string bin = TERN_TRANSLATE_BIN;
  std::string bad = ReadFile(Path("m.tern"));
  bad[bad.size() / 2] ^= 1;
  WriteFileAtomic(Path("bad.tern"), bad);
  EXPECT_EQ(Shell(bin + " --model " + Path("bad.tern") + " < /dev/null 2> " + Path("err.txt")), 1);
  std::vector<std::string> err = Lines(ReadFile(Path("err.txt")));
  ASSERT_EQ(err.size(), 1u);
  EXPECT_NE(err[0].find("checksum"), std::string::npos) << err[0];
  EXPECT_EQ(Shell(bin + " --beam 2 < /dev/null 2> " + Path("err.txt")), 1);
  EXPECT_NE(ReadFile(Path("err.txt")).find("--model"), std::string::npos);
  EXPECT_EQ(Shell(bin + " --model " + Path("m.tern") + " --bogus < /dev/null 2> /dev/null"), 1);
}

// Issue 38, 5: one very long line held up every line behind it. With the default limit (the
// model's max_length - 1 pieces) it is refused in one line on stderr, its output line left empty
// and the others translated; the exit status says a line was refused. --crop translates it cut.
TEST_F(TranslateProgramTest, ALineLongerThanTheLimitIsNamedAndKeepsItsPlace) {
  std::string long_line;
  for (int i = 0; i < 2000; ++i) long_line += "the cat sees a dog ";
  WriteFileAtomic(Path("in.txt"), "the cat\n" + long_line + "\nbig red house\n");
  const std::string bin = TERN_TRANSLATE_BIN;
  EXPECT_EQ(Shell(bin + " --model " + Path("m.tern") + " < " + Path("in.txt") + " > " +
                  Path("out.txt") + " 2> " + Path("err.txt")),
            1);
  std::vector<std::string> out = Lines(ReadFile(Path("out.txt")));
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[1], "");
  const std::vector<std::string> err = Lines(ReadFile(Path("err.txt")));
  ASSERT_EQ(err.size(), 1u);
  EXPECT_NE(err[0].find("tern-translate: line 2: "), std::string::npos) << err[0];
  EXPECT_NE(err[0].find("more than --max-input-length 63"), std::string::npos) << err[0];
  EXPECT_EQ(Shell(bin + " --model " + Path("m.tern") + " --crop --max-input-length 20 < " +
                  Path("in.txt") + " > " + Path("out.txt")),
            0);
  EXPECT_EQ(Lines(ReadFile(Path("out.txt"))).size(), 3u);
}

// Issue 38, 6, 7 and 13: a huge thread count hung, a length factor of inf or 1e9 cut every
// translation to one word, and a directory on stdin read as empty input, exit 0.
TEST_F(TranslateProgramTest, NumericFlagsOutOfRangeAndADirectoryOnStdinAreRefused) {
  const std::string bin = TERN_TRANSLATE_BIN + std::string(" --model ") + Path("m.tern");
  for (const std::string flag :
       {"--threads 100000", "--max-length-factor inf", "--max-length-factor nan",
        "--max-length-factor 1e9", "--alpha nan", "--beam 1000000", "--max-input-length -1",
        "--workers 0", "--workers 100000", "--workers 2 --threads 2", "--workers 2 --top-up"}) {
    EXPECT_EQ(Shell(bin + " " + flag + " < /dev/null 2> " + Path("err.txt")), 1) << flag;
    const std::vector<std::string> err = Lines(ReadFile(Path("err.txt")));
    ASSERT_EQ(err.size(), 1u) << flag;
    EXPECT_NE(err[0].find(flag.substr(0, flag.find(' '))), std::string::npos) << err[0];
  }
  EXPECT_EQ(Shell(bin + " < " + dir_.string() + " 2> " + Path("err.txt")), 1);
  EXPECT_NE(ReadFile(Path("err.txt")).find("standard input is a directory"), std::string::npos);
}

}  // namespace
}  // namespace tern::inference
