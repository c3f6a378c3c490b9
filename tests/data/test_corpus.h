// Helpers for the data tests: a scratch directory and a small generated parallel corpus.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tern::data::testing {

// A fresh directory under the test temp dir, removed when the object goes.
class ScratchDir {
 public:
  ScratchDir();
  ~ScratchDir();
  const std::string& path() const { return path_; }
  std::string File(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// Writes lines, each followed by '\n'; gzip-compressed when `gzip`.
void WriteLines(const std::string& path, const std::vector<std::string>& lines, bool gzip = false);

// `n` pseudo-random sentence pairs of 1..max_words words over a small German/English-like
// lexicon (with non-ASCII letters), deterministic for `seed`.
struct GeneratedCorpus {
  std::vector<std::string> src, tgt;
};
GeneratedCorpus GenerateCorpus(int n, int max_words, uint32_t seed);

}  // namespace tern::data::testing

#include "data/vocab.h"

namespace tern::data::testing {

// A vocabulary trained once per test binary on GenerateCorpus(400, 8, 7), vocab_size 64.
const Vocab& SmallVocab();

}  // namespace tern::data::testing
