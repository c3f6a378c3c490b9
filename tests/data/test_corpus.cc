// Scratch directories and generated corpora for the data tests.
#include "tests/data/test_corpus.h"

#include <glog/logging.h>
#include <unistd.h>
#include <zlib.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>

namespace tern::data::testing {

ScratchDir::ScratchDir() {
  static std::atomic<int> counter{0};
  const char* tmp = std::getenv("TEST_TMPDIR");
  std::string base = tmp != nullptr ? tmp : std::filesystem::temp_directory_path().string();
  path_ = base + "/tern_data_test_" + std::to_string(getpid()) + "_" + std::to_string(counter++);
  std::filesystem::create_directories(path_);
}

ScratchDir::~ScratchDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

void WriteLines(const std::string& path, const std::vector<std::string>& lines, bool gzip) {
  std::string text;
  for (const std::string& line : lines) text += line + "\n";
  if (gzip) {
    gzFile f = gzopen(path.c_str(), "wb");
    CHECK(f != nullptr) << path;
    CHECK_EQ(gzwrite(f, text.data(), static_cast<unsigned>(text.size())),
             static_cast<int>(text.size()));
    CHECK_EQ(gzclose(f), Z_OK);
    return;
  }
  std::ofstream out(path, std::ios::binary);
  out << text;
  CHECK(out.good()) << path;
}

GeneratedCorpus GenerateCorpus(int n, int max_words, uint32_t seed) {
  static const char* const kSrcWords[] = {
      "der", "die",   "das",  "Haus", "grün",   "Straße", "läuft",  "schön", "Bäume", "über",
      "und", "klein", "groß", "Tür",  "Wasser", "heute",  "morgen", "Stadt", "fährt", "öffnet"};
  static const char* const kTgtWords[] = {
      "the", "house", "green", "street", "runs",     "nice", "trees",  "over",  "and", "small",
      "big", "door",  "water", "today",  "tomorrow", "city", "drives", "opens", "a",   "café"};
  std::mt19937 rng(seed);
  GeneratedCorpus out;
  for (int i = 0; i < n; ++i) {
    int src_words = 1 + static_cast<int>(rng() % max_words);
    int tgt_words = 1 + static_cast<int>(rng() % max_words);
    std::string src, tgt;
    for (int w = 0; w < src_words; ++w) src += (w ? " " : "") + std::string(kSrcWords[rng() % 20]);
    for (int w = 0; w < tgt_words; ++w) tgt += (w ? " " : "") + std::string(kTgtWords[rng() % 20]);
    out.src.push_back(src + ".");
    out.tgt.push_back(tgt + ".");
  }
  return out;
}

}  // namespace tern::data::testing

namespace tern::data::testing {

const Vocab& SmallVocab() {
  static const Vocab* vocab = [] {
    GeneratedCorpus corpus = GenerateCorpus(400, 8, 7);
    std::vector<std::string> sentences = corpus.src;
    sentences.insert(sentences.end(), corpus.tgt.begin(), corpus.tgt.end());
    VocabTrainOptions options;
    options.vocab_size = 64;
    return new Vocab(Vocab::TrainFromSentences(sentences, options));
  }();
  return *vocab;
}

}  // namespace tern::data::testing

// glog calls mktime() for every message, which rewrites glibc's TZ cache under a lock inside
// glibc that ThreadSanitizer cannot see; two threads logging (the prefetcher and the test) then
// look like a race. Only read by TSan builds.
extern "C" const char* __tsan_default_suppressions() { return "race:tzset_internal\n"; }
