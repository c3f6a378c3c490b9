// Corpus reading with vocabulary encoding (data/corpus.h, data/vocab.h): two files, plain or
// gzip, read line by line with the length limits, checked and encoded as the trainer reads its
// training data. The input: a flag byte (bit 0: the "error" policy; bits 1-4: max_length in
// pieces, 0 for none), the source file, a NUL, the target file.
#include <string>

#include "data/corpus.h"
#include "data/vocab.h"
#include "tests/data/test_corpus.h"
#include "tests/fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  tern::data::testing::SmallVocab();  // trained once, before the first input
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tern::data;
  if (size == 0) return 0;
  const std::vector<std::string> parts = tern::fuzz::SplitInput(data + 1, size - 1, 2);
  CorpusOptions options;
  options.src_path = tern::fuzz::WriteScratchFile("corpus.src", parts[0]);
  options.tgt_path = tern::fuzz::WriteScratchFile("corpus.tgt", parts.size() > 1 ? parts[1] : "");
  options.on_bad_line = data[0] & 1 ? BadLinePolicy::kError : BadLinePolicy::kSkip;
  options.max_length = (data[0] >> 1) & 15;
  options.max_line_bytes = 200;  // small, so inputs reach the cut
  const Vocab& vocab = testing::SmallVocab();
  tern::fuzz::ExpectOnlyErrors([&] {
    CorpusReader reader(options, &vocab);
    Example example;
    while (reader.Next(&example)) {
      for (const auto* side : {&example.src, &example.tgt}) {
        // What the reader promises: pieces of the vocabulary, within max_length, never none.
        if (side->empty() ||
            (options.max_length > 0 && static_cast<int>(side->size()) > options.max_length)) {
          __builtin_trap();
        }
        for (int32_t id : *side) {
          if (id < 0 || id >= vocab.size()) __builtin_trap();
        }
        vocab.Decode(*side);
      }
    }
  });
  return 0;
}
