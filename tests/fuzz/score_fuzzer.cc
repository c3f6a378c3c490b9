// tern-score's input (data/metrics.h): hypotheses and references split into lines as sacrebleu
// reads them, then corpus BLEU and chrF and their printed lines. The input: the hypotheses, a NUL,
// the references.
#include <cmath>
#include <string>

#include "data/metrics.h"
#include "tests/fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tern::data;
  const std::vector<std::string> parts = tern::fuzz::SplitInput(data, size, 2);
  tern::fuzz::ExpectOnlyErrors([&] {
    const std::vector<std::string> hyps = SplitScoredLines(parts[0], "stdin");
    const std::vector<std::string> refs = SplitScoredLines(parts.size() > 1 ? parts[1] : "", "ref");
    if (hyps.size() != refs.size() || refs.empty()) return;
    const BleuScore bleu = CorpusBleu(hyps, refs);
    const ChrfScore chrf = CorpusChrf(hyps, refs);
    // Scores are percentages, whatever the text (exp(log p) may round a hair past 100, as in
    // sacrebleu).
    const double top = 100 + 1e-9;
    if (!(bleu.score >= 0 && bleu.score <= top) || !(chrf.score >= 0 && chrf.score <= top)) {
      __builtin_trap();
    }
    bleu.Format();
    chrf.Format();
  });
  return 0;
}
