// n-best lists (data/nbest.h) as tern-distill-select reads them: every line of the n-best file
// parsed, then the hypothesis with the best sentence BLEU chosen per reference line. The input: the
// n-best text, a NUL, the reference text.
#include <sstream>
#include <string>

#include "data/nbest.h"
#include "tests/fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tern::data;
  const std::vector<std::string> parts = tern::fuzz::SplitInput(data, size, 2);
  std::vector<NBestEntry> entries;
  std::istringstream nbest(parts[0]);
  std::string line;
  for (int n = 1; std::getline(nbest, line); ++n) {
    tern::fuzz::ExpectOnlyErrors(
        [&] { entries.push_back(ParseNBestLine(line, "fuzz.nbest:" + std::to_string(n))); });
  }
  std::vector<std::string> references;
  std::istringstream refs(parts.size() > 1 ? parts[1] : "");
  while (std::getline(refs, line)) references.push_back(line);
  tern::fuzz::ExpectOnlyErrors([&] {
    std::vector<DistilledChoice> choices;
    const std::vector<std::string> chosen = SelectByBleu(entries, references, &choices);
    if (chosen.size() != references.size()) __builtin_trap();
  });
  return 0;
}
